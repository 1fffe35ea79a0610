#!/usr/bin/env bash
# Qwen2.5-Coder-1.5B, early-exit drafting at TP 1 and TP 2 (issue 11): the exit head trained by
# docs/results/2026-11-25-eesd-sweep/run-qwen.sh 6 (N = 6) drafts for the first HumanEval
# evaluation prompt with Beta-TS (chain and token tree) and Cali-TS; greedy output against plain
# decoding (plain-np1.json of run.sh). Then exit-head data for one calibration prompt (N = 8, 16
# generated tokens) collected at TP 1 and TP 2 and compared value by value.
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model and HumanEval
# from scripts/get-model.sh and scripts/get-prompts.sh; the head and predictor from run-qwen.sh's
# STUDY_OUT (EESD_SWEEP_OUT, default out/studies/2026-11-25-eesd-sweep); everything written to
# STUDY_OUT (default out/studies/2026-11-25-qwen-tp2, where run.sh wrote plain-np1.json).
#   docs/results/2026-11-25-qwen-tp2/early-exit.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none
B=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec || exit 1
M=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct) || exit 1
H=$(scripts/get-prompts.sh humaneval) || exit 1
PROMPT=$(python3 -c "
import json, sys
for line in open(sys.argv[1]):
    p = json.loads(line)
    if p['split'] == 'evaluation':
        print(p['prompt']); break" "$H")
SWEEP=$(cd "${EESD_SWEEP_OUT:-out/studies/2026-11-25-eesd-sweep}" && pwd) || exit 1
out=${STUDY_OUT:-out/studies/2026-11-25-qwen-tp2}
mkdir -p "$out" && cd "$out" || exit 1
G=(generate --model "$M" --prompt "$PROMPT" --max-new-tokens 40 --threads 1 --json --weights-dtype bf16
   --spec early-exit --exit-head $SWEEP/head-qwen-n6.safetensors --max-draft 3)
CALI=(--controller cali-ts --cali-predictor $SWEEP/predictor-qwen-n6.safetensors)
run() { local name=$1; shift; timeout 900 "$@" > "$name.json" 2> "$name.err"; echo "$name rc $?"; }
run ee-np1 $B "${G[@]}" --controller thompson
run ee-np2 mpirun -np 2 $B "${G[@]}" --controller thompson --debug-sync
run ee-tree-np2 mpirun -np 2 $B "${G[@]}" --controller thompson --tree 0.6:3,1:1 --debug-sync
run ee-cali-np1 $B "${G[@]}" "${CALI[@]}"
run ee-cali-np2 mpirun -np 2 $B "${G[@]}" "${CALI[@]}" --debug-sync
rm -rf ee-data-np1 ee-data-np2
C=(collect-exit-data --model "$M" --prompts-file "$H" --max-prompts-per-task 1 --exit-layer 8
   --top-k 8 --generate 16 --threads 1 --weights-dtype bf16)
timeout 900 $B "${C[@]}" --out ee-data-np1 > ee-collect-np1.log 2>&1; echo "collect np1 rc $?"
timeout 900 mpirun -np 2 $B "${C[@]}" --out ee-data-np2 > ee-collect-np2.log 2>&1; echo "collect np2 rc $?"
REPO=$repo /usr/bin/python3 - <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ['REPO'], 'scripts'))
import numpy as np
from exit_head.safetensors_io import read_safetensors, bf16_to_f32
def load(n):
    lines = open(f'{n}.json').read().strip().splitlines()
    return json.loads(lines[-1]) if lines else None
ref = load('plain-np1')['tokens']
for n in ['ee-np1', 'ee-np2', 'ee-tree-np2', 'ee-cali-np1', 'ee-cali-np2']:
    d = load(n)
    print(f"{n:12s} {'equal to plain' if d['tokens'] == ref else 'DIFFERS from plain'} alpha "
          f"{d['acceptance_rate']:.3f} drafted {d['drafted']} accepted {d['accepted']}")
for x, y in [('ee-np1', 'ee-np2'), ('ee-cali-np1', 'ee-cali-np2')]:
    a, b = load(x), load(y)
    print(f'{x} vs {y} stats', 'identical' if (a['drafted'], a['accepted']) == (b['drafted'], b['accepted']) else 'different')
x, _ = read_safetensors('ee-data-np1/shard-00000.safetensors')
y, _ = read_safetensors('ee-data-np2/shard-00000.safetensors')
for name in sorted(x):
    a, b = np.asarray(x[name]), np.asarray(y[name])
    if np.array_equal(a, b):
        print(f'data {name:14s} identical at TP 1 and TP 2 (bit for bit)')
        continue
    fa = bf16_to_f32(a) if name == 'hidden' else a.astype(np.float64)
    fb = bf16_to_f32(b) if name == 'hidden' else b.astype(np.float64)
    diff = np.abs(fa - fb)
    print(f'data {name:14s} differs in {np.count_nonzero(a != b)} of {a.size} values; '
          f'max |diff| {diff.max():.3g}, max |value| {np.abs(fa).max():.3g}')
PY
