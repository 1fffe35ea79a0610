#!/usr/bin/env bash
# EESD at scale on Qwen2.5-Coder-1.5B-Instruct (issue 24): exit-head data from the batched
# collector (calibration HumanEval prompts, 8 continuations of 128 tokens each, plus 150k tokens
# of the Python standard library fed as open text), the head trained until held-out agreement
# stops rising, a Cali-TS predictor retrained on it, a pruned draft vocabulary, and benches on
# the HumanEval evaluation problems at 1 and 2 threads.
#   docs/results/2026-11-27-eesd-scale/run.sh [N]      (N: 4)
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the model from
# scripts/get-model.sh, the prompts from scripts/get-prompts.sh; everything written to STUDY_OUT
# (default out/studies/2026-11-27-eesd-scale).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
T=$repo/scripts/train_exit_head.py
CONFIG=$repo/configs/studies/2026-11-27-eesd-scale-qwen.yaml
M=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)
H=$(scripts/get-prompts.sh humaneval)
n=${1:-4}
out=${STUDY_OUT:-out/studies/2026-11-27-eesd-scale}
mkdir -p "$out"
scripts/get-open-text.sh code "$out/open-text"
cd "$out"
# 1. Training data: calibration prompts only (the evaluation split is refused).
[ -f data-n$n/manifest.json ] && grep -q '"complete": *true' data-n$n/manifest.json ||
  $S collect-exit-data --model "$M" --prompts-file "$H" --exit-layer $n --generate 128 \
    --continuations 8 --open-text-files open-text/python-stdlib --open-text-tokens 150000 \
    --open-text-window 512 --batch 16 --threads 2 --seed 24 --out data-n$n --json \
    > collect-n$n.json 2> collect-n$n.log
# 2. The head, until held-out agreement stops rising (the best evaluation kept).
/usr/bin/python3 "$T" data-n$n --out head-n$n.safetensors --epochs 2 --batch 8 --lr 1e-4 \
  --negatives 512 --eval-every 20000 --eval-positions 3000 --patience 3 --curve curve-n$n.json \
  --threads 2 --json > train-n$n.json 2> train-n$n.log
/usr/bin/python3 "$repo/scripts/plot_exit_head_curve.py" curve-n$n.json --out curve-n$n.png \
  --title "Qwen2.5-Coder-1.5B exit head, N = $n"
# 3. Cali-TS: drafts of the trained head on the calibration prompts, the predictor fitted to them.
$S collect-cali-data --model "$M" --exit-head head-n$n.safetensors --prompts-file "$H" \
  --generate 128 --max-draft 10 --threads 2 --out cali-n$n --json > cali-n$n.json 2> cali-n$n.log
/usr/bin/python3 "$T" --predictor cali-n$n --out predictor-n$n.safetensors --epochs 20 \
  --threads 2 --json > predictor-n$n.json 2> predictor-n$n.log
# 4. A pruned draft vocabulary: calibration prompts, their greedy continuations, the open text.
$S count-vocab --model "$M" --prompts-file "$H" --generate 128 --batch 16 \
  --open-text-files open-text/python-stdlib --out vocab-code.json --json > vocab-code.log
# 5. Benches on the evaluation problems: fixed K, Beta-TS, Cali-TS, full and pruned LM head.
for threads in 1 2; do
  for k in 1 3; do
    $S bench --config "$CONFIG" --model "$M" --prompts-file "$H" --exit-head head-n$n.safetensors \
      --cali-predictor predictor-n$n.safetensors --draft-vocab vocab-code.json \
      --draft-vocab-size 0,16384 --max-draft $k --threads $threads \
      --out bench-n$n-k$k-t$threads.json > bench-n$n-k$k-t$threads.log 2>&1
  done
done
