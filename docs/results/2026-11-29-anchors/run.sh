#!/usr/bin/env bash
# Issue 36, items 2 and 4: lookups grafted onto the feature head's draft as branches of one token
# tree (--lookup-tree), and llama.cpp's own speculative decoding of the same GGUF side by side with
# selfspec's best configuration, on the same prompts, in interleaved rounds.
#  * cal-s-NAME: `selfspec bench` of Qwen2.5-Coder-1.5B Q4_K_M on the 16 HumanEval calibration
#    problems, 64 greedy tokens, 1 thread, configuration NAME of SELFSPEC below (choosing the
#    lookup-tree shape);
#  * cal-l-NAME: scripts/dev/llama_cpp_speculative.py on the same 16 problems, 1 thread,
#    configuration NAME of LLAMA below (choosing each llama.cpp type's settings);
#  * round-K: one evaluation round on the 16 evaluation problems: at 1 and then 2 threads, every
#    configuration of EVAL_S (selfspec: plain decoding and the configuration, each prompt checked
#    token for token) and EVAL_L (llama.cpp), selfspec first in odd rounds and llama.cpp first in
#    even ones; JSON e-s-NAME-tT-rK.json and e-l-NAME-tT-rK.json;
#  * order-check: untrained, then best, at 2 threads (the reverse of the rounds' order), into
#    o-s-NAME-t2.json.
# Nothing here trains: the feature head, draft vocabulary and model are the shipped best
# configuration's (scripts/build-best-draft.sh qwen2.5-coder-1.5b), the draft model of llama.cpp is
# Qwen2.5-Coder-0.5B-Instruct Q4_K_M (scripts/get-model.sh qwen2.5-coder-0.5b-instruct).
#   docs/results/2026-11-29-anchors/run.sh NAME ...
# Uses the repository root's build (SELFSPEC_BUILD_DIR, default build) and the pinned llama.cpp
# build of scripts/dev/llama_cpp_baseline.sh (built on first use, with llama-completion and
# llama-speculative-simple); logs go to out/studies/anchors/ (git-ignored), the JSON next to this
# script; tables.py makes the page's tables from it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
out=$repo/out/studies/anchors
mkdir -p "$out"
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct | tail -n 1)
D=$(scripts/get-model.sh qwen2.5-coder-0.5b-instruct | tail -n 1)
# shellcheck source=scripts/dev/llama_cpp_baseline.sh
source scripts/dev/llama_cpp_baseline.sh
llama_dir=$(llamacpp_dir)
ensure_built "$llama_dir" llama-completion llama-speculative-simple
best=$repo/out/best/qwen2.5-coder-1.5b
FEATURE="--spec feature-head --feature-head $best/feature-head.safetensors --feature-head-dtype q4_k --draft-vocab $best/vocab.json --draft-vocab-size 16384 --controller fixed --max-draft 1"
declare -A SELFSPEC=(
  [best]="$FEATURE --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2"
  [tree]="$FEATURE --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2 --lookup-tree"
  [tree4]="$FEATURE --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 4 --lookup-tree"
  [tree4-reach]="$FEATURE --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 4 --lookup-tree --lookup-min-reach 0.3"
  [tree-12]="$FEATURE --tree 1:2 --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2 --lookup-tree"
  [untrained]="--spec lookup --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 4"
  # Longer matches, proposing further (llama.cpp's ngram-simple matches 12 tokens, drafts 48).
  [untrained-n12]="--spec lookup --lookup 12 --lookup-min-ngram 12 --lookup-max-draft 32"
  [untrained-n8]="--spec lookup --lookup 8 --lookup-min-ngram 4 --lookup-max-draft 16"
  [tree-n8]="$FEATURE --lookup 8 --lookup-min-ngram 2 --lookup-max-draft 16 --lookup-tree --lookup-min-reach 0.3"
  [tree-n12]="$FEATURE --lookup 12 --lookup-min-ngram 3 --lookup-max-draft 16 --lookup-tree --lookup-min-reach 0.2"
)
# llama.cpp's configurations: CONFIG [-- its options]. draft: the 0.5B model drafts (its default
# --spec-draft-n-max 3, and 8); the n-gram types with their defaults and with short n-grams.
declare -A LLAMA=(
  [plain]="plain"
  [draft]="draft"
  [draft-n8]="draft -- --spec-draft-n-max 8"
  [ngram-simple]="ngram-simple"
  [ngram-simple-n3]="ngram-simple -- --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8"
  [ngram-mod]="ngram-mod"
  [ngram-mod-n8]="ngram-mod -- --spec-ngram-mod-n-match 8 --spec-ngram-mod-n-min 2 --spec-ngram-mod-n-max 8"
  [ngram-cache]="ngram-cache"
)
# The evaluation's configurations (chosen on the calibration runs; see the page).
EVAL_S=(best tree untrained)
EVAL_L=(plain draft ngram-simple ngram-mod-n8 ngram-cache)

selfspec_run() {  # NAME SPLIT THREADS OUT_JSON
  local name=$1 split=$2 threads=$3 json=$4
  [ -n "${SELFSPEC[$name]:-}" ] || { echo "run.sh: no selfspec configuration '$name'" >&2; exit 2; }
  echo "run.sh: selfspec $name ($split, $threads thread(s); $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  # shellcheck disable=SC2086
  "$S" bench --model "$Q" --weights-dtype native --prompts-file "$H" --split "$split" \
    --max-prompts-per-task 16 --gen 64 --verify-cost-rounds 0 --threads "$threads" \
    ${SELFSPEC[$name]} --out "$json" > "$out/$(basename "$json" .json).log" 2>&1
}

llama_run() {  # NAME IDS_FROM THREADS OUT_JSON
  local name=$1 ids_from=$2 threads=$3 json=$4
  [ -n "${LLAMA[$name]:-}" ] || { echo "run.sh: no llama.cpp configuration '$name'" >&2; exit 2; }
  echo "run.sh: llama.cpp $name ($threads thread(s); $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  local -a spec
  read -r -a spec <<< "${LLAMA[$name]}"
  local config=${spec[0]}
  local -a extra=("${spec[@]:1}")
  local -a draft=()
  [ "$config" = draft ] && draft=(--draft-model "$D")
  python3 scripts/dev/llama_cpp_speculative.py --bin-dir "$llama_dir/build/bin" --model "$Q" \
    --prompts-file "$H" --ids-from-bench "$ids_from" --gen 64 --threads "$threads" \
    --config "$config" "${draft[@]}" --log-dir "$out/logs/$(basename "$json" .json)" \
    --out "$json" "${extra[@]}" 2> "$out/$(basename "$json" .json).log"
}

run() {
  local name=$1
  case "$name" in
    cal-s-*) selfspec_run "${name#cal-s-}" calibration 1 "$here/$name.json" ;;
    cal-l-*)
      [ -f "$here/cal-s-best.json" ] || selfspec_run best calibration 1 "$here/cal-s-best.json"
      llama_run "${name#cal-l-}" "$here/cal-s-best.json" 1 "$here/$name.json" ;;
    round-*)
      local k=${name#round-} t c
      for t in 1 2; do
        local -a order=(s l)
        ((k % 2 == 0)) && order=(l s)
        for engine in "${order[@]}"; do
          if [ "$engine" = s ]; then
            for c in "${EVAL_S[@]}"; do selfspec_run "$c" evaluation "$t" "$here/e-s-$c-t$t-r$k.json"; done
          else
            local ids=$here/e-s-best-t1-r1.json
            [ -f "$ids" ] || selfspec_run best evaluation 1 "$ids"
            for c in "${EVAL_L[@]}"; do llama_run "$c" "$ids" "$t" "$here/e-l-$c-t$t-r$k.json"; done
          fi
        done
      done ;;
    order-check)
      # The 2-thread rounds ran best first, tree second and untrained third; their plain decoding
      # rose in that order in both rounds. The same two configurations in the opposite order tell
      # a position effect from a configuration one.
      selfspec_run untrained evaluation 2 "$here/o-s-untrained-t2.json"
      selfspec_run best evaluation 2 "$here/o-s-best-t2.json" ;;
    *) echo "run.sh: no run '$name'" >&2; exit 2 ;;
  esac
}
[ $# -gt 0 ] || { echo "usage: $0 NAME ... (cal-s-NAME, cal-l-NAME, round-K)" >&2; exit 2; }
for name in "$@"; do run "$name"; done
