#!/usr/bin/env bash
# EESD on SmolLM2-135M, a sweep over the exit layer N (issue 11 item 5): for one N, collect the
# exit head's training data on the calibration split, train the head, collect Cali-TS's data with
# it (greedy early-exit drafting at K 10, calibration split), train the predictor, and bench on the
# evaluation split with fixed K 1 and 3, Beta-TS and Cali-TS (1 thread; run two lanes at once).
#   docs/results/2026-11-25-eesd-sweep/run.sh N
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model from
# scripts/get-model.sh; everything written to STUDY_OUT (default out/studies/2026-11-25-eesd-sweep),
# where table.py reads it (table.py STUDY_OUT).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
T=$repo/scripts/train_exit_head.py
CONFIG=$repo/configs/studies/2026-11-25-eesd-sweep-smollm2.yaml
M=$(scripts/get-model.sh smollm2-135m-instruct)
P=$repo/bench/prompts
PROMPTS=($P/chat.jsonl $P/qa.jsonl $P/summarisation.jsonl $P/maths.jsonl)
out=${STUDY_OUT:-out/studies/2026-11-25-eesd-sweep}
mkdir -p "$out" && cd "$out"
n=$1
if ! { [ -f data-n$n/manifest.json ] && grep -q '"complete": *true' data-n$n/manifest.json; }; then
  $S collect-exit-data --model $M --chat --prompts-file "${PROMPTS[@]}" --exit-layer $n --top-k 32 \
    --generate 160 --sampled-fraction 0.5 --temperature 0.8 --seed 1 --open-text --threads 1 \
    --weights-dtype bf16 --out data-n$n --json > collect-n$n.json 2> collect-n$n.log
fi
[ -f head-n$n.safetensors ] ||
  OMP_NUM_THREADS=1 /usr/bin/python3 $T data-n$n --out head-n$n.safetensors --epochs 2 --batch 8 \
    --lr 1e-4 --negatives 512 --threads 1 --json > train-n$n.json 2> train-n$n.log
[ -f cali-n$n/manifest.json ] ||
  $S collect-cali-data --model $M --chat --prompts-file "${PROMPTS[@]}" --exit-head head-n$n.safetensors \
    --generate 96 --max-draft 10 --threads 1 --weights-dtype bf16 --out cali-n$n --json > cali-collect-n$n.json 2> cali-collect-n$n.log
[ -f predictor-n$n.safetensors ] ||
  OMP_NUM_THREADS=1 /usr/bin/python3 $T --predictor cali-n$n --out predictor-n$n.safetensors --threads 1 \
    --json > cali-train-n$n.json 2> cali-train-n$n.log
B=(bench --config $CONFIG --model $M --prompts-file "${PROMPTS[@]}"
   --exit-head head-n$n.safetensors)
$S "${B[@]}" --cali-predictor predictor-n$n.safetensors --out bench-n$n-k3.json \
  > bench-n$n-k3.log 2>&1
$S "${B[@]}" --controller fixed --max-draft 1 --out bench-n$n-k1.json > bench-n$n-k1.log 2>&1
