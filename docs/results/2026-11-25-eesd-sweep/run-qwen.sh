#!/usr/bin/env bash
# EESD on Qwen2.5-Coder-1.5B (issue 11), one exit layer N: exit-head data from 16 HumanEval
# calibration problems (each continued by the full model for 96 tokens, half sampled, plus the
# problem's own text), the head trained 2 epochs, Cali-TS data from early-exit drafting at K 10 on
# 8 of the same problems (32 tokens each: a CPU core drafts about 1 token/s this way), the
# predictor, then a bench on 4 HumanEval evaluation problems with fixed K 1 and 3, Beta-TS and
# Cali-TS (1 thread).
# (--reduction rank-order: at TP 1 the same arithmetic as before collect-exit-data's default
# became tp-invariant, and about 10 % faster.)
#   docs/results/2026-11-25-eesd-sweep/run-qwen.sh N
# EPOCHS (default 2) trains the head longer; TAG (default none) names such a variant's head,
# predictor, logs and benches (e.g. EPOCHS=8 TAG=-e8 run-qwen.sh 6); the data is shared.
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model and HumanEval
# from scripts/get-model.sh and scripts/get-prompts.sh; everything written to STUDY_OUT (default
# out/studies/2026-11-25-eesd-sweep), where table.py reads it (table.py STUDY_OUT).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
T=$repo/scripts/train_exit_head.py
CONFIG=$repo/configs/studies/2026-11-25-eesd-sweep-qwen.yaml
M=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)
H=$(scripts/get-prompts.sh humaneval)
out=${STUDY_OUT:-out/studies/2026-11-25-eesd-sweep}
mkdir -p "$out" && cd "$out"
n=$1
d=qwen-n$n
q=qwen-n$n${TAG:-}
if ! { [ -f data-$d/manifest.json ] && grep -q '"complete": *true' data-$d/manifest.json; }; then
  $S collect-exit-data --model $M --prompts-file $H --max-prompts-per-task 16 --exit-layer $n \
    --top-k 32 --generate 96 --sampled-fraction 0.5 --temperature 0.8 --seed 1 --open-text \
    --threads 1 --reduction rank-order --weights-dtype bf16 --out data-$d --json > collect-$q.json 2> collect-$q.log
fi
[ -f head-$q.safetensors ] ||
  OMP_NUM_THREADS=1 /usr/bin/python3 $T data-$d --out head-$q.safetensors --epochs ${EPOCHS:-2} --batch 8 \
    --lr 1e-4 --negatives 512 --threads 1 --json > train-$q.json 2> train-$q.log
[ -f cali-$q/manifest.json ] ||
  $S collect-cali-data --model $M --prompts-file $H --max-prompts-per-task 8 \
    --exit-head head-$q.safetensors --generate 32 --max-draft 10 --threads 1 --weights-dtype bf16 --out cali-$q --json \
    > cali-collect-$q.json 2> cali-collect-$q.log
[ -f predictor-$q.safetensors ] ||
  OMP_NUM_THREADS=1 /usr/bin/python3 $T --predictor cali-$q --out predictor-$q.safetensors --threads 1 \
    --json > cali-train-$q.json 2> cali-train-$q.log
B=(bench --config $CONFIG --model $M --prompts-file $H --exit-head head-$q.safetensors)
$S "${B[@]}" --cali-predictor predictor-$q.safetensors --out bench-$q-k3.json > bench-$q-k3.log 2>&1
$S "${B[@]}" --controller fixed --max-draft 1 --out bench-$q-k1.json > bench-$q-k1.log 2>&1
