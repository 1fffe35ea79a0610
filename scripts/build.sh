#!/usr/bin/env bash
# Configures and builds selfspec into ./build (Release, Ninja, warnings as errors).
# Extra arguments go to CMake, e.g. scripts/build.sh -DSELFSPEC_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SELFSPEC_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSELFSPEC_WERROR=ON "$@"
cmake --build "$build_dir" -j "$(nproc)"
