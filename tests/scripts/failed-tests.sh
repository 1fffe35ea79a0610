#!/usr/bin/env bash
# Repeats, after a ctest run, what its failed tests printed, briefly and last: a CI log that keeps
# only its tail then still says why a test failed (ctest --output-on-failure prints a test's output
# when it ends, which in a suite of 800 tests is far from the end). For each failed test of the
# last run in BUILD_DIR: its name, time and result, the last LINES lines of its output, and then
# again its lines that say FAIL or error. scripts/test.sh and scripts/test-no-mpi.sh call it when
# ctest fails.
#
#   tests/scripts/failed-tests.sh BUILD_DIR [LINES]      (LINES: 15)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [LINES]" >&2; exit 2; }
temporary=$1/Testing/Temporary
lines=${2:-15}
failed=$temporary/LastTestsFailed.log
[ -s "$failed" ] || { echo "failed-tests: no failed tests recorded in $failed"; exit 0; }
names=$(cut -d: -f2- "$failed")
echo "=== failed tests ($(echo "$names" | grep -c .)): the end of what each printed ==="
for name in $names; do
  # LastTest.log holds each test's output between "Output:" + a rule and "<end of output>".
  awk -v name="$name" -v lines="$lines" '
    $0 ~ "^[0-9]+/[0-9]+ Testing: " && $3 == name { inside = 1; next }
    inside && /^Output:$/ { getline; output = 1; n = 0; next }
    inside && output && /^<end of output>$/ { output = 0; next }
    inside && output { kept[n++] = $0; next }
    inside && /^Test time =/ { time = $4 }
    inside && /^Test (Passed|Failed)|^Test Timeout|\*\*\*/ { result = $0 }
    inside && /^"[^"]+" end time:/ {
      printf "--- %s (%s s, %s): last %d of %d lines\n", name, time, result, \
             (n < lines ? n : lines), n
      for (i = (n > lines ? n - lines : 0); i < n; i++) print "  " kept[i]
      f = 0
      for (i = 0; i < n; i++) if (kept[i] ~ /FAIL|[Ee]rror/) said[f++] = kept[i]
      for (i = (f > 5 ? f - 5 : 0); i < f; i++) print "  ! " said[i]
      exit
    }' "$temporary/LastTest.log"
done
echo "=== failed: $(echo "$names" | tr '\n' ' ')==="
