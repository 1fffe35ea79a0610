#!/usr/bin/env bash
# Greedy identity on SmolLM2 at TP 1 and TP 3 (mpirun -np 3, --debug-sync) for the searched skip
# set (with and without a pruned draft head of 8192 ids), SWIFT and ASD, against plain decoding.
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model from
# scripts/get-model.sh; everything written to STUDY_OUT (default
# out/studies/2026-11-25-skip-choosers/tp3), the draft vocabulary counted there on the calibration
# prompts first (smol-vocab.json; kept when present).
#   docs/results/2026-11-25-skip-choosers/tp3/run.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$repo" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none
B=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec || exit 1
M=$(scripts/get-model.sh smollm2-135m-instruct) || exit 1
P=$repo/bench/prompts
SKIPS=$repo/configs/skips/smollm2-135m-bo.json
out=${STUDY_OUT:-out/studies/2026-11-25-skip-choosers/tp3}
mkdir -p "$out" && cd "$out" || exit 1
[ -f smol-vocab.json ] ||
  $B count-vocab --model "$M" --chat --generate 128 --threads 1 --weights-dtype bf16 --out smol-vocab.json \
    --prompts-file $P/chat.jsonl $P/qa.jsonl $P/summarisation.jsonl $P/maths.jsonl > /dev/null
G=(generate --model "$M" --chat --prompt "Explain why the sky is blue in three sentences."
   --max-new-tokens 64 --threads 1 --json --weights-dtype bf16)
run() { local name=$1; shift; timeout 600 "$@" > "$name.json" 2> "$name.err"; echo "$name rc $?"; }
run plain-np1 $B "${G[@]}"
run plain-np3 mpirun -np 3 $B "${G[@]}"
run bo-np1 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS
run bo-np3 mpirun -np 3 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS --debug-sync
run bov-np3 mpirun -np 3 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS \
  --draft-vocab smol-vocab.json --draft-vocab-size 8192 --debug-sync
run swift-np1 $B "${G[@]}" --spec swift --swift-ratio 0.1 --swift-window 16
run swift-np3 mpirun -np 3 $B "${G[@]}" --spec swift --swift-ratio 0.1 --swift-window 16 --debug-sync
run asd-np3 mpirun -np 3 $B "${G[@]}" --spec asd --debug-sync
python3 - <<'PY'
import json
def load(n):
    t = open(f'{n}.json').read().strip().splitlines()
    return json.loads(t[-1]) if t else None
ref = load('plain-np1')['tokens']
for n in ['plain-np3', 'bo-np1', 'bo-np3', 'bov-np3', 'swift-np1', 'swift-np3', 'asd-np3']:
    d = load(n)
    if d is None:
        print(n, 'no output'); continue
    state = d.get('spec', {}).get('drafter_state', {})
    print(n, 'equal' if d['tokens'] == ref else 'DIFFERENT', 'alpha',
          round(d.get('acceptance_rate', 0), 3),
          state and {k: state.get(k) for k in ('best_matchness', 'steps', 'best_attention', 'best_mlp')})
PY
