#!/usr/bin/env bash
# Issue 36, item 1, first step: does a feature-level draft head (EAGLE §3: the model's final
# residual and the next token's embedding in, the next position's final residual out, read by the
# model's own LM head) agree with Qwen2.5-Coder-1.5B more than the EESD exit head after layer 4,
# trained on the same data on 2 cores? One collection records both heads' inputs from the same
# forwards (--exit-layer 4,28), so the two train on the same positions and are evaluated on the
# same held-out sequences:
#  * collect: collect-exit-data of the 41 HumanEval calibration problems, each continued twice by
#    the model (128 tokens; the first greedy or sampled by --sampled-fraction, the second sampled)
#    + 40,000 tokens of the Python standard library in windows of 512 (open text), exit layers 4
#    and 28 (L: the final residual), top-32 targets;
#  * eesd: scripts/train_exit_head.py on exit-layer-4 (the shipped recipe's settings: windows of
#    256, lr 3e-4 decayed by a cosine, 2 epochs, held-out agreement every 10,000 positions on 2,000
#    held-out positions, patience 4);
#  * feature: scripts/train_feature_head.py on exit-layer-28 with the same settings (EAGLE-1's
#    training: depth 1 only);
#  * feature-d2: the same with --depth2-weight 1 (EAGLE-3's training-time test at depth 2);
#  * feature-4ep, eesd-4ep: the feature head of `feature` and the EESD head of `eesd` with 4
#    epochs instead of 2 (the cosine then decays over 4; the feature head's curve was still rising
#    at the end of 2).
#  * cal-NAME, e-NAME-rK: the heads in the engine (`selfspec bench`; configurations in BENCH below)
#    on the 16 HumanEval calibration problems, and in interleaved rounds on the 16 evaluation ones;
#  * s-collect, s-feature, s-cal-NAME: SmolLM2-135M's feature head (data, training, calibration
#    benches; configurations in SBENCH).
# The collections and trainings read calibration prompts only.
#   docs/results/2026-11-29-feature-head/run.sh [NAME ...]   (default: all, in this order)
# Uses the repository root's build (SELFSPEC_BUILD_DIR, default build) and /usr/bin/python3 with
# PyTorch (PYTHON); the data and heads go to out/studies/feature-head/ (git-ignored), the JSON
# summaries next to this script; tables.py makes the page's tables from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
PY=${PYTHON:-/usr/bin/python3}
out=$repo/out/studies/feature-head
mkdir -p "$out"
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct | tail -n 1)
SM=$(scripts/get-model.sh smollm2-135m-instruct | tail -n 1)
SUITE=$repo/bench/prompts/chat.jsonl,$repo/bench/prompts/qa.jsonl,$repo/bench/prompts/summarisation.jsonl,$repo/bench/prompts/maths.jsonl
TRAIN=(--epochs 2 --batch 8 --max-len 256 --lr 3e-4 --lr-schedule cosine --negatives 512
       --eval-every 10000 --eval-positions 2000 --patience 4 --threads 2 --json)
# The engine's configurations (cal-NAME / e-NAME[-rK] above). The draft vocabulary is the shipped
# best configuration's (scripts/build-best-draft.sh qwen2.5-coder-1.5b: 16,384 ids ranked on
# calibration data); "eesd" is this page's 4-epoch EESD head, "shipped" the previous best
# configuration's own head (trained on the full recipe, 238k positions) with its lookups;
# "untrained" configs/runs/untrained-qwen2.5-coder-1.5b.yaml (lookups alone). The feature head
# here is bit for bit the one scripts/build-best-draft.sh rebuilt from a fresh clone.
best=$repo/out/best/qwen2.5-coder-1.5b
VOCAB="--draft-vocab $best/vocab.json --draft-vocab-size 16384"
FEATURE="--spec feature-head --feature-head $out/feature-4ep.safetensors $VOCAB"
EESD="--spec early-exit --exit-head $out/eesd-n4-4ep.safetensors --exit-head-dtype q4_k $VOCAB"
SHIPPED="--spec early-exit --exit-head $best/head-n4.safetensors --exit-head-dtype q4_k $VOCAB"
LOOKUP="--lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2"
declare -A BENCH=(
  [f-k1]="$FEATURE --controller fixed --max-draft 1 --threads 1"
  [f-k1-q4k]="$FEATURE --feature-head-dtype q4_k --controller fixed --max-draft 1 --threads 1"
  [f-k1-t2]="$FEATURE --controller fixed --max-draft 1 --tree 1:2 --threads 1"
  [f-k1-t4]="$FEATURE --controller fixed --max-draft 1 --tree 1:4 --threads 1"
  [f-k2]="$FEATURE --controller fixed,thompson --max-draft 2 --threads 1"
  [eesd-k1]="$EESD --controller fixed --max-draft 1 --threads 1"
  [f-q4k-t2]="$FEATURE --feature-head-dtype q4_k --controller fixed --max-draft 1 --tree 1:2 --threads 1"
  [f-q4k-t4]="$FEATURE --feature-head-dtype q4_k --controller fixed --max-draft 1 --tree 1:4 --threads 1"
  [shipped-k1]="$SHIPPED --controller fixed --max-draft 1 --threads 1"
  [shipped-lookup]="$SHIPPED $LOOKUP --controller fixed --max-draft 1 --threads 1"
  [f-q4k-lookup]="$FEATURE --feature-head-dtype q4_k $LOOKUP --controller fixed --max-draft 1 --threads 1"
  [shipped-lookup-2t]="$SHIPPED $LOOKUP --controller fixed --max-draft 1 --threads 2"
  [f-q4k-lookup-2t]="$FEATURE --feature-head-dtype q4_k $LOOKUP --controller fixed --max-draft 1 --threads 2"
  [untrained]="--spec lookup --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 4 --threads 1"
  [untrained-2t]="--spec lookup --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 4 --threads 2"
)
# SmolLM2-135M's configurations (s-cal-NAME / s-e-NAME[-rK]): its feature head over its own
# draft vocabulary (8,192 ids, counted by s-collect), alone and with the lookups of its best
# configuration (configs/runs/best-smollm2-135m.yaml: lookups alone, 3/2/2), which runs beside.
SFEATURE="--spec feature-head --feature-head $out/s-feature.safetensors --draft-vocab $out/s-vocab.json --draft-vocab-size 8192"
SLOOKUP="--lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2"
declare -A SBENCH=(
  [f-k1]="$SFEATURE --controller fixed --max-draft 1 --threads 1"
  [f-k1-q4_0]="$SFEATURE --feature-head-dtype q4_0 --controller fixed --max-draft 1 --threads 1"
  [f-lookup]="$SFEATURE $SLOOKUP --controller fixed --max-draft 1 --threads 1"
  [f-thompson-lookup]="$SFEATURE $SLOOKUP --controller thompson --max-draft 3 --threads 1"
  [lookup]="--spec lookup $SLOOKUP --threads 1"
)
run() {
  local name=$1
  echo "run.sh: $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  case "$name" in
    collect)
      [ -d "$out/open-text/python-stdlib" ] || scripts/get-open-text.sh code "$out/open-text" >&2
      rm -rf "$out/data"
      "$S" collect-exit-data --model "$Q" --prompts-file "$H" --generate 128 --continuations 2 \
        --batch 16 --open-text-files "$out/open-text/python-stdlib" --open-text-tokens 40000 \
        --open-text-window 512 --exit-layer 4,28 --threads 2 --seed 24 --out "$out/data" --json \
        > "$here/collect.json" 2> "$out/collect.log"
      # The model's shape (for the drafts' costs in multiply-adds), from the data's manifest.
      python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["model"], indent=1))' \
        "$out/data/exit-layer-28/manifest.json" > "$here/model.json" ;;
    eesd)
      "$PY" scripts/train_exit_head.py "$out/data/exit-layer-4" --out "$out/eesd-n4.safetensors" \
        "${TRAIN[@]}" --curve "$here/eesd-curve.json" > "$here/eesd.json" 2> "$out/eesd.log" ;;
    feature)
      "$PY" scripts/train_feature_head.py "$out/data/exit-layer-28" \
        --out "$out/feature.safetensors" "${TRAIN[@]}" --curve "$here/feature-curve.json" \
        > "$here/feature.json" 2> "$out/feature.log" ;;
    feature-d2)
      "$PY" scripts/train_feature_head.py "$out/data/exit-layer-28" \
        --out "$out/feature-d2.safetensors" "${TRAIN[@]}" --depth2-weight 1 \
        --curve "$here/feature-d2-curve.json" > "$here/feature-d2.json" 2> "$out/feature-d2.log" ;;
    feature-4ep)
      "$PY" scripts/train_feature_head.py "$out/data/exit-layer-28" \
        --out "$out/feature-4ep.safetensors" "${TRAIN[@]}" --epochs 4 \
        --curve "$here/feature-4ep-curve.json" > "$here/feature-4ep.json" 2> "$out/feature-4ep.log" ;;
    eesd-4ep)
      "$PY" scripts/train_exit_head.py "$out/data/exit-layer-4" --out "$out/eesd-n4-4ep.safetensors" \
        "${TRAIN[@]}" --epochs 4 --curve "$here/eesd-4ep-curve.json" > "$here/eesd-4ep.json" \
        2> "$out/eesd-4ep.log" ;;
    s-collect)
      # SmolLM2-135M (30 layers): the feature head's data from the 16 calibration prompts of
      # bench/prompts (chat template), each continued 8 times (256 tokens), and 100,000 tokens
      # of Debian's English documentation (open text), at the final residual.
      [ -d "$out/s-open-text" ] || scripts/get-open-text.sh prose "$out/s-open-text" >&2
      rm -rf "$out/s-data"
      "$S" collect-exit-data --model "$SM" --prompts-file "$SUITE" --chat --generate 256 \
        --continuations 8 --batch 32 --open-text-files "$out/s-open-text" \
        --open-text-tokens 100000 --open-text-window 512 --exit-layer 30 --threads 2 --seed 24 \
        --out "$out/s-data" --json > "$here/s-collect.json" 2> "$out/s-collect.log"
      "$S" count-vocab --model "$SM" --prompts-file "$SUITE" --chat --generate 256 --batch 32 \
        --open-text-files "$out/s-open-text" --threads 2 --out "$out/s-vocab.json" --json \
        > "$here/s-vocab.json" 2> "$out/s-vocab.log" ;;
    s-feature)
      "$PY" scripts/train_feature_head.py "$out/s-data" --out "$out/s-feature.safetensors" \
        "${TRAIN[@]}" --epochs 4 --curve "$here/s-feature-curve.json" > "$here/s-feature.json" \
        2> "$out/s-feature.log" ;;
    s-cal-*|s-e-*)
      # SmolLM2's benches: the 16 calibration prompts (s-cal-) or the 12 evaluation prompts
      # (s-e-, 3 per task), chat template, 64 greedy tokens.
      local split=evaluation tag=$name per=3
      [[ $name == s-cal-* ]] && split=calibration && per=4
      local config=${name#s-cal-}; config=${config#s-e-}; config=${config%-r[0-9]*}
      [ -n "${SBENCH[$config]:-}" ] || { echo "run.sh: no SmolLM2 configuration '$config'" >&2; exit 2; }
      # shellcheck disable=SC2086
      "$S" bench --model "$SM" --weights-dtype native --prompts-file "$SUITE" --chat \
        --split $split --max-prompts-per-task $per --gen 64 --verify-cost-rounds 0 \
        ${SBENCH[$config]} --out "$here/$tag.json" > "$out/$tag.log" 2>&1 ;;
    cal-*|e-*)
      # The heads in the engine: `selfspec bench` (plain decoding and the configuration, each
      # prompt checked token for token) of Qwen2.5-Coder-1.5B Q4_K_M, 64 greedy tokens per
      # prompt. cal-*: 16 HumanEval calibration problems (choosing the shapes); e-*: the 16
      # evaluation problems, once per round (rounds r1.. interleave every configuration).
      local split=evaluation tag=$name
      [[ $name == cal-* ]] && split=calibration
      local config=${name#cal-}; config=${config#e-}; config=${config%-r[0-9]*}
      [ -n "${BENCH[$config]:-}" ] || { echo "run.sh: no bench configuration '$config'" >&2; exit 2; }
      # shellcheck disable=SC2086
      "$S" bench --model "$Q" --weights-dtype native --prompts-file "$H" --split $split \
        --max-prompts-per-task 16 --gen 64 --verify-cost-rounds 0 ${BENCH[$config]} \
        --out "$here/$tag.json" > "$out/$tag.log" 2>&1 ;;
    *) echo "run.sh: no run '$name'" >&2; exit 2 ;;
  esac
}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(collect eesd feature feature-d2 feature-4ep eesd-4ep)
for name in "${names[@]}"; do run "$name"; done
