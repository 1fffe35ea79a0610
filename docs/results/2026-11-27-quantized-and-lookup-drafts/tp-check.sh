#!/usr/bin/env bash
# Greedy token identity of the new drafts across TP degrees (issue 25): on one HumanEval evaluation
# problem, Qwen2.5-Coder-1.5B's plain TP 1 tokens against EESD + lookup (native weights) at TP 1
# and 2 and against the q4_0 copy (bf16 weights) at TP 1 and 2; on one SmolLM2 evaluation prompt,
# plain TP 1 against lookup alone and EESD + lookup at TP 3 (tp-invariant reduction, so plain TP 3
# equals plain TP 1 too). Needs scripts/build-best-draft.sh's files and mpirun.
#   docs/results/2026-11-27-quantized-and-lookup-drafts/tp-check.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
out=${STUDY_OUT:-out/studies/2026-11-27-quantized-and-lookup-drafts}
QD=out/best/qwen2.5-coder-1.5b
SD=out/best/smollm2-135m
mkdir -p "$out"
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
QP=$(python3 -c "import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r['split'] == 'evaluation': print(r['prompt']); break" "$H")
SP=$(python3 -c "import json
print(json.loads(open('bench/prompts/summarisation.jsonl').readlines()[-1])['prompt'])")
gen() { local name=$1 ranks=$2; shift 2
  if [ "$ranks" -gt 1 ]; then
    timeout 900 mpirun -np "$ranks" --oversubscribe "$S" generate "$@" --threads 1 --json \
      > "$out/tp-$name.json"
  else
    timeout 600 "$S" generate "$@" --threads 1 --json > "$out/tp-$name.json"
  fi
}
qee=(--weights-dtype native --spec early-exit --exit-head "$QD/head-n4.safetensors"
     --exit-head-dtype q4_k --draft-vocab "$QD/vocab.json" --draft-vocab-size 16384
     --controller fixed --max-draft 1 --lookup 3 --lookup-max-draft 4 --debug-sync)
qq=(--weights-dtype bf16 --spec layer-skip --skip-uniform 0 --draft-weights q4_0
    --controller fixed --max-draft 5 --debug-sync)
gen q-plain-tp1 1 --model "$QD/model.gguf" --prompt "$QP" --max-new-tokens 64
gen q-ee-lookup-tp1 1 --model "$QD/model.gguf" --prompt "$QP" --max-new-tokens 64 "${qee[@]}"
gen q-ee-lookup-tp2 2 --model "$QD/model.gguf" --prompt "$QP" --max-new-tokens 64 "${qee[@]}"
gen q-bf16-plain-tp1 1 --model "$QD/model.gguf" --prompt "$QP" --max-new-tokens 64 \
  --weights-dtype bf16
gen q-bf16-q4_0-tp1 1 --model "$QD/model.gguf" --prompt "$QP" --max-new-tokens 64 "${qq[@]}"
gen q-bf16-q4_0-tp2 2 --model "$QD/model.gguf" --prompt "$QP" --max-new-tokens 64 "${qq[@]}"
sl=(--reduction tp-invariant --weights-dtype native --spec lookup --lookup 3 --lookup-max-draft 2
    --debug-sync)
see=(--reduction tp-invariant --weights-dtype native --spec early-exit
     --exit-head "$SD/head-n2.safetensors" --exit-head-dtype q4_0 --draft-vocab "$SD/vocab.json"
     --draft-vocab-size 8192 --controller fixed --max-draft 1 --lookup 3 --debug-sync)
gen s-plain-tp1 1 --model "$SD/model.gguf" --chat --prompt "$SP" --max-new-tokens 64 \
  --reduction tp-invariant
gen s-plain-tp3 3 --model "$SD/model.gguf" --chat --prompt "$SP" --max-new-tokens 64 \
  --reduction tp-invariant
gen s-lookup-tp3 3 --model "$SD/model.gguf" --chat --prompt "$SP" --max-new-tokens 64 "${sl[@]}"
gen s-ee-lookup-tp3 3 --model "$SD/model.gguf" --chat --prompt "$SP" --max-new-tokens 64 "${see[@]}"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def load(name):
    return json.loads(open(f"{out}/tp-{name}.json").read().strip().splitlines()[-1])
pairs = [("q-plain-tp1", "q-ee-lookup-tp1"), ("q-plain-tp1", "q-ee-lookup-tp2"),
         ("q-bf16-plain-tp1", "q-bf16-q4_0-tp1"), ("q-bf16-plain-tp1", "q-bf16-q4_0-tp2"),
         ("s-plain-tp1", "s-plain-tp3"), ("s-plain-tp1", "s-lookup-tp3"),
         ("s-plain-tp1", "s-ee-lookup-tp3")]
for a, b in pairs:
    x, y = load(a), load(b)
    same = "identical" if x["tokens"] == y["tokens"] else "DIFFER"
    print(f"{a:18s} {b:18s} {same:9s} {len(x['tokens'])} tokens, drafted {y.get('drafted')}, "
          f"accepted {y.get('accepted')}")
PY
