#!/usr/bin/env bash
# Issue 36: training the draft heads better within the recipe's 20 minutes on 2 cores.
# 1. Data (item 2's last part): do heads trained on the model's own continuations of open text
#    (collect-exit-data --open-text-continue G) agree with Qwen2.5-Coder-1.5B more on prompts
#    nobody trained on than heads trained on as many positions of teacher-forced open text? The
#    eesd-n-sweep study found the EESD head over-fits the generated share of its data (18 %, from
#    41 calibration problems); continuing open-text windows gives the model's own text from 78 more
#    contexts. The baseline is the feature-head study's data and its 4-epoch heads
#    (docs/results/2026-11-29-feature-head; out/studies/feature-head/, made by that page's run.sh).
# 2. Precision: the trainers' --precision bf16 (CPU bf16 autocast) against f32 on the baseline's
#    data, same settings, same held-out positions.
# Runs:
#  * collect: the 41 HumanEval calibration problems, each continued twice (128 tokens), the
#    baseline's seed and batch, and 30,000 tokens of the Python standard library in windows of
#    384, each continued by the model for 128 tokens (--open-text-continue 128): about the
#    baseline's 62,000 positions (its open text: 40,000 tokens in windows of 512, none continued)
#    with twice its generated share; exit layers 4 and 28 (the EESD and feature heads' inputs);
#  * eesd, feature: scripts/train_exit_head.py and scripts/train_feature_head.py on it, with the
#    baseline's 4-epoch settings (f32);
#  * feature-bf16: the baseline's 4-epoch feature head again on the baseline's data, in bf16;
#  * dev-prompts, dev-NAME: the choice between the data and precisions is made on 16 HumanEval
#    problems nobody reports: evaluation-split problems 17-32 (every page reports problems 1-16,
#    the first 16 of the split), in out/studies/head-training/dev.jsonl;
#  * recipe: scripts/build-best-draft.sh qwen2.5-coder-1.5b from a fresh clone (its new recipe:
#    70,000 tokens of open text and --precision auto, chosen from the runs above), timed;
#  * e-NAME-rK: the heads in the engine on the 16 reported evaluation problems (BENCH below), in
#    interleaved rounds.
# The collections and trainings read calibration prompts only.
#   docs/results/2026-11-29-head-training/run.sh [NAME ...]
# Uses the repository root's build (SELFSPEC_BUILD_DIR, default build) and /usr/bin/python3 with
# PyTorch (PYTHON); data and heads go to out/studies/head-training/ (git-ignored), the JSON
# summaries next to this script; tables.py makes the page's tables from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
PY=${PYTHON:-/usr/bin/python3}
out=$repo/out/studies/head-training
base=$repo/out/studies/feature-head
mkdir -p "$out"
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct | tail -n 1)
TRAIN=(--epochs 4 --batch 8 --max-len 256 --lr 3e-4 --lr-schedule cosine --negatives 512
       --eval-every 10000 --eval-positions 2000 --patience 4 --threads 2 --json)
# Every configuration reads the shipped best configuration's 16,384-id draft vocabulary and holds
# its head in q4_k; "lookup" adds the best configuration's lookups (configs/runs/
# best-qwen2.5-coder-1.5b.yaml: the feature head + lookups alone).
best=$repo/out/best/qwen2.5-coder-1.5b
VOCAB="--draft-vocab $best/vocab.json --draft-vocab-size 16384"
LOOKUP="--lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2"
K1="--controller fixed --max-draft 1 --threads 1"
F="--spec feature-head --feature-head-dtype q4_k $VOCAB"
E="--spec early-exit --exit-head-dtype q4_k $VOCAB"
declare -A BENCH=(
  [f-base]="$F --feature-head $base/feature-4ep.safetensors $K1"
  [f-otc]="$F --feature-head $out/feature.safetensors $K1"
  [f-bf16]="$F --feature-head $out/feature-bf16.safetensors $K1"
  [eesd-base]="$E --exit-head $base/eesd-n4-4ep.safetensors $K1"
  [eesd-otc]="$E --exit-head $out/eesd-n4.safetensors $K1"
  [f-base-lookup]="$F --feature-head $base/feature-4ep.safetensors $LOOKUP $K1"
  [f-otc-lookup]="$F --feature-head $out/feature.safetensors $LOOKUP $K1"
  [f-recipe]="$F --feature-head $out/recipe/out/best/qwen2.5-coder-1.5b/feature-head.safetensors $K1"
  [f-recipe-lookup]="$F --feature-head $out/recipe/out/best/qwen2.5-coder-1.5b/feature-head.safetensors $LOOKUP $K1"
  [f-base-lookup-2t]="$F --feature-head $base/feature-4ep.safetensors $LOOKUP ${K1/--threads 1/--threads 2}"
  [f-recipe-lookup-2t]="$F --feature-head $out/recipe/out/best/qwen2.5-coder-1.5b/feature-head.safetensors $LOOKUP ${K1/--threads 1/--threads 2}"
)
bench() {  # bench PROMPTS_FILE OUT_NAME CONFIG: `selfspec bench` (plain decoding and the
  # configuration, each prompt checked token for token) of Qwen2.5-Coder-1.5B Q4_K_M, 64 greedy
  # tokens per prompt, on the file's first 16 evaluation-split problems.
  [ -n "${BENCH[$3]:-}" ] || { echo "run.sh: no bench configuration '$3'" >&2; exit 2; }
  # shellcheck disable=SC2086
  "$S" bench --model "$Q" --weights-dtype native --prompts-file "$1" --split evaluation \
    --max-prompts-per-task 16 --gen 64 --verify-cost-rounds 0 ${BENCH[$3]} \
    --out "$here/$2.json" > "$out/$2.log" 2>&1
}
run() {
  local name=$1
  echo "run.sh: $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  case "$name" in
    collect)
      [ -d "$base/open-text/python-stdlib" ] || scripts/get-open-text.sh code "$base/open-text" >&2
      rm -rf "$out/data"
      "$S" collect-exit-data --model "$Q" --prompts-file "$H" --generate 128 --continuations 2 \
        --batch 16 --open-text-files "$base/open-text/python-stdlib" --open-text-tokens 30000 \
        --open-text-window 384 --open-text-continue 128 --exit-layer 4,28 --threads 2 --seed 24 \
        --out "$out/data" --json > "$here/collect.json" 2> "$out/collect.log" ;;
    eesd)
      "$PY" scripts/train_exit_head.py "$out/data/exit-layer-4" --out "$out/eesd-n4.safetensors" \
        "${TRAIN[@]}" --curve "$here/eesd-curve.json" > "$here/eesd.json" 2> "$out/eesd.log" ;;
    feature)
      "$PY" scripts/train_feature_head.py "$out/data/exit-layer-28" \
        --out "$out/feature.safetensors" "${TRAIN[@]}" --curve "$here/feature-curve.json" \
        > "$here/feature.json" 2> "$out/feature.log" ;;
    feature-bf16)
      "$PY" scripts/train_feature_head.py "$base/data/exit-layer-28" \
        --out "$out/feature-bf16.safetensors" "${TRAIN[@]}" --precision bf16 \
        --curve "$here/feature-bf16-curve.json" > "$here/feature-bf16.json" \
        2> "$out/feature-bf16.log" ;;
    recipe)
      # The best configuration's recipe as a user runs it, from a fresh clone of this commit
      # (scripts/build-best-draft.sh qwen2.5-coder-1.5b, with this repository's build; the model,
      # prompts and open text come from the caches), timed by the recipe itself.
      rm -rf "$out/recipe"
      git clone -q "$repo" "$out/recipe"
      (cd "$out/recipe" && SELFSPEC_BUILD_DIR=$(dirname "$(dirname "$S")") \
        scripts/build-best-draft.sh qwen2.5-coder-1.5b) 2> "$out/recipe.log"
      cp "$out/recipe/out/best/qwen2.5-coder-1.5b/timings.json" "$here/recipe-timings.json"
      # The trainer's --json summary (the last JSON line of its log).
      grep '^{' "$out/recipe/out/best/qwen2.5-coder-1.5b/train.log" | tail -n 1 \
        > "$here/recipe-train.json"
      cmp "$out/recipe/out/best/qwen2.5-coder-1.5b/vocab.json" "$best/vocab.json" >&2 ||
        echo "run.sh: the recipe's vocabulary differs from the shipped one" >&2 ;;
    dev-prompts)
      # Evaluation-split problems 17-32 of the HumanEval file, in file order.
      python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for row in [r for r in rows if r["split"] == "evaluation"][16:32]:
    print(json.dumps(row))' "$H" > "$out/dev.jsonl" ;;
    dev-*) bench "$out/dev.jsonl" "$name" "${name#dev-}" ;;
    e-*) local config=${name#e-}; bench "$H" "$name" "${config%-r[0-9]*}" ;;
    *) echo "run.sh: no run '$name'" >&2; exit 2 ;;
  esac
}
[ $# -gt 0 ] || { echo "usage: run.sh NAME ..." >&2; exit 2; }
for name in "$@"; do run "$name"; done
