#!/usr/bin/env bash
# EESD exit-layer sweep at scale (issue 24 items 3-4): one collection per model records the inputs
# of exit layers 2, 3, 4 and 6 together (collect-exit-data --exit-layer 2,3,4,6), a head is
# trained per N, and the heads are benched on the evaluation prompts with the head quantized to
# q4_k at load and a pruned draft vocabulary.
#   docs/results/2026-11-27-eesd-n-sweep/run.sh qwen|smollm2 [collect|train|bench|final|all]
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); models from
# scripts/get-model.sh, prompts from scripts/get-prompts.sh and bench/prompts, open text from
# scripts/get-open-text.sh; everything written to STUDY_OUT (default
# out/studies/2026-11-27-eesd-n-sweep).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
T=$repo/scripts/train_exit_head.py
P=$repo/bench/prompts
model=${1:?qwen or smollm2}
step=${2:-all}
out=${STUDY_OUT:-out/studies/2026-11-27-eesd-n-sweep}
mkdir -p "$out"
case $model in
  qwen)
    M=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)
    prompts=$(scripts/get-prompts.sh humaneval)
    scripts/get-open-text.sh code "$out/open-text-code"
    collect=(--prompts-file "$prompts" --generate 128 --continuations 8 --batch 16
             --open-text-files "$out/open-text-code/python-stdlib" --open-text-tokens 150000)
    bench=(--prompts-file "$prompts" --max-prompts-per-task 16 --gen 64 --exit-head-dtype q4_k
           --draft-vocab-size 16384)
    cali=(--prompts-file "$prompts" --generate 128)
    vocab=(--prompts-file "$prompts" --generate 128 --batch 16
           --open-text-files "$out/open-text-code/python-stdlib")
    epochs() { case $1 in 4|6) echo 2 ;; *) echo 1 ;; esac; } ;;
  smollm2)
    M=$(scripts/get-model.sh smollm2-135m-instruct)
    suite=$P/chat.jsonl,$P/qa.jsonl,$P/summarisation.jsonl,$P/maths.jsonl
    scripts/get-open-text.sh prose "$out/open-text-prose"
    collect=(--prompts-file "$suite" --chat --generate 256 --continuations 32 --batch 32
             --open-text-files "$out/open-text-prose" --open-text-tokens 420000)
    bench=(--prompts-file "$suite" --chat --gen 64 --max-prompts-per-task 3
           --exit-head-dtype q4_0 --draft-vocab-size 0,8192)
    cali=(--prompts-file "$suite" --chat --generate 128)
    vocab=(--prompts-file "$suite" --chat --generate 256 --batch 32
           --open-text-files "$out/open-text-prose")
    epochs() { echo 1; } ;;
  *) echo "run.sh: qwen or smollm2, not $model" >&2; exit 2 ;;
esac
cd "$out"
if [[ $step == collect || $step == all ]]; then
  # 1. One pass, four directories (data-$model/exit-layer-N): calibration prompts only.
  $S collect-exit-data --model "$M" "${collect[@]}" --exit-layer 2,3,4,6 --open-text-window 512 \
    --threads 2 --seed 24 --out data-$model --json > collect-$model.json 2> collect-$model.log
  $S count-vocab --model "$M" "${vocab[@]}" --threads 2 --out vocab-$model.json --json \
    > vocab-$model.log 2>&1
fi
if [[ $step == train || $step == all ]]; then
  # 2. A head per N: windows of 256, lr 3e-4 decayed by a cosine, until agreement stops rising.
  for n in 4 6 2 3; do
    /usr/bin/python3 "$T" data-$model/exit-layer-$n --out head-$model-n$n.safetensors \
      --epochs "$(epochs $n)" --batch 8 --max-len 256 --lr 3e-4 --lr-schedule cosine \
      --negatives 512 --eval-every 20000 --eval-positions 3000 --patience 4 \
      --curve curve-$model-n$n.json --threads 2 --json > train-$model-n$n.json \
      2> train-$model-n$n.log
  done
  /usr/bin/python3 "$repo/scripts/plot_exit_head_curve.py" curve-$model-n{2,3,4,6}.json \
    --out curves-$model.png --title "$model exit heads, N = 2, 3, 4, 6"
fi
if [[ $step == bench || $step == all ]]; then
  # 3. Every head on the evaluation prompts at 1 thread: fixed K 1 and Beta-TS side by side.
  for n in 2 3 4 6; do
    $S bench --model "$M" "${bench[@]}" --weights-dtype native --spec early-exit \
      --exit-head head-$model-n$n.safetensors --draft-vocab vocab-$model.json \
      --controller fixed,thompson --max-draft 1 --threads 1 --verify-cost-rounds 0 \
      --out bench-$model-n$n-k1-t1.json > bench-$model-n$n-k1-t1.log 2>&1
  done
fi
if [[ $model == smollm2 && ( $step == final || $step == all ) ]]; then
  # 4. The cheapest head (N = 2) at 2 threads.
  $S bench --model "$M" --prompts-file "$suite" --chat --gen 64 --max-prompts-per-task 3 \
    --exit-head-dtype q4_0 --weights-dtype native --spec early-exit \
    --exit-head head-$model-n2.safetensors --draft-vocab vocab-$model.json --draft-vocab-size 8192 \
    --controller fixed,thompson --max-draft 1 --threads 2 \
    --out final-bench-$model-n2-k1-t2.json > final-bench-$model-n2-k1-t2.log 2>&1
fi
if [[ $model == qwen && ( $step == final || $step == all ) ]]; then
  # 4. The best head by α (N = 4): Cali-TS's predictor from its drafts on the calibration problems,
  # then fixed K 1, Beta-TS and Cali-TS at 1 and 2 threads.
  $S collect-cali-data --model "$M" --exit-head head-$model-n4.safetensors "${cali[@]}" \
    --max-draft 10 --threads 2 --out cali-$model-n4 --json > cali-$model-n4.json \
    2> cali-$model-n4.log
  /usr/bin/python3 "$T" --predictor cali-$model-n4 --out predictor-$model-n4.safetensors \
    --epochs 20 --threads 2 --json > predictor-$model-n4.json 2> predictor-$model-n4.log
  for threads in 1 2; do
    $S bench --model "$M" "${bench[@]}" --weights-dtype native --spec early-exit \
      --exit-head head-$model-n4.safetensors --cali-predictor predictor-$model-n4.safetensors \
      --draft-vocab vocab-$model.json --controller fixed,thompson,cali-ts --max-draft 1 \
      --threads $threads --out final-bench-$model-n4-k1-t$threads.json \
      > final-bench-$model-n4-k1-t$threads.log 2>&1
  done
  # N = 2, the cheapest draft, with the same binary: fixed K 1 and Beta-TS at 1 thread.
  $S bench --model "$M" "${bench[@]}" --weights-dtype native --spec early-exit \
    --exit-head head-$model-n2.safetensors --draft-vocab vocab-$model.json \
    --controller fixed,thompson --max-draft 1 --threads 1 \
    --out final-bench-$model-n2-k1-t1.json > final-bench-$model-n2-k1-t1.log 2>&1
fi
