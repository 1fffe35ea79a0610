#!/usr/bin/env bash
# Section 1 and the tree rows of docs/results/2026-11-27-eesd-n-sweep.md: the eesd-scale study's
# N = 4 head (docs/results/2026-11-27-eesd-scale/run.sh makes head-n4.safetensors and
# vocab-code.json in its STUDY_OUT) benched with its layer in bf16, q8_0 and q4_k, and with token
# trees at depth 1, on the first 16 HumanEval evaluation problems, fixed K 1, 1 thread.
#   docs/results/2026-11-27-eesd-n-sweep/trees-and-formats.sh SCALE_OUT
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
scale=$(cd "${1:?the eesd-scale study output directory}" && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
M=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)
H=$(scripts/get-prompts.sh humaneval)
out=${STUDY_OUT:-out/studies/2026-11-27-eesd-n-sweep}
mkdir -p "$out"
run() {  # run NAME OPTIONS...
  local name=$1
  shift
  $S bench --model "$M" --prompts-file "$H" --gen 64 --max-prompts-per-task 16 \
    --weights-dtype native --spec early-exit --exit-head "$scale/head-n4.safetensors" \
    --draft-vocab "$scale/vocab-code.json" --draft-vocab-size 16384 --controller fixed \
    --max-draft 1 --threads 1 --verify-cost-rounds 0 "$@" --out "$out/$name.json" \
    > "$out/$name.log" 2>&1
}
for format in bf16 q8_0 q4_k; do run head-format-$format --exit-head-dtype $format; done
for tree in 1:2 1:3 0.6:3,1:2 0.5:4,0.9:2,1:1; do
  run tree-$(echo $tree | tr ':,' '-_') --exit-head-dtype bf16 --tree $tree
done
