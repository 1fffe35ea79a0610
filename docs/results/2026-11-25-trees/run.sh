#!/usr/bin/env bash
# The tree-verification evaluation runs (issue 10 item 3): two lanes, one thread each; every bench
# run measures each prompt's autoregressive run and its speculative run side by side. The searched
# skip sets' evaluation settings are the run configs of the skip-choosers study; the tree and the
# controller vary per run.
#   docs/results/2026-11-25-trees/run.sh
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the models and HumanEval
# from scripts/get-model.sh and scripts/get-prompts.sh; everything written to STUDY_OUT (default
# out/studies/2026-11-25-trees).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
SMOL=$(scripts/get-model.sh smollm2-135m-instruct)
QWEN=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)
H=$(scripts/get-prompts.sh humaneval)
P=$repo/bench/prompts
C=$repo/configs/studies
out=${STUDY_OUT:-out/studies/2026-11-25-trees}
mkdir -p "$out" && cd "$out"
smol() {  # name, extra options
  local name=$1; shift
  $S bench --config $C/2026-11-25-skip-choosers-smollm2.yaml --model $SMOL \
    --prompts-file $P/chat.jsonl $P/qa.jsonl $P/summarisation.jsonl $P/maths.jsonl "$@" \
    --out smollm2-$name.json > smollm2-$name.log 2>&1
}
qwen() {
  local name=$1; shift
  $S bench --config $C/2026-11-25-skip-choosers-qwen.yaml --model $QWEN --prompts-file $H "$@" \
    --out qwen-$name.json > qwen-$name.log 2>&1
}
lane1() {
  smol chain-adaptive --controller adaptive --tree none
  smol swift-adaptive --controller adaptive --tree swift
  smol small-adaptive --controller adaptive --tree 0.5:3,0.8:2,1:1 --tree-max-nodes 8
  smol swift-threshold --controller threshold --threshold 0.8 --tree swift
}
lane2() {
  qwen chain-fixed1 --controller fixed --max-draft 1 --tree none
  qwen swift-fixed1 --controller fixed --max-draft 1 --tree swift
  qwen small-fixed1 --controller fixed --max-draft 1 --tree 0.5:3,0.8:2,1:1
  qwen swift-adaptive --controller adaptive --tree swift
}
lane1 & lane2 & wait
