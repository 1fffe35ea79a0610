#!/usr/bin/env bash
# One ctest of the label "fuzz" (registered by tests/fuzz/fuzz_tests.cmake):
#   run_fuzz_test.sh FUZZ_BUILD_DIR NAME SECONDS WORK_DIR
# Runs the fuzz target NAME, built by scripts/build-fuzz.sh, first on every seed
# (tests/fuzz/corpus/NAME) and past finding (tests/fuzz/regressions/NAME), then fuzzes for
# SECONDS into a fresh corpus under WORK_DIR (with tests/fuzz/NAME.dict when there is one). A crash, leak, sanitizer report or broken
# invariant fails the test and leaves the input in WORK_DIR/artifacts. Exits 77 (ctest: skipped)
# with the reason when the fuzz build found no libFuzzer runtime.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 FUZZ_BUILD_DIR NAME SECONDS WORK_DIR" >&2; exit 2; }
fuzz_build=$1 name=$2 seconds=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
binary=$fuzz_build/bin/${name}_fuzz

if [ -f "$fuzz_build/unavailable.txt" ]; then
  echo "SKIPPED: fuzzing is unavailable: $(cat "$fuzz_build/unavailable.txt")"
  exit 77
fi
if [ ! -x "$binary" ]; then
  echo "error: $binary is not built: run scripts/build-fuzz.sh (scripts/test.sh does)" >&2
  exit 1
fi

inputs=("$here/corpus/$name")
[ -d "$here/regressions/$name" ] && inputs+=("$here/regressions/$name")
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
# The seeds and past findings, one run each: a failure here names the file. Each is small, so a
# tighter memory limit than the fuzzing's catches a finding that only wasted memory.
count=$(find "${inputs[@]}" -type f | wc -l)
if ! find "${inputs[@]}" -type f -print0 | xargs -0 "$binary" -rss_limit_mb=1024 \
  -error_exitcode=1 -timeout_exitcode=1 >"$work/inputs.log" 2>&1; then
  cat "$work/inputs.log"
  echo "error: one of the $count seeds and past findings of $name fails (above)" >&2
  exit 1
fi
echo "$count seeds and past findings of $name pass"
# Then fuzz from them (with the target's dictionary, NAME.dict, when it has one); only the fresh
# corpus in WORK_DIR is written to. libFuzzer's own exit code for a finding is 77, ctest's
# "skipped": ask for 1. The seed is fixed (SELFSPEC_FUZZ_SEED, default 1) so that a failure in
# the test command can be replayed; scripts/fuzz.sh explores with random seeds.
dict=()
[ -f "$here/$name.dict" ] && dict=(-dict="$here/$name.dict")
exec "$binary" -seed="${SELFSPEC_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/artifacts/" "${dict[@]}" \
  "$work/corpus" "${inputs[@]}"
