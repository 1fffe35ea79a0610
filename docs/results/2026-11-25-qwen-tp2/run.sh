#!/usr/bin/env bash
# Qwen2.5-Coder-1.5B (Q4_K_M GGUF) at TP 1 and TP 2 (mpirun -np 2, --debug-sync): greedy output of
# every skip chooser of issue 10 (the searched set, with and without a token tree; SWIFT; ASD)
# against plain decoding at TP 1, and one sampled run per TP degree with the same seed. TP 2 needs
# the loader to split ffn_down (8960 columns) inside its 256-element Q4_K/Q6_K blocks.
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model and HumanEval
# from scripts/get-model.sh and scripts/get-prompts.sh; everything written to STUDY_OUT (default
# out/studies/2026-11-25-qwen-tp2).
#   docs/results/2026-11-25-qwen-tp2/run.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none
B=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec || exit 1
M=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct) || exit 1
H=$(scripts/get-prompts.sh humaneval) || exit 1
SKIPS=$repo/configs/skips/qwen2.5-coder-1.5b-bo.json
PROMPT=$(python3 -c "
import json, sys
for line in open(sys.argv[1]):
    p = json.loads(line)
    if p['split'] == 'evaluation':
        print(p['prompt']); break" "$H")
out=${STUDY_OUT:-out/studies/2026-11-25-qwen-tp2}
mkdir -p "$out" && cd "$out" || exit 1
G=(generate --model "$M" --prompt "$PROMPT" --max-new-tokens 40 --threads 1 --json
   --weights-dtype bf16)
run() { local name=$1; shift; timeout 900 "$@" > "$name.json" 2> "$name.err"; echo "$name rc $?"; }
run plain-np1 $B "${G[@]}"
run plain-np2 mpirun -np 2 $B "${G[@]}" --debug-sync
run bo-np1 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS --controller fixed --max-draft 2
run bo-np2 mpirun -np 2 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS --controller fixed --max-draft 2 --debug-sync
run bo-tree-np2 mpirun -np 2 $B "${G[@]}" --spec layer-skip --skip-config $SKIPS --tree swift --debug-sync
run swift-np2 mpirun -np 2 $B "${G[@]}" --spec swift --swift-ratio 0.2 --swift-window 16 --debug-sync
run asd-tree-np2 mpirun -np 2 $B "${G[@]}" --spec asd --tree 0.5:3,0.8:2,1:1 --debug-sync
S=(--temperature 0.8 --top-k 40 --seed 7)
run sampled-tree-np1 $B "${G[@]}" "${S[@]}" --spec layer-skip --skip-config $SKIPS --tree 0.6:4,1:2
run sampled-tree-np2 mpirun -np 2 $B "${G[@]}" "${S[@]}" --spec layer-skip --skip-config $SKIPS --tree 0.6:4,1:2 --debug-sync
python3 - <<'PY'
import json
def load(n):
    try:
        lines = open(f'{n}.json').read().strip().splitlines()
    except OSError:
        return None
    return json.loads(lines[-1]) if lines else None
ref = load('plain-np1')['tokens']
for n in ['plain-np2', 'bo-np1', 'bo-np2', 'bo-tree-np2', 'swift-np2', 'asd-tree-np2',
          'sampled-tree-np1', 'sampled-tree-np2']:
    d = load(n)
    if d is None:
        print(n, 'no output'); continue
    same = 'equal to plain' if d['tokens'] == ref else 'differs from plain'
    stats = ''
    if 'acceptance_rate' in d:
        stats = (f"alpha {d['acceptance_rate']:.3f} M {d['mean_accepted_length']:.2f} drafted "
                 f"{d['drafted']} accepted {d['accepted']} alternatives {d.get('alternatives', 0)} "
                 f"alt-accepted {d.get('alternatives_accepted', 0)}")
    print(f"{n:18s} {same:20s} {stats}")
for a, b in [('bo-np1', 'bo-np2'), ('sampled-tree-np1', 'sampled-tree-np2')]:
    x, y = load(a), load(b)
    if x and y:
        keys = ('drafted', 'accepted', 'alternatives', 'alternatives_accepted')
        print(f'{a} vs {b}: tokens', 'identical' if x['tokens'] == y['tokens'] else 'different',
              '| stats', 'identical' if all(x.get(k) == y.get(k) for k in keys) else 'different')
PY
