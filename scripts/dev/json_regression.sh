#!/usr/bin/env bash
# A fixed script of runs whose JSON must not change under a refactoring (issue 23): the planted
# demo model, stories260K, SmolLM2-135M with every --spec and controller, trees, TP 1, 2 and 3, and
# bench with --spec and --prompts-file. Run it before and after, then compare:
#
#   scripts/dev/json_regression.sh OUT_BEFORE    # at the old commit
#   scripts/dev/json_regression.sh OUT_AFTER     # at the new one
#   scripts/dev/json_regression_diff.py OUT_BEFORE OUT_AFTER
#
# The diff leaves out timing fields only (json_regression_diff.py lists them). Models:
# SELFSPEC_STORIES (a stories260K checkpoint in HF layout; its runs are left out when unset) and
# SELFSPEC_SMOLLM2 (SmolLM2-135M-Instruct.Q4_1.gguf; default ~/.cache/selfspec/models, where
# scripts/get-model.sh puts it); each group of runs is left out, with a line saying so, when its
# model is missing. /usr/bin/python3 with
# torch trains the Cali-TS predictor (the cali-ts runs are left out without it).
# SELFSPEC_JSON_RESUME=1 keeps the records an interrupted run already wrote.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: json_regression.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=${SELFSPEC_BIN:-$(pwd)/${SELFSPEC_BUILD_DIR:-build}/bin/selfspec}
stories=${SELFSPEC_STORIES:-}
smol=${SELFSPEC_SMOLLM2:-$HOME/.cache/selfspec/models/SmolLM2-135M-Instruct.Q4_1.gguf}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$out/work
mkdir -p "$work"

# run NAME RANKS ARGS...: one command's last stdout line (its --json record) into NAME.json.
run() {
  local name=$1 ranks=$2
  shift 2
  if [ -n "${SELFSPEC_JSON_RESUME:-}" ] && [ -s "$out/$name.json" ]; then return; fi
  local launch=(timeout 600)
  if [ "$ranks" -gt 1 ]; then launch+=(mpirun -np "$ranks"); fi
  echo "== $name" >&2
  "${launch[@]}" "$bin" "$@" > "$work/$name.stdout" 2> "$work/$name.stderr" ||
    { echo "error: $name failed:" >&2; tail -n 5 "$work/$name.stderr" >&2; exit 1; }
  tail -n 1 "$work/$name.stdout" > "$out/$name.json"
}

controllers=(fixed threshold adaptive thompson)

# The planted demo model (scripts/demo.sh --planted), TP 2: bench and a traced generation.
planted=$work/planted
"$bin" make-model --out "$planted" --preset planted-redundancy --seed 1 > /dev/null
run planted-bench-tp2 2 bench --model "$planted" --prompt-len 32 --gen 48 --prompts 2 \
  --spec layer-skip --skip-config "$planted/skips.json" --controller adaptive,thompson \
  --out "$out/planted-bench-tp2.full.json" --json
for ranks in 1 2; do
  run "planted-generate-tp$ranks" "$ranks" generate --model "$planted" \
    --prompt-ids 1,450,4996,17354,338,263 --max-new-tokens 48 --ignore-eos --json \
    --spec layer-skip --skip-config "$planted/skips.json" --controller thompson \
    --trace "$out/planted-trace-tp$ranks.jsonl"
done

# stories260K: every drafter and controller, chains and trees, TP 1 and 2.
if [ -n "$stories" ] && [ -d "$stories" ]; then
  story=(--model "$stories" --prompt-ids 1,403,407,263,31,292 --max-new-tokens 40 --ignore-eos --json)
  run stories-plain 1 generate "${story[@]}"
  for ranks in 1 2; do
    for c in "${controllers[@]}"; do
      run "stories-layer-skip-$c-tp$ranks" "$ranks" generate "${story[@]}" --spec layer-skip \
        --skip-attn 1,3 --skip-mlp 2 --controller "$c" --max-draft 6
    done
    run "stories-swift-tp$ranks" "$ranks" generate "${story[@]}" --spec swift --swift-ratio 0.3 \
      --swift-min-window 8 --swift-window 8
    run "stories-asd-tp$ranks" "$ranks" generate "${story[@]}" --spec asd --asd-alpha 0.5
    run "stories-tree-tp$ranks" "$ranks" generate "${story[@]}" --spec layer-skip \
      --skip-uniform 0.25 --tree swift --tree-max-nodes 12
    run "stories-sampled-tp$ranks" "$ranks" generate "${story[@]}" --spec layer-skip \
      --skip-uniform 0.25 --temperature 0.8 --top-p 0.9 --seed 7 --controller thompson
    run "stories-gather-tp$ranks" "$ranks" generate "${story[@]}" --spec layer-skip \
      --skip-uniform 0.25 --logits gather --debug-sync
  done
else
  echo "stories260K not given or not found (SELFSPEC_STORIES='$stories'): its runs are left out" >&2
fi

# SmolLM2-135M (native Q4_1): every --spec and controller, bench over prompt files.
if [ -f "$smol" ]; then
  smol_gen=(--model "$smol" --chat --prompt "Why is the sky blue?" --max-new-tokens 32 --json)
  run smol-plain 1 generate "${smol_gen[@]}"
  for c in "${controllers[@]}"; do
    run "smol-layer-skip-$c" 1 generate "${smol_gen[@]}" --spec layer-skip --skip-uniform 0.3 \
      --controller "$c"
  done
  run smol-layer-skip-tp3 3 generate "${smol_gen[@]}" --spec layer-skip --skip-uniform 0.3
  run smol-swift 1 generate "${smol_gen[@]}" --spec swift
  run smol-asd 1 generate "${smol_gen[@]}" --spec asd
  run smol-tree 1 generate "${smol_gen[@]}" --spec layer-skip --skip-uniform 0.3 --tree 0.5:4,1:1
  # Early exit: the untrained head of a collection on two calibration prompts, then Cali-TS.
  rm -rf "$work/exit" "$work/cali"
  calib=$work/calib.jsonl
  grep '"calibration"' bench/prompts/chat.jsonl | head -n 2 > "$calib"
  "$bin" collect-exit-data --model "$smol" --prompts-file "$calib" --exit-layer 10 --top-k 8 \
    --generate 16 --out "$work/exit" > /dev/null 2> "$work/collect-exit.stderr"
  head=$work/exit/init_layer.safetensors
  for c in "${controllers[@]}"; do
    run "smol-early-exit-$c" 1 generate "${smol_gen[@]}" --spec early-exit --exit-head "$head" \
      --controller "$c"
  done
  run smol-early-exit-tp3 3 generate "${smol_gen[@]}" --spec early-exit --exit-head "$head" \
    --tree swift
  if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
    "$bin" collect-cali-data --model "$smol" --chat --prompts-file "$calib" --exit-head "$head" \
      --generate 32 --max-draft 4 --out "$work/cali" > /dev/null 2> "$work/collect-cali.stderr"
    OMP_NUM_THREADS=1 /usr/bin/python3 scripts/train_exit_head.py --predictor "$work/cali" \
      --out "$work/predictor.safetensors" --epochs 2 --threads 1 > "$work/train.log" 2>&1
    run smol-early-exit-cali-ts 1 generate "${smol_gen[@]}" --spec early-exit \
      --exit-head "$head" --controller cali-ts --cali-predictor "$work/predictor.safetensors"
  else
    echo "/usr/bin/python3 has no torch: the cali-ts run is left out" >&2
  fi
  # bench: a list of controllers and logits modes over real prompts, TP 1 and 3 (9 heads).
  for ranks in 1 3; do
    run "smol-bench-prompts-tp$ranks" "$ranks" bench --model "$smol" \
      --prompts-file bench/prompts/qa.jsonl,bench/prompts/maths.jsonl --max-prompts-per-task 2 \
      --gen 24 --spec layer-skip --skip-uniform 0.3 --controller fixed,adaptive \
      --logits local,gather --out "$out/smol-bench-prompts-tp$ranks.full.json" --json
  done
  run smol-bench-asd 1 bench --model "$smol" --prompt-len 32 --gen 24 --prompts 2 --spec asd \
    --out "$out/smol-bench-asd.full.json" --json
else
  echo "SmolLM2-135M not found at $smol: its runs are left out" >&2
fi
echo "JSON records in $out" >&2
