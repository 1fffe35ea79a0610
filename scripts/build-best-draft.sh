#!/usr/bin/env bash
# Makes every file a best-draft run config names (configs/runs/best-*.yaml), from calibration
# prompts only, into out/best/NAME/ (git-ignored), where the config looks for them:
#   model.gguf              a link to the GGUF of scripts/get-model.sh
#   feature-head.safetensors  Qwen: the feature-level draft head (EAGLE §3;
#                           scripts/train_feature_head.py), read by --spec feature-head
#   head-nN.safetensors     SmolLM2: the early-exit head after layer N (EESD §3.1;
#                           scripts/train_exit_head.py; its best configuration does not read it)
#   vocab.json              the draft vocabulary ranking (selfspec count-vocab)
#   timings.json            the seconds of each step and of the whole recipe
#
#   scripts/build-best-draft.sh qwen2.5-coder-1.5b|smollm2-135m [--quick | --model-only]
#
# Qwen: the recipe of docs/results/2026-11-29-head-training.md: collect-exit-data of the 41
# HumanEval calibration problems, each continued twice by the model (128 tokens), and 70,000
# tokens of the Python standard library at the final residual (--exit-layer L), then the feature
# head trained 4 epochs (windows of 256, lr 3e-4 decayed by a cosine, the best held-out depth-1
# agreement kept, evaluated every 30,000 positions) under bf16 autocast where a timed probe finds
# it faster (--precision auto; docs/results/2026-11-29-feature-head.md measured the same recipe
# with 40,000 tokens in f32). SmolLM2: the EESD recipe of docs/results/2026-11-27-eesd-n-sweep.md, the 16 calibration
# prompts of bench/prompts × 32 continuations of 256 tokens + 420k tokens of Debian documentation,
# N = 2 (about 12 + 3 min). Every step prints its progress (the tools' own lines, with the time
# left) every 30 s, and the recipe its steps' elapsed times. --quick shrinks every budget (a smoke
# test of the pipeline in a few minutes, into out/best/NAME-quick/; its head is not the measured
# one). --model-only links the model and stops (configs/runs/best-smollm2-135m.yaml and
# configs/runs/untrained-*.yaml name no trained file).
# Uses the build in SELFSPEC_BUILD_DIR (default build) and /usr/bin/python3 with PyTorch (PYTHON).
# Exit status: 0 done, 1 a step failed (its log is named), 2 bad arguments.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
name=${1:-}
quick=0
model_only=0
case "${2:-}" in
  "") ;;
  --quick) quick=1 ;;
  --model-only) model_only=1 ;;
  *) name="" ;;
esac
if [ $# -gt 2 ] || [ -z "$name" ]; then
  echo "usage: scripts/build-best-draft.sh qwen2.5-coder-1.5b|smollm2-135m [--quick | --model-only]" >&2
  exit 2
fi
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
PY=${PYTHON:-/usr/bin/python3}
[ -x "$S" ] || { echo "build-best-draft.sh: no $S (run scripts/build.sh first)" >&2; exit 1; }
P=$repo/bench/prompts
case $name in
  qwen2.5-coder-1.5b) model=qwen2.5-coder-1.5b-instruct ;;
  smollm2-135m) model=smollm2-135m-instruct ;;
  *)
    echo "build-best-draft.sh: qwen2.5-coder-1.5b or smollm2-135m, not '$name'" >&2
    exit 2 ;;
esac
out=$repo/out/best/$name
[ $quick -eq 1 ] && out=$out-quick  # a smoke test never replaces the real files
mkdir -p "$out"
gguf=$(scripts/get-model.sh "$model" | tail -n 1)
ln -sfn "$gguf" "$out/model.gguf"
if [ $model_only -eq 1 ]; then
  echo "build-best-draft.sh: done: $out/model.gguf" >&2
  exit 0
fi
case $name in
  qwen2.5-coder-1.5b)
    kind=feature n=28  # the final residual: the feature head's input
    prompts=$(scripts/get-prompts.sh humaneval | tail -n 1)
    scripts/get-open-text.sh code "$out/open-text" >&2
    text=$out/open-text/python-stdlib
    gen=128 continuations=2 tokens=70000 batch=16 epochs=4 eval_every=30000 chat=() ;;
  smollm2-135m)
    kind=eesd n=2
    prompts=$P/chat.jsonl,$P/qa.jsonl,$P/summarisation.jsonl,$P/maths.jsonl
    scripts/get-open-text.sh prose "$out/open-text" >&2
    text=$out/open-text
    gen=256 continuations=32 tokens=420000 batch=32 epochs=1 eval_every=20000 chat=(--chat) ;;
esac
if [ $quick -eq 1 ]; then gen=32 continuations=1 tokens=4000 epochs=1; fi

started=$SECONDS
timings=()
step() {  # step NAME COMMAND...: runs it with its output in NAME.log, naming the log on failure
  local name=$1 log=$out/$1.log begin=$SECONDS
  shift
  echo "build-best-draft.sh: $(date +%T) $name (log ${log##*/}; $((SECONDS - started)) s so far)" >&2
  "$@" > "$log" 2>&1 &
  local pid=$! quiet=0
  # Every 30 s, the step's latest progress line (the tools print the time left).
  while kill -0 "$pid" 2> /dev/null; do
    sleep 1
    quiet=$((quiet + 1))
    if [ $quiet -ge 30 ]; then
      quiet=0
      echo "build-best-draft.sh:   $name, $((SECONDS - begin)) s: $(tr '\r' '\n' < "$log" |
        grep -v '^[[:space:]]*$' | tail -n 1 | cut -c1-160)" >&2
    fi
  done
  if ! wait "$pid"; then
    echo "build-best-draft.sh: failed; see $log" >&2
    exit 1
  fi
  timings+=("\"$name\": $((SECONDS - begin))")
}
step collect "$S" collect-exit-data --model "$gguf" --prompts-file "$prompts" "${chat[@]}" \
  --generate "$gen" --continuations "$continuations" --batch "$batch" \
  --open-text-files "$text" --open-text-tokens "$tokens" --open-text-window 512 \
  --exit-layer "$n" --threads 2 --seed 24 --out "$out/data" --json
step vocab "$S" count-vocab --model "$gguf" --prompts-file "$prompts" "${chat[@]}" \
  --generate "$gen" --batch "$batch" --open-text-files "$text" --threads 2 \
  --out "$out/vocab.json" --json
if [ "$kind" = feature ]; then
  head=feature-head.safetensors
  step train "$PY" scripts/train_feature_head.py "$out/data" --out "$out/$head" \
    --epochs "$epochs" --batch 8 --max-len 256 --lr 3e-4 --lr-schedule cosine --negatives 512 \
    --eval-every "$eval_every" --eval-positions 2000 --patience 4 --precision auto --threads 2 \
    --json
else
  head=head-n$n.safetensors
  step train "$PY" scripts/train_exit_head.py "$out/data" --out "$out/$head" \
    --epochs "$epochs" --batch 8 --max-len 256 --lr 3e-4 --lr-schedule cosine --negatives 512 \
    --eval-every "$eval_every" --eval-positions 3000 --patience 4 --precision auto --threads 2 \
    --json
fi
total=$((SECONDS - started))
(IFS=,; echo "{${timings[*]}, \"total\": $total, \"finished\": \"$(date -u +%FT%TZ)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\", \"cores\": $(nproc)}") > "$out/timings.json"
echo "build-best-draft.sh: done in $((total / 60)) min $((total % 60)) s: $out (model.gguf, $head, vocab.json, timings.json)" >&2
