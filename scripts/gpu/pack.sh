#!/usr/bin/env bash
# Writes the GPU kit: a git-ignored folder (default .gpu-kit/ at the repository root, at most
# 48 MiB) holding what scripts/gpu/check.sh needs on a bare GPU machine (nvcc, CMake, ninja,
# Python and PyTorch's NCCL, but no apt, no network, no MPI) and that machine lacks:
#   root.tar.xz    the Debian packages of the header and library dependencies (scripts/setup.sh),
#                  unpacked, trimmed (no docs, manuals, sources), made relocatable (.pc files
#                  find their prefix through ${pcfiledir}, absolute symlinks made relative) and
#                  compressed; pkgconf with a wrapper bin/pkg-config that sees the kit's .pc files
#                  only. check.sh unpacks it into its build folder.
#   models/        small real models for the checks, when given (--model DIR: an HF-layout folder
#                  such as stories260K); without one the checks use the synthetic models they make
#                  on the machine.
#   nccl/include/  nccl.h of this machine's CUDA toolkit (--nccl-header), for a machine whose NCCL
#                  (PyTorch's pip package) brings its library without the header.
#   manifest.json  packages, versions and SHA-256 sums of the .debs, the tarball and the models.
# Run it here (Debian, apt with network; dpkg-deb, tar, xz, sha256sum):
#   scripts/gpu/pack.sh [--out DIR] [--model DIR] [--debs DIR] [--packages "P ..."]
#                       [--max-mb N] [--nccl-header FILE | --no-nccl-header]
#   --out DIR          the kit folder (default <repo>/.gpu-kit); replaced only when the new kit
#                      is complete and within the size limit
#   --model DIR        a model folder to carry (repeatable; default: none)
#   --debs DIR         take the .deb files from DIR instead of `apt-get download` (offline)
#   --packages "P ..." the packages to carry instead of the built-in list (tests use this)
#   --max-mb N         size limit of the kit folder in MiB (default 48)
#   --nccl-header FILE nccl.h to carry (default /usr/local/cuda/include/nccl.h when it exists);
#                      --no-nccl-header carries none
# Exit status: 0 kit written, 1 error (a missing tool, package or model; download failure),
# 2 bad arguments, 3 the kit would exceed the size limit (nothing written).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly repo

# What the build needs beyond a compiler, CMake, ninja, the CUDA toolkit and NCCL (CMakeLists.txt;
# scripts/setup.sh installs the same as -dev packages). MPI is not carried: the GPU machine
# builds without it (-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON).
default_packages=(
  libfmt-dev libfmt9
  nlohmann-json3-dev
  libyaml-cpp-dev libyaml-cpp0.7
  libcli11-dev
  libboost1.74-dev            # headers (random, math); libboost-dev is its metapackage
  libboost-context1.74-dev libboost-context1.74.0  # the batched loop's fibers (decode/)
  libeigen3-dev
  libsentencepiece-dev libsentencepiece0
  libpcre2-dev libpcre2-8-0   # libpcre2-dev's 16/32-bit and posix .so links dangle: dropped
  libgtest-dev libgmock-dev   # static libraries and CMake config (not the googletest sources)
  libbenchmark-dev libbenchmark1debian
  libssl-dev libssl3          # OpenSSL's libcrypto (launch/: SHA-256)
  libcpp-httplib-dev libcpp-httplib0.11  # `selfspec serve`'s HTTP (serve/); its .pc needs:
  zlib1g-dev libbrotli-dev libbrotli1
  pkgconf-bin libpkgconf3     # pkg_check_modules needs a pkg-config; the machine may have none
)

out="$repo/.gpu-kit"
models=()
debs_dir=""
packages=("${default_packages[@]}")
max_mb=48
nccl_header=/usr/local/cuda/include/nccl.h
[ -f "$nccl_header" ] || nccl_header=""

die() {
  echo "pack.sh: $*" >&2
  exit 1
}
usage_error() {
  echo "pack.sh: $*" >&2
  echo "usage: scripts/gpu/pack.sh [--out DIR] [--model DIR] [--debs DIR]" \
       "[--packages \"P ...\"] [--max-mb N] [--nccl-header FILE | --no-nccl-header]" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage_error "--out needs a folder"; out=$2; shift 2 ;;
    --model) [ $# -ge 2 ] || usage_error "--model needs a folder"; models+=("$2"); shift 2 ;;
    --debs) [ $# -ge 2 ] || usage_error "--debs needs a folder"; debs_dir=$2; shift 2 ;;
    --packages)
      [ $# -ge 2 ] || usage_error "--packages needs a list"
      read -r -a packages <<<"$2"; shift 2 ;;
    --max-mb) [ $# -ge 2 ] || usage_error "--max-mb needs a number"; max_mb=$2; shift 2 ;;
    --nccl-header)
      [ $# -ge 2 ] || usage_error "--nccl-header needs a file"
      [ -f "$2" ] || usage_error "--nccl-header: no file '$2'"
      nccl_header=$2; shift 2 ;;
    --no-nccl-header) nccl_header=""; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
[[ "$max_mb" =~ ^[0-9]+$ ]] || usage_error "--max-mb takes a whole number of MiB (got '$max_mb')"
[ ${#packages[@]} -gt 0 ] || usage_error "--packages lists no package"

for tool in dpkg-deb tar xz sha256sum python3 find; do
  command -v "$tool" >/dev/null || die "needs '$tool' (Debian: dpkg, tar, xz-utils, coreutils, python3, findutils)"
done
for m in "${models[@]}"; do
  [ -f "$m/config.json" ] || die "--model '$m': the folder has no config.json"
done

out=$(realpath -m "$out")
parent=$(dirname "$out")
mkdir -p "$parent"
# Everything is made in a scratch folder beside the kit and moved into place at the end.
work=$(mktemp -d "$parent/.gpu-kit-pack.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root" "$work/kit"

# ---- The .deb files ----
if [ -n "$debs_dir" ]; then
  [ -d "$debs_dir" ] || die "--debs folder '$debs_dir' does not exist"
  for p in "${packages[@]}"; do
    found=""
    for deb in "$debs_dir"/*.deb; do
      [ -e "$deb" ] || continue
      if [ "$(dpkg-deb -f "$deb" Package)" = "$p" ]; then found=$deb; break; fi
    done
    [ -n "$found" ] || die "no .deb of package '$p' in $debs_dir"
    cp "$found" "$work/debs/"
  done
else
  command -v apt-get >/dev/null || die "needs apt-get to download the packages (or pass --debs DIR)"
  echo "pack.sh: downloading ${#packages[@]} packages with apt-get download"
  if ! (cd "$work/debs" && apt-get download "${packages[@]}" >"$work/apt.log" 2>&1); then
    cat "$work/apt.log" >&2
    die "apt-get download failed: it needs a Debian mirror (network) and current package lists" \
        "('apt-get update'); or pass --debs DIR with the .deb files"
  fi
fi

# ---- Unpack, trim, relocate ----
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
done
root=$work/root
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" "$root/usr/src" \
       "$root/usr/share/bug"
# Absolute symlinks would point into this machine: make those that land inside the kit relative
# and drop the rest; then drop links that lead nowhere (libpcre2-dev's 16/32-bit/posix .so).
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  if [ -e "$root$target" ]; then
    ln -sfn "$(realpath -s -m --relative-to="$(dirname "$link")" "$root$target")" "$link"
  else
    echo "pack.sh: dropping ${link#"$root"/} -> $target (outside the kit)"
    rm -f "$link"
  fi
done < <(find "$root" -type l -lname '/*' -print0)
while IFS= read -r -d '' link; do
  echo "pack.sh: dropping dangling link ${link#"$root"/} -> $(readlink "$link")"
  rm -f "$link"
done < <(find "$root" -xtype l -print0)
# Multiarch headers (OpenSSL's configuration.h) live in include/x86_64-linux-gnu, a folder the
# compiler searches only under /usr: merge them into include/, which CMake's results name.
multiarch=$root/usr/include/x86_64-linux-gnu
if [ -d "$multiarch" ]; then
  while IFS= read -r -d '' f; do
    dest=$root/usr/include/${f#"$multiarch"/}
    [ ! -e "$dest" ] || die "multiarch header ${f#"$root"/} would replace ${dest#"$root"/}"
    mkdir -p "$(dirname "$dest")"
    mv "$f" "$dest"
  done < <(find "$multiarch" -type f -print0)
  rm -rf "$multiarch"
fi
# Static archives beside a shared library are never linked (CMake prefers the .so): dropped.
while IFS= read -r -d '' archive; do
  if [ -e "${archive%.a}.so" ]; then rm -f "$archive"; fi
done < <(find "$root/usr/lib" -name 'lib*.a' -print0)
# .pc files: every /usr path becomes ${pcfiledir}/<up to usr>, so pkg-config gives paths inside
# wherever the kit is unpacked.
while IFS= read -r -d '' pc; do
  rel=$(realpath -s -m --relative-to="$(dirname "$pc")" "$root/usr")
  sed -i -E "s#(^|[=[:space:]]|-I|-L)/usr(/|[[:space:]]|\$)#\\1\${pcfiledir}/$rel\\2#g" "$pc"
  if grep -nE '(^|[=[:space:]]|-I|-L)/' "$pc" >&2; then
    die "${pc#"$root"/} still names an absolute path after relocation (above)"
  fi
done < <(find "$root" -name '*.pc' -print0)
# CMake package files must not name this machine's /usr either (Debian's compute their prefix
# from their own location; the /usr they mention is only compared against, never used).
mkdir -p "$root/bin"
if [ -x "$root/usr/bin/pkgconf" ]; then
  # pkg-config for CMake (PKG_CONFIG_EXECUTABLE): the kit's pkgconf, with its library, seeing the
  # kit's .pc folders instead of the system's (CMake adds CMAKE_PREFIX_PATH's through
  # PKG_CONFIG_PATH).
  cat >"$root/bin/pkg-config" <<'EOF'
#!/bin/sh
# pkg-config of the selfspec GPU kit (scripts/gpu/pack.sh): the kit's pkgconf, which sees the
# kit's .pc files only.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/usr/lib/x86_64-linux-gnu
PKG_CONFIG_LIBDIR=$lib/pkgconfig:$root/usr/share/pkgconfig
LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_LIBDIR LD_LIBRARY_PATH
exec "$root/usr/bin/pkgconf" "$@"
EOF
  chmod 755 "$root/bin/pkg-config"
fi

# ---- The kit ----
kit=$work/kit
echo "pack.sh: compressing $(du -sh "$root" | cut -f1) into root.tar.xz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$root" -cf - . \
  | xz -T0 -6 >"$kit/root.tar.xz"
if [ ${#models[@]} -gt 0 ]; then
  mkdir -p "$kit/models"
  for m in "${models[@]}"; do
    cp -rL "$m" "$kit/models/$(basename "$m")"
    chmod -R u+w "$kit/models/$(basename "$m")"
  done
fi

if [ -n "$nccl_header" ]; then
  mkdir -p "$kit/nccl/include"
  cp "$nccl_header" "$kit/nccl/include/nccl.h"
fi

# manifest.json: what the kit holds, with checksums (check.sh verifies the tarball's).
python3 "$repo/scripts/gpu/pack_manifest.py" "$work"

bytes=$(du -sb "$kit" | cut -f1)
limit=$((max_mb * 1024 * 1024))
mib=$(python3 -c "print(f'{$bytes / 1048576:.1f}')")
if [ "$bytes" -gt "$limit" ]; then
  echo "pack.sh: the kit would be $mib MiB ($bytes bytes), over the limit of $max_mb MiB;" \
       "nothing written" >&2
  exit 3
fi
rm -rf "$out"
mv "$kit" "$out"
echo "pack.sh: wrote $out: $mib MiB ($bytes bytes) of at most $max_mb MiB," \
     "${#packages[@]} packages, ${#models[@]} model(s), nccl.h: ${nccl_header:-none}"
