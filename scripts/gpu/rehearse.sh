#!/usr/bin/env bash
# Rehearses the GPU machine's first run here, without a GPU, to show that the kit (not this
# machine's -dev packages) is what the build uses. Needs root (debootstrap, chroot, mounts) and
# the kit (scripts/gpu/pack.sh).
#
#   sudo scripts/gpu/rehearse.sh [--chroot DIR] [--cuda DIR] [--kit DIR] [--out DIR]
#                                [-- CHECK.SH OPTIONS...]
#
# 1. Makes (once) a Debian chroot of this machine's release with debootstrap: minbase plus g++,
#    make, python3, python3-venv, binutils, ccache - none of the -dev packages of the dependencies
#    the kit carries (it refuses to go on if one is installed there) - and in it a venv at
#    /opt/torch/.venv holding CMake and ninja from pip, as on the GPU machine (the wheels are
#    downloaded with this machine's pip).
# 2. In a private mount namespace, bind-mounts into it: the CUDA toolkit (read-only, at
#    /usr/local/cuda-<version>), this worktree (at its own path) and the ccache folder; and
#    makes the NCCL of the GPU machine: the venv's site-packages hold
#    nvidia/nccl/{include/nccl.h,lib/libnccl.so.2} (no unversioned libnccl.so), like the pip
#    package nvidia-nccl-cu13, while the toolkit's own nccl.h is covered by a header that fails
#    to compile, so that it cannot be used unnoticed (the library is linked by its full path,
#    which CMakeCache.txt shows).
# 3. Runs `scripts/gpu/check.sh OUT --build-dir <repo>/build-gpu-rehearsal ...` inside (budget and
#    build bound raised for this machine's cores), with PATH=/usr/bin:/bin and no CUDA on PATH.
# 4. Passes only when check.sh exits 3 (no device) with both reports written, every dependency
#    came from the kit (check.json and a grep of CMakeCache.txt) and selfspec's libraries resolve.
# Exit status: 0 the rehearsal passed, 1 it failed (the reason is printed), 2 bad arguments.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
chroot_dir=/var/tmp/selfspec-gpu-rehearsal/root
cuda=/usr/local/cuda
kit=$repo/.gpu-kit
out=$repo/build-gpu-rehearsal/report
build=$repo/build-gpu-rehearsal
mirror=http://deb.debian.org/debian
check_args=()

die() {
  echo "rehearse.sh: $*" >&2
  exit 1
}
# Steps 2 and 3, run by this script itself under `unshare -m` (mounts vanish with it).
in_namespace() {
  mount --bind "$REPO" "$CHROOT$REPO"
  mount --bind "$CUDA_REAL" "$CHROOT$CUDA_REAL"
  mount -o remount,bind,ro "$CHROOT$CUDA_REAL"
  mount --bind "$POISON/nccl.h" "$CHROOT$CUDA_REAL/include/nccl.h"
  mount --bind "$NCCL_LIB" "$NCCL_PKG/lib/libnccl.so.2"
  mount -t proc proc "$CHROOT/proc"
  mount --bind /dev "$CHROOT/dev"
  local env=(PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 SELFSPEC_GPU_KIT="$KIT")
  if [ -d "$CCACHE_HOST" ]; then
    mkdir -p "$CHROOT/var/cache/ccache"
    mount --bind "$CCACHE_HOST" "$CHROOT/var/cache/ccache"
    env+=(CCACHE_DIR=/var/cache/ccache "CCACHE_BASEDIR=$(dirname "$REPO")")
  fi
  echo "rehearse.sh: nvcc in the chroot: $(chroot "$CHROOT" "$CUDA_REAL/bin/nvcc" --version | tail -1)"
  echo "rehearse.sh: the toolkit's nccl.h there: $(head -c 70 "$CHROOT$CUDA_REAL/include/nccl.h")"
  local status=0
  # shellcheck disable=SC2016  # $1 and $@ belong to the inner bash
  chroot "$CHROOT" /usr/bin/env -i "${env[@]}" /bin/bash -c 'cd "$1" && shift && exec "$@"' _ \
    "$REPO" scripts/gpu/check.sh "$OUT" --build-dir "$BUILD" --budget 7200 --build-timeout 6600 \
    "$@" || status=$?
  echo "rehearse.sh: ldd of selfspec in the chroot (the dependencies' libraries):"
  chroot "$CHROOT" ldd "$BUILD/bin/selfspec" \
    | grep -E 'fmt|yaml|sentencepiece|pcre2|crypto|nccl|cudart|cublas|not found' || true
  exit "$status"
}
if [ "${1:-}" = "--in-namespace" ]; then
  shift
  in_namespace "$@"
fi

while [ $# -gt 0 ]; do
  case "$1" in
    --chroot) chroot_dir=$2; shift 2 ;;
    --cuda) cuda=$2; shift 2 ;;
    --kit) kit=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; check_args=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "rehearse.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and bind mounts)"
for tool in chroot unshare mount python3; do
  command -v "$tool" >/dev/null || die "needs '$tool'"
done
[ -f "$kit/manifest.json" ] || die "no kit at $kit: run scripts/gpu/pack.sh first"
cuda_real=$(realpath "$cuda")
[ -x "$cuda_real/bin/nvcc" ] || die "no CUDA toolkit at $cuda (no bin/nvcc)"
[ -f "$cuda_real/include/nccl.h" ] || die "the rehearsal takes NCCL from the toolkit: no $cuda_real/include/nccl.h"
nccl_lib=$(realpath "$cuda_real/lib64/libnccl.so.2" 2>/dev/null || true)
[ -f "$nccl_lib" ] || die "no $cuda_real/lib64/libnccl.so.2"
case "$repo" in /*/*) ;; *) die "the worktree path $repo is too short to mirror" ;; esac

# ---- 1. The chroot ----
# shellcheck disable=SC1091  # the release is read from this machine's os-release
release=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
if [ ! -f "$chroot_dir/etc/debian_version" ]; then
  command -v debootstrap >/dev/null || die "needs debootstrap to make the chroot (apt-get install debootstrap)"
  echo "rehearse.sh: making a $release chroot in $chroot_dir (debootstrap, a few minutes)"
  mkdir -p "$chroot_dir"
  debootstrap --variant=minbase \
    --include=g++,make,python3,python3-venv,binutils,ccache,ca-certificates \
    "$release" "$chroot_dir" "$mirror"
fi
in_chroot() { chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# None of the kit's packages (nor any -dev package of them) may be installed in the chroot.
mapfile -t kit_packages < <(python3 "$repo/scripts/gpu/rehearse.py" kit-packages "$kit/manifest.json")
# shellcheck disable=SC2016  # dpkg-query's format, not the shell's
installed=$(in_chroot dpkg-query -W -f='${Package}\n')
clash=()
for p in "${kit_packages[@]}" libboost-dev libopenmpi-dev pkg-config pkgconf; do
  case "$p" in
    libpcre2-8-0|libssl3) continue ;;  # runtime libraries of every Debian/Ubuntu base system
  esac
  if grep -qx -- "$p" <<<"$installed"; then clash+=("$p"); fi
done
[ ${#clash[@]} -eq 0 ] || die "the chroot has packages the kit must provide: ${clash[*]}"
echo "rehearse.sh: chroot $chroot_dir ($(in_chroot cat /etc/debian_version)); its -dev packages:" \
     "$(grep -- '-dev$' <<<"$installed" | tr '\n' ' ')"

# The venv that stands for PyTorch's (/opt/torch/.venv on the GPU machine), with CMake and ninja
# from pip as there (downloaded here by this machine's pip, installed offline in the chroot).
venv=$chroot_dir/opt/torch/.venv
if [ ! -x "$venv/bin/cmake" ] || [ ! -x "$venv/bin/ninja" ]; then
  wheels=$chroot_dir/var/cache/selfspec-wheels
  mkdir -p "$wheels"
  python3 -m pip download --only-binary=:all: --no-deps -d "$wheels" cmake ninja \
    || die "pip download of the cmake and ninja wheels failed (needs PyPI)"
  [ -x "$venv/bin/pip" ] || in_chroot python3 -m venv /opt/torch/.venv
  in_chroot /opt/torch/.venv/bin/pip install -q --no-index --find-links /var/cache/selfspec-wheels \
    cmake ninja
fi
echo "rehearse.sh: the chroot's venv: $(in_chroot /opt/torch/.venv/bin/cmake --version | head -1)," \
     "ninja $(in_chroot /opt/torch/.venv/bin/ninja --version); cmake on PATH:" \
     "$(in_chroot /bin/sh -c 'command -v cmake || echo none')"
site=$(in_chroot /opt/torch/.venv/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
nccl_pkg=$chroot_dir$site/nvidia/nccl
mkdir -p "$nccl_pkg/include" "$nccl_pkg/lib"
cp "$cuda_real/include/nccl.h" "$nccl_pkg/include/nccl.h"
rm -f "$nccl_pkg/lib/libnccl.so"
touch "$nccl_pkg/lib/libnccl.so.2"  # a mount point for the toolkit's library

# ---- 2. Mounts, 3. check.sh, in a private mount namespace ----
mkdir -p "$build" "$out" "$chroot_dir$repo" "$chroot_dir$cuda_real" "$chroot_dir/tmp"
ln -sfn "$(basename "$cuda_real")" "$chroot_dir/usr/local/cuda"
ccache_dir=${CCACHE_DIR:-/work/.ccache}
poison=$(mktemp -d)
trap 'rm -rf "$poison"' EXIT
printf '#error "rehearse.sh: the CUDA toolkit'"'"'s nccl.h is hidden; NCCL must come from the pip package"\n' \
  >"$poison/nccl.h"
rm -rf "$out"
mkdir -p "$out"

export CHROOT=$chroot_dir REPO=$repo CUDA_REAL=$cuda_real NCCL_LIB=$nccl_lib NCCL_PKG=$nccl_pkg \
       POISON=$poison CCACHE_HOST=$ccache_dir OUT=$out BUILD=$build KIT=$kit
set +e
unshare -m --propagation private "$0" --in-namespace "${check_args[@]}"
status=$?
set -e

# ---- 4. What proves it ----
echo "rehearse.sh: check.sh exited with $status"
if [ ! -f "$out/check.json" ] || [ ! -f "$out/check.md" ]; then
  die "check.sh wrote no check.json/check.md in $out"
fi
# check.sh's report: "no device" (exit 3), every dependency from the kit, no step failed.
python3 "$repo/scripts/gpu/rehearse.py" verify "$out/check.json" "$status" || exit 1
# No dependency header or library of this machine's /usr in the build's cache.
if grep -nE '(=|;)/usr/(include|lib/x86_64-linux-gnu|share)/[^;]*(fmt|yaml|[Bb]oost|[Ee]igen|gtest|GTest|gmock|benchmark|sentencepiece|pcre2|CLI11|nlohmann|openssl|crypto)' \
     "$build/CMakeCache.txt"; then
  die "CMakeCache.txt names a system copy of a kit dependency (above)"
fi
echo "rehearse.sh: PASSED: built from the kit alone in $chroot_dir; check.sh said 'no device' (exit 3);" \
     "reports in $out"
