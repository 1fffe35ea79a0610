#!/usr/bin/env bash
# Long fuzzing runs of one parser fuzz target (tests/fuzz; the test suite runs each briefly):
#   scripts/fuzz.sh TARGET [SECONDS]        (default 600 seconds; TARGET as in tests/fuzz/*_fuzz.cpp)
# Builds the fuzz targets (scripts/build-fuzz.sh), then fuzzes from the committed seeds and past
# findings (with tests/fuzz/TARGET.dict when there is one) into a corpus kept outside the
# repository, so later runs go on from it:
#   SELFSPEC_FUZZ_DIR   corpus and crash artifacts (default ~/.cache/selfspec/fuzz/TARGET)
#   SELFSPEC_FUZZ_JOBS  parallel fuzzing processes (libFuzzer -fork; default 1)
# Extra libFuzzer flags may follow after "--". Prints executions, coverage and artifacts at the
# end; exits non-zero when libFuzzer found something (its input is in the artifacts directory:
# fix the parser, then commit the input under tests/fuzz/regressions/TARGET/).
set -euo pipefail
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
target=$1
shift
seconds=600
if [ $# -ge 1 ] && [ "$1" != "--" ]; then
  seconds=$1
  shift
fi
[ $# -ge 1 ] && [ "$1" = "--" ] && shift
cd "$(dirname "$0")/.."
if [ ! -f "tests/fuzz/${target}_fuzz.cpp" ]; then
  targets=(tests/fuzz/*_fuzz.cpp)
  targets=("${targets[@]#tests/fuzz/}")
  echo "fuzz: unknown target '$target' (targets: ${targets[*]%_fuzz.cpp})" >&2
  exit 2
fi

./scripts/build-fuzz.sh
fuzz_build=${SELFSPEC_BUILD_DIR:-build}/fuzz
if [ -f "$fuzz_build/unavailable.txt" ]; then
  echo "fuzz: cannot fuzz: $(cat "$fuzz_build/unavailable.txt")" >&2
  exit 1
fi
binary=$PWD/$fuzz_build/bin/${target}_fuzz
work=${SELFSPEC_FUZZ_DIR:-$HOME/.cache/selfspec/fuzz/$target}
jobs=${SELFSPEC_FUZZ_JOBS:-1}
mkdir -p "$work/corpus" "$work/artifacts"
inputs=("$PWD/tests/fuzz/corpus/$target")
[ -d "tests/fuzz/regressions/$target" ] && inputs+=("$PWD/tests/fuzz/regressions/$target")
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-fork="$jobs" -ignore_crashes=1)
dict=()
[ -f "tests/fuzz/$target.dict" ] && dict=(-dict="$PWD/tests/fuzz/$target.dict")

echo "fuzz: $target for ${seconds}s, $jobs job(s); corpus $work/corpus, artifacts $work/artifacts"
before=$(find "$work/artifacts" -type f | wc -l)
status=0
(cd "$work" && "$binary" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "${parallel[@]}" "${dict[@]}" "$@" \
  "$work/corpus" "${inputs[@]}") 2>&1 | tee "$work/last-run.log" || status=$?

echo "---- $target: summary"
grep -E '^#[0-9]+' "$work/last-run.log" | tail -n 1 || true
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
  "$work/last-run.log" || true
echo "corpus: $(find "$work/corpus" -type f | wc -l) inputs in $work/corpus"
after=$(find "$work/artifacts" -type f | wc -l)
echo "artifacts: $after in $work/artifacts ($((after - before)) new)"
find "$work/artifacts" -type f | head -n 20
[ "$after" -eq "$before" ] || status=1
exit "$status"
