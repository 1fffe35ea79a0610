#!/usr/bin/env bash
# EESD on SmolLM2-135M (issue 11): for one exit layer N, collect training data on the calibration
# prompts, train the exit head, and bench the untrained head (layer N's own weights) and the
# trained one on the evaluation prompts (1 thread; the study ran N = 8 and 14 as two lanes).
#   docs/results/2026-11-25-eesd/run.sh [N]      (N: 8)
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model from
# scripts/get-model.sh; everything written to STUDY_OUT (default out/studies/2026-11-25-eesd).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
T=$repo/scripts/train_exit_head.py
CONFIG=$repo/configs/studies/2026-11-25-eesd-smollm2.yaml
M=$(scripts/get-model.sh smollm2-135m-instruct)
P=$repo/bench/prompts
PROMPTS=($P/chat.jsonl $P/qa.jsonl $P/summarisation.jsonl $P/maths.jsonl)
out=${STUDY_OUT:-out/studies/2026-11-25-eesd}
mkdir -p "$out" && cd "$out"
lane() {
  local n=$1
  [ -f data-n$n/manifest.json ] && grep -q '"complete": *true' data-n$n/manifest.json ||
  $S collect-exit-data --model $M --chat --prompts-file "${PROMPTS[@]}" --exit-layer $n --top-k 32 \
    --generate 160 --sampled-fraction 0.5 --temperature 0.8 --seed 1 --open-text --threads 1 \
    --weights-dtype bf16 --out data-n$n --json > collect-n$n.json 2> collect-n$n.log
  OMP_NUM_THREADS=1 /usr/bin/python3 $T data-n$n --out head-n$n.safetensors --epochs 4 --batch 8 \
    --lr 1e-4 --negatives 512 --threads 1 --json > train-n$n.json 2> train-n$n.log
  for head in data-n$n/init_layer.safetensors head-n$n.safetensors; do
    local name; name=$(basename $head .safetensors)
    $S bench --config $CONFIG --model $M --prompts-file "${PROMPTS[@]}" --exit-head $head \
      --out bench-n$n-$name.json > bench-n$n-$name.log 2>&1
  done
}
lane "${1:-8}"
