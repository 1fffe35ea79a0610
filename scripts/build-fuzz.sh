#!/usr/bin/env bash
# Builds the parser fuzz targets (tests/fuzz) into <build dir>/fuzz (build/fuzz; SELFSPEC_BUILD_DIR
# as in build.sh): a separate CMake build with clang, libFuzzer, ASan and UBSan of the parser
# libraries only (SELFSPEC_FUZZ=ON), so the gcc build is untouched. Without clang or its libFuzzer
# runtime it says so, writes the reason to <dir>/unavailable.txt and exits 0: the fuzz tests then
# report themselves skipped with that reason. Extra arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_dir=${SELFSPEC_BUILD_DIR:-build}/fuzz
cxx=${SELFSPEC_FUZZ_CXX:-clang++}
mkdir -p "$fuzz_dir"
rm -f "$fuzz_dir/unavailable.txt"

unavailable() {
  echo "$1" >"$fuzz_dir/unavailable.txt"
  echo "build-fuzz: $1; the fuzz tests will be skipped" >&2
  exit 0
}

command -v "$cxx" >/dev/null ||
  unavailable "no $cxx (the Debian packages clang and libclang-rt-dev provide it)"
probe=$fuzz_dir/probe
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe.cpp" -o "$probe" 2>"$probe.log"; then
  unavailable "$cxx cannot link -fsanitize=fuzzer,address,undefined (is libclang-rt-dev, clang's libFuzzer runtime, installed?): $(head -c 300 "$probe.log")"
fi

cmake -S . -B "$fuzz_dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="${cxx%++}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSELFSPEC_FUZZ=ON -DSELFSPEC_WERROR=ON "$@" >/dev/null
cmake --build "$fuzz_dir" -j "$(nproc)"
