#!/usr/bin/env bash
# The tree-verification evaluation runs (issue 10 item 3): two lanes, one thread each; every bench
# run measures each prompt's autoregressive run and its speculative run side by side.
set -euo pipefail
cd "$(dirname "$0")"
S=../../../build/bin/selfspec
M=~/.cache/selfspec/models
P=../../prompts
smol() {  # name, extra options
  local name=$1; shift
  $S bench --model $M/SmolLM2-135M-Instruct.Q4_1.gguf --chat --gen 48 --max-prompts-per-task 3 \
    --prompts-file $P/chat.jsonl $P/qa.jsonl $P/summarisation.jsonl $P/maths.jsonl --threads 1 \
    --spec layer-skip --skip-config ../../../configs/skips/smollm2-135m-bo.json "$@" \
    --out smollm2-$name.json > smollm2-$name.log 2>&1
}
qwen() {
  local name=$1; shift
  $S bench --model $M/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf \
    --prompts-file ~/.cache/selfspec/prompts/humaneval.jsonl --gen 48 --max-prompts-per-task 4 \
    --threads 1 --spec layer-skip --skip-config ../../../configs/skips/qwen2.5-coder-1.5b-bo.json \
    "$@" --out qwen-$name.json > qwen-$name.log 2>&1
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
