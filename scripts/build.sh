#!/usr/bin/env bash
# Configures and builds selfspec into ./build (Release, Ninja, warnings as errors).
# Extra arguments go to CMake, e.g. scripts/build.sh -DSELFSPEC_CUDA=OFF. With ccache installed
# the compilers run under it (when a build directory is first configured; SELFSPEC_CCACHE=0
# turns it off), so that a second build directory (scripts/test-no-mpi.sh) recompiles only what
# differs.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SELFSPEC_BUILD_DIR:-build}
if [ "${SELFSPEC_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  # CMake (>= 3.17) takes these as the initial CMAKE_<LANG>_COMPILER_LAUNCHER.
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSELFSPEC_WERROR=ON "$@"
cmake --build "$build_dir" -j "$(nproc)"
