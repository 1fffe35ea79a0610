#!/usr/bin/env bash
# Test of scripts/gpu/pack.sh, offline: it packs two made-up .deb files (--debs, --packages) and
# checks what the kit must hold (relocated .pc files, relative symlinks, multiarch headers merged,
# docs and static archives beside shared libraries dropped, the manifest, a carried model and
# nccl.h), that the size limit refuses an oversized kit without touching the existing one, and
# that a missing package and bad arguments are refused. Skipped (77) without dpkg-deb or xz.
#   tests/scripts/gpu_pack_test.sh SOURCE_DIR
set -euo pipefail

src=${1:?usage: gpu_pack_test.sh SOURCE_DIR}
pack=$src/scripts/gpu/pack.sh
for tool in dpkg-deb xz tar python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIPPED: no $tool"
    exit 77
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
no_scratch_left() {
  local left
  for left in "$tmp"/out/.gpu-kit-pack.*; do
    [ ! -e "$left" ] || fail "pack.sh left its scratch folder $left"
  done
}

# ---- Two made-up packages ----
dev=$tmp/pkg-dev
mkdir -p "$dev/DEBIAN" "$dev/usr/include/fake" "$dev/usr/include/x86_64-linux-gnu/fake" \
         "$dev/usr/lib/x86_64-linux-gnu/pkgconfig" "$dev/usr/share/doc/selfspec-fake-dev"
printf 'Package: selfspec-fake-dev\nVersion: 1.2-3\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: test\n' \
  >"$dev/DEBIAN/control"
echo '#include <fake/conf.h>' >"$dev/usr/include/fake/fake.h"
echo '#define FAKE_CONF 1' >"$dev/usr/include/x86_64-linux-gnu/fake/conf.h"
cat >"$dev/usr/lib/x86_64-linux-gnu/pkgconfig/fake.pc" <<'EOF'
prefix=/usr
libdir=/usr/lib/x86_64-linux-gnu
includedir=${prefix}/include

Name: fake
Description: a made-up library (URL: https://example.org/x)
Version: 1.2
Libs: -L${libdir} -lfake
Cflags: -I/usr/include/fake
EOF
ln -s /usr/lib/x86_64-linux-gnu/libfake.so.1 "$dev/usr/lib/x86_64-linux-gnu/libfake.so"
ln -s libgone.so.1 "$dev/usr/lib/x86_64-linux-gnu/libgone.so"
echo 'static archive' >"$dev/usr/lib/x86_64-linux-gnu/libfake.a"
echo 'copyright' >"$dev/usr/share/doc/selfspec-fake-dev/copyright"

lib=$tmp/pkg-lib
mkdir -p "$lib/DEBIAN" "$lib/usr/lib/x86_64-linux-gnu"
printf 'Package: selfspec-fake1\nVersion: 1.2-3\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: test\n' \
  >"$lib/DEBIAN/control"
# 3 MiB that xz cannot shrink: the kit is about that large.
head -c $((3 * 1024 * 1024)) /dev/urandom >"$lib/usr/lib/x86_64-linux-gnu/libfake.so.1"

mkdir -p "$tmp/debs"
dpkg-deb --root-owner-group -b "$dev" "$tmp/debs/selfspec-fake-dev.deb" >/dev/null
dpkg-deb --root-owner-group -b "$lib" "$tmp/debs/selfspec-fake1.deb" >/dev/null
mkdir -p "$tmp/model"
echo '{"model_type": "llama"}' >"$tmp/model/config.json"
echo 'weights' >"$tmp/model/model.safetensors"

packages="selfspec-fake-dev selfspec-fake1"
printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 3\n#define NCCL_PATCH 4\n' >"$tmp/nccl.h"

# ---- A kit within the limit ----
kit=$tmp/out/.gpu-kit
"$pack" --debs "$tmp/debs" --packages "$packages" --model "$tmp/model" --out "$kit" --max-mb 48 \
  --nccl-header "$tmp/nccl.h" \
  >"$tmp/pack.log" 2>&1 || { cat "$tmp/pack.log"; fail "pack.sh failed"; }
if [ ! -f "$kit/root.tar.xz" ] || [ ! -f "$kit/manifest.json" ]; then
  fail "no root.tar.xz / manifest.json"
fi
[ -f "$kit/models/model/config.json" ] || fail "the model was not carried"
no_scratch_left
root=$tmp/root
mkdir -p "$root"
tar -C "$root" -xJf "$kit/root.tar.xz"
pc=$root/usr/lib/x86_64-linux-gnu/pkgconfig/fake.pc
# shellcheck disable=SC2016  # ${pcfiledir} is pkg-config's, literally in the file
grep -q '^prefix=${pcfiledir}/../../..$' "$pc" || { cat "$pc"; fail "prefix not relocated"; }
# shellcheck disable=SC2016
grep -q '^Cflags: -I${pcfiledir}/../../../include/fake$' "$pc" || { cat "$pc"; fail "Cflags not relocated"; }
grep -q 'https://example.org/x' "$pc" || fail "the relocation touched a URL"
link=$root/usr/lib/x86_64-linux-gnu/libfake.so
[ "$(readlink "$link")" = "libfake.so.1" ] || fail "libfake.so -> $(readlink "$link"), not relative"
[ -e "$root/usr/lib/x86_64-linux-gnu/libgone.so" ] && fail "a dangling link was kept"
[ -e "$root/usr/lib/x86_64-linux-gnu/libfake.a" ] && fail "a static archive beside its .so was kept"
[ -e "$root/usr/share/doc" ] && fail "docs were kept"
[ -f "$root/usr/include/fake/conf.h" ] || fail "the multiarch header was not merged into include/"
[ -e "$root/usr/include/x86_64-linux-gnu" ] && fail "include/x86_64-linux-gnu was kept"
python3 - "$kit/manifest.json" <<'EOF' || fail "manifest.json"
import hashlib, json, os, sys
m = json.load(open(sys.argv[1]))
kit = os.path.dirname(sys.argv[1])
assert {p["package"]: p["version"] for p in m["packages"]} == \
    {"selfspec-fake-dev": "1.2-3", "selfspec-fake1": "1.2-3"}, m["packages"]
tar = os.path.join(kit, "root.tar.xz")
assert m["root_tarball"]["sha256"] == hashlib.sha256(open(tar, "rb").read()).hexdigest()
assert m["models"][0]["name"] == "model" and "config.json" in m["models"][0]["files"]
assert m["nccl_header"]["version"] == "2.3.4", m["nccl_header"]
assert os.path.isfile(os.path.join(kit, m["nccl_header"]["header"]))
EOF

# ---- Over the limit: refused with exit 3, the existing kit left as it was ----
touch "$kit/marker"
set +e
"$pack" --debs "$tmp/debs" --packages "$packages" --no-nccl-header --out "$kit" --max-mb 2 \
  >"$tmp/big.log" 2>&1
status=$?
set -e
[ "$status" -eq 3 ] || { cat "$tmp/big.log"; fail "an oversized kit gave exit $status, not 3"; }
grep -q 'over the limit of 2 MiB' "$tmp/big.log" || fail "no size message: $(cat "$tmp/big.log")"
[ -f "$kit/marker" ] || fail "the refused kit replaced the existing one"
no_scratch_left

# ---- A missing package, bad arguments ----
set +e
"$pack" --debs "$tmp/debs" --packages "selfspec-fake-dev selfspec-absent" \
  --out "$tmp/k2" >"$tmp/missing.log" 2>&1
status=$?
"$pack" --max-mb lots >/dev/null 2>&1
bad=$?
set -e
if [ "$status" -ne 1 ] || ! grep -q "selfspec-absent" "$tmp/missing.log"; then
  fail "a missing package gave exit $status: $(cat "$tmp/missing.log")"
fi
[ ! -e "$tmp/k2" ] || fail "a failed pack wrote a kit"
[ "$bad" -eq 2 ] || fail "bad arguments gave exit $bad, not 2"
echo "PASS"
