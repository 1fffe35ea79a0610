#!/usr/bin/env bash
# Configures and builds selfspec into ./build (Release, Ninja, warnings as errors).
#   scripts/build.sh [--target NAME]... [CMAKE_ARGS...]
# Without --target every target is built (the tests, the kernel benchmarks and, when nvcc is
# found, the CUDA objects: what scripts/test.sh needs). `--target NAME` (repeatable; also
# `--target=NAME`, or the space-separated list in $SELFSPEC_BUILD_TARGETS) builds only NAME and
# what it depends on, e.g. `scripts/build.sh --target selfspec` for the binary alone
# (scripts/demo.sh). Targets change nothing in the CMake cache, so a later full build of the same
# directory (scripts/test.sh) is configured exactly as it would have been. Other arguments go to
# CMake, e.g. scripts/build.sh -DSELFSPEC_CUDA=OFF. SELFSPEC_BUILD_DIR names the build directory.
# With ccache installed the compilers run under it (when a build directory is first configured;
# SELFSPEC_CCACHE=0 turns it off), so that a second build directory (scripts/test-no-mpi.sh)
# recompiles only what differs.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SELFSPEC_BUILD_DIR:-build}
targets=()
read -r -a targets <<<"${SELFSPEC_BUILD_TARGETS:-}"
cmake_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --target)
      [ $# -ge 2 ] || { echo "build.sh: --target needs a target name" >&2; exit 2; }
      targets+=("$2")
      shift 2
      ;;
    --target=*)
      targets+=("${1#--target=}")
      shift
      ;;
    *)
      cmake_args+=("$1")
      shift
      ;;
  esac
done
if [ "${SELFSPEC_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  # CMake (>= 3.17) takes these as the initial CMAKE_<LANG>_COMPILER_LAUNCHER.
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSELFSPEC_WERROR=ON \
  ${cmake_args[@]+"${cmake_args[@]}"}
target_args=()
[ ${#targets[@]} -eq 0 ] || target_args=(--target "${targets[@]}")
cmake --build "$build_dir" -j "$(nproc)" ${target_args[@]+"${target_args[@]}"}
