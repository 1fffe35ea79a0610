#!/usr/bin/env bash
# Token trees on SmolLM2-135M at TP 1 and TP 3 (mpirun -np 3, --debug-sync): greedy output against
# plain decoding for the searched set, SWIFT and ASD, each with --tree swift; one sampled run per
# TP degree with the same seed.
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model from
# scripts/get-model.sh; everything written to STUDY_OUT (default out/studies/2026-11-25-trees/tp3).
#   docs/results/2026-11-25-trees/tp3/run.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$repo" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none
B=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec || exit 1
M=$(scripts/get-model.sh smollm2-135m-instruct) || exit 1
SKIPS=$repo/configs/skips/smollm2-135m-bo.json
out=${STUDY_OUT:-out/studies/2026-11-25-trees/tp3}
mkdir -p "$out" && cd "$out" || exit 1
G=(generate --model "$M" --chat --prompt "Explain why the sky is blue in three sentences."
   --max-new-tokens 64 --threads 1 --json --weights-dtype bf16)
run() { local name=$1; shift; timeout 600 "$@" > "$name.json" 2> "$name.err"; echo "$name rc $?"; }
run plain-np1 $B "${G[@]}"
run bo-tree-np1 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS --tree swift
run bo-tree-np3 mpirun -np 3 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS --tree swift --debug-sync
run swift-tree-np3 mpirun -np 3 $B "${G[@]}" --spec swift --swift-ratio 0.1 --swift-window 16 --tree swift --debug-sync
run asd-tree-np3 mpirun -np 3 $B "${G[@]}" --spec asd --tree swift --debug-sync
S=(--temperature 0.8 --top-k 40 --seed 7)
run sampled-tree-np1 $B "${G[@]}" "${S[@]}" --spec layer-skip --skip-config $SKIPS --tree 0.6:4,1:2
run sampled-tree-np3 mpirun -np 3 $B "${G[@]}" "${S[@]}" --spec layer-skip --skip-config $SKIPS --tree 0.6:4,1:2 --debug-sync
python3 - <<'PY'
import json
def load(n):
    lines = open(f'{n}.json').read().strip().splitlines()
    return json.loads(lines[-1]) if lines else None
ref = load('plain-np1')['tokens']
for n in ['bo-tree-np1', 'bo-tree-np3', 'swift-tree-np3', 'asd-tree-np3', 'sampled-tree-np1', 'sampled-tree-np3']:
    d = load(n)
    if d is None:
        print(n, 'no output'); continue
    same = 'equal to plain' if d['tokens'] == ref else 'differs from plain'
    print(f"{n:18s} {same:20s} alpha {d['acceptance_rate']:.3f} M {d['mean_accepted_length']:.2f} "
          f"drafted {d['drafted']} accepted {d['accepted']} alternatives {d['alternatives']} "
          f"alt-accepted {d['alternatives_accepted']}")
a, b = load('sampled-tree-np1'), load('sampled-tree-np3')
if a and b:
    print('sampled np1 vs np3 tokens', 'identical' if a['tokens'] == b['tokens'] else 'different',
          '| stats', 'identical' if all(a[k] == b[k] for k in ('drafted', 'accepted', 'alternatives', 'alternatives_accepted')) else 'different')
PY
