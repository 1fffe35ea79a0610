#!/usr/bin/env bash
# EESD on SmolLM2-135M (issue 11): for each exit layer N, collect training data on the calibration
# prompts, train the exit head, and bench it on the evaluation prompts (1 thread per lane).
set -euo pipefail
cd "$(dirname "$0")"
S=../../../build/bin/selfspec
M=~/.cache/selfspec/models/SmolLM2-135M-Instruct.Q4_1.gguf
P=../../prompts
PROMPTS=($P/chat.jsonl $P/qa.jsonl $P/summarisation.jsonl $P/maths.jsonl)
lane() {
  local n=$1
  [ -f data-n$n/manifest.json ] && grep -q '"complete": *true' data-n$n/manifest.json ||
  $S collect-exit-data --model $M --chat --prompts-file "${PROMPTS[@]}" --exit-layer $n --top-k 32 \
    --generate 160 --sampled-fraction 0.5 --temperature 0.8 --seed 1 --open-text --threads 1 \
    --out data-n$n --json > collect-n$n.json 2> collect-n$n.log
  OMP_NUM_THREADS=1 /usr/bin/python3 ../../../scripts/train_exit_head.py data-n$n --out head-n$n.safetensors \
    --epochs 4 --batch 8 --lr 1e-4 --negatives 512 --threads 1 --json > train-n$n.json 2> train-n$n.log
  for head in data-n$n/init_layer.safetensors head-n$n.safetensors; do
    local name; name=$(basename $head .safetensors)
    $S bench --model $M --chat --gen 48 --max-prompts-per-task 3 --prompts-file "${PROMPTS[@]}" \
      --threads 1 --spec early-exit --exit-head $head --controller fixed,thompson --max-draft 3 \
      --out bench-n$n-$name.json > bench-n$n-$name.log 2>&1
  done
}
lane "${1:-8}"
