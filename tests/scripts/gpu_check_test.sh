#!/usr/bin/env bash
# Test of scripts/gpu/check.sh on a machine without a GPU: with the programs of this build
# (--no-build) it must report "no device" with exit 3 in both reports, every GPU check "not run",
# never a pass; without a kit it must stop with exit 4 naming the missing kit; bad arguments give
# exit 2. Skipped (77) where nvidia-smi lists a GPU: there check.sh runs the real checks.
#   tests/scripts/gpu_check_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail

src=${1:?usage: gpu_check_test.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: gpu_check_test.sh SOURCE_DIR BUILD_DIR}
check=$src/scripts/gpu/check.sh
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIPPED: this machine has a GPU (scripts/gpu/check.sh runs the real checks there)"
  exit 77
fi
command -v python3 >/dev/null || { echo "SKIPPED: no python3"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# ---- No device: exit 3, both reports, nothing passed ----
set +e
"$check" "$tmp/out" --no-build --build-dir "$build" >"$tmp/stdout" 2>"$tmp/stderr"
status=$?
set -e
[ "$status" -eq 3 ] || { cat "$tmp/stderr"; fail "exit $status without a GPU, not 3"; }
grep -q 'no device' "$tmp/stderr" || fail "stderr does not say 'no device'"
head -1 "$tmp/out/check.md" | grep -q 'NO DEVICE' || fail "check.md: $(head -1 "$tmp/out/check.md")"
python3 - "$tmp/out/check.json" <<'EOF' || fail "check.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["result"] == "no device" and r["exit_code"] == 3, (r["result"], r["exit_code"])
assert r["device"]["present"] is False
steps = {s["name"]: s for s in r["steps"]}
assert steps["environment"]["status"] == "info"
gpu = [s for s in r["steps"] if s["name"].startswith(("ctest_", "cli_", "bench_", "kernel_",
                                                      "nccl_"))]
assert len(gpu) >= 10, [s["name"] for s in gpu]
assert all(s["status"] == "not run" for s in gpu), [(s["name"], s["status"]) for s in gpu]
assert not any(s["status"] == "passed" for s in gpu)
EOF

# ---- No kit: exit 4, the kit named ----
set +e
"$check" "$tmp/out2" --kit "$tmp/no-kit" --build-dir "$tmp/build" >/dev/null 2>"$tmp/stderr2"
status=$?
set -e
[ "$status" -eq 4 ] || { cat "$tmp/stderr2"; fail "exit $status without a kit, not 4"; }
python3 - "$tmp/out2/check.json" "$tmp/no-kit" <<'EOF' || fail "check.json without a kit"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["result"] == "build failed" and r["exit_code"] == 4, (r["result"], r["exit_code"])
kit = [s for s in r["steps"] if s["name"] == "kit"][0]
assert kit["status"] == "failed" and any(sys.argv[2] in n for n in kit["notes"]), kit
EOF
[ ! -e "$tmp/build/CMakeCache.txt" ] || fail "configure ran without a kit"

# ---- Bad arguments: exit 2 ----
for args in "" "$tmp/out3 --budget -5" "$tmp/out3 --no-such-option"; do
  set +e
  # shellcheck disable=SC2086  # word splitting of the argument lists is wanted
  "$check" $args >/dev/null 2>&1
  status=$?
  set -e
  [ "$status" -eq 2 ] || fail "arguments '$args' gave exit $status, not 2"
done
echo "PASS"
