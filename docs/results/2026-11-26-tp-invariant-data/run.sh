#!/usr/bin/env bash
# Exit-head training data collected at TP 1 and TP > 1 (issue 11: "collected data identical, bit
# for bit"): SmolLM2-135M at TP 1 and 3 (N = 8; the first calibration prompt of each of the four
# prompt sets, continued by 64 generated tokens, half sampled, plus their own text) and
# Qwen2.5-Coder-1.5B at TP 1 and 2 (N = 8; the first HumanEval calibration problem, 16 generated
# tokens), each with the default --reduction tp-invariant and with --reduction rank-order. Every
# data column is compared byte for byte (compare.py); the collections' positions/s show what the
# fixed-partition reduction costs. One thread per rank.
# From the repository root's build (SELFSPEC_BUILD_DIR, default build); the models and HumanEval
# from scripts/get-model.sh and scripts/get-prompts.sh; everything written to STUDY_OUT (default
# out/studies/2026-11-26-tp-invariant-data), compare.py's report as compare.txt.
#   docs/results/2026-11-26-tp-invariant-data/run.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none
B=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec || exit 1
P=$PWD/bench/prompts
SMOL=$(scripts/get-model.sh smollm2-135m-instruct) || exit 1
QWEN=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct) || exit 1
H=$(scripts/get-prompts.sh humaneval) || exit 1
out=${STUDY_OUT:-out/studies/2026-11-26-tp-invariant-data}
mkdir -p "$out" && cd "$out" || exit 1
S=(collect-exit-data --model "$SMOL" --chat --prompts-file $P/chat.jsonl $P/qa.jsonl
   $P/summarisation.jsonl $P/maths.jsonl --max-prompts-per-task 1 --exit-layer 8 --top-k 32
   --generate 64 --sampled-fraction 0.5 --temperature 0.8 --seed 1 --open-text --threads 1 --json --weights-dtype bf16)
Q=(collect-exit-data --model "$QWEN" --prompts-file "$H" --max-prompts-per-task 1 --exit-layer 8
   --top-k 8 --generate 16 --threads 1 --json --weights-dtype bf16)
collect() {  # name ranks command...
  local name=$1 ranks=$2; shift 2
  rm -rf "data-$name"
  local launcher=()
  [ "$ranks" -gt 1 ] && launcher=(mpirun -np "$ranks")
  timeout 1800 "${launcher[@]}" "$@" --out "data-$name" > "$name.json" 2> "$name.log"
  echo "$name rc $?"
}
for order in tp-invariant rank-order; do
  collect smol-$order-np1 1 $B "${S[@]}" --reduction $order
  collect smol-$order-np3 3 $B "${S[@]}" --reduction $order
  collect qwen-$order-np1 1 $B "${Q[@]}" --reduction $order
  collect qwen-$order-np2 2 $B "${Q[@]}" --reduction $order
done
/usr/bin/python3 "$here/compare.py" | tee compare.txt
