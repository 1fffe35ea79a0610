#!/usr/bin/env bash
# Issue 25's new drafts on the evaluation prompts, one bench at a time (1 thread unless named):
#  * the model drafting as itself in fewer bits: Qwen2.5-Coder-1.5B loaded as bf16, drafting with
#    a q4_0 or q8_0 copy of its weights (--draft-weights), nothing skipped, fixed K 5;
#  * lookup drafts (--lookup) on top of the best earlier drafts: the EESD heads of
#    docs/results/2026-11-27-eesd-n-sweep.md (Qwen N 4, SmolLM2 N 2) and the q4_0 copy, and alone;
#  * the earlier skip-set drafters (D&V's BO sets, SWIFT, ASD) on the native kernels.
# The lookup settings come from the calibration runs (cal-*: the same commands with
# --split calibration); the best configurations and their 2-thread runs are
# configs/runs/best-*.yaml (headline.sh runs Qwen's).
#   docs/results/2026-11-27-quantized-and-lookup-drafts/run.sh [NAME ...]   (default: all)
# The heads and vocabularies are scripts/build-best-draft.sh's (out/best/MODEL/). From the
# repository root's build (SELFSPEC_BUILD_DIR, default build); everything written to STUDY_OUT
# (default out/studies/2026-11-27-quantized-and-lookup-drafts).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
P=$repo/bench/prompts
out=${STUDY_OUT:-out/studies/2026-11-27-quantized-and-lookup-drafts}
QD=$repo/out/best/qwen2.5-coder-1.5b
SD=$repo/out/best/smollm2-135m
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct | tail -n 1)
SM=$(scripts/get-model.sh smollm2-135m-instruct | tail -n 1)
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
SUITE=$P/chat.jsonl,$P/qa.jsonl,$P/summarisation.jsonl,$P/maths.jsonl
mkdir -p "$out"
cd "$out"
QB=(--model "$Q" --prompts-file "$H" --max-prompts-per-task 16 --gen 64 --verify-cost-rounds 0)
QEE=(--weights-dtype native --spec early-exit --exit-head "$QD/head-n4.safetensors"
     --exit-head-dtype q4_k --draft-vocab "$QD/vocab.json" --draft-vocab-size 16384)
QQ=(--weights-dtype bf16 --spec layer-skip --skip-uniform 0)
SB=(--model "$SM" --prompts-file "$SUITE" --chat --gen 64 --max-prompts-per-task 3
    --verify-cost-rounds 0)
SEE=(--weights-dtype native --spec early-exit --exit-head "$SD/head-n2.safetensors"
     --exit-head-dtype q4_0 --draft-vocab "$SD/vocab.json" --draft-vocab-size 8192)
declare -A runs=(
  [q-bf16-q4_0-k5]="${QB[*]} ${QQ[*]} --draft-weights q4_0 --controller fixed,thompson --max-draft 5 --threads 1"
  [q-bf16-q4_0-k5-t2]="${QB[*]} ${QQ[*]} --draft-weights q4_0 --controller fixed --max-draft 5 --threads 2"
  [q-bf16-q8_0-k5]="${QB[*]} ${QQ[*]} --draft-weights q8_0 --controller fixed --max-draft 5 --threads 1"
  [q-bf16-q4_0-k5-lk3x6]="${QB[*]} ${QQ[*]} --draft-weights q4_0 --controller fixed --max-draft 5 --lookup 3 --lookup-max-draft 6 --threads 1"
  [q-ee-k1]="${QB[*]} ${QEE[*]} --controller fixed --max-draft 1 --threads 1"
  [q-ee-k1-lk3x4]="${QB[*]} ${QEE[*]} --controller fixed --max-draft 1 --lookup 3 --lookup-max-draft 4 --threads 1"
  [q-ee-k1-lk4x6m1]="${QB[*]} ${QEE[*]} --controller fixed --max-draft 1 --lookup 4 --lookup-min-ngram 1 --lookup-max-draft 6 --threads 1"
  [s-ee-k1]="${SB[*]} ${SEE[*]} --controller fixed --max-draft 1 --threads 1"
  [q-bo]="${QB[*]} --weights-dtype native --spec layer-skip --skip-config $repo/configs/skips/qwen2.5-coder-1.5b-bo.json --controller fixed,thompson,adaptive --max-draft 3 --threads 1"
  [q-bo-lk]="${QB[*]} --weights-dtype native --spec layer-skip --skip-config $repo/configs/skips/qwen2.5-coder-1.5b-bo.json --controller fixed --max-draft 1 --lookup 3 --lookup-max-draft 2 --threads 1"
  [q-swift]="${QB[*]} --weights-dtype native --spec swift --controller fixed,thompson,adaptive --max-draft 3 --threads 1"
  [q-asd]="${QB[*]} --weights-dtype native --spec asd --controller fixed,thompson,adaptive --max-draft 3 --threads 1"
  [s-bo]="${SB[*]} --weights-dtype native --spec layer-skip --skip-config $repo/configs/skips/smollm2-135m-bo.json --controller fixed,thompson,adaptive --max-draft 3 --threads 1"
  [s-swift]="${SB[*]} --weights-dtype native --spec swift --controller fixed,thompson,adaptive --max-draft 3 --threads 1"
  [s-asd]="${SB[*]} --weights-dtype native --spec asd --controller fixed,thompson,adaptive --max-draft 3 --threads 1"
  [s-lk3m2x2]="${SB[*]} --weights-dtype native --spec lookup --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2 --threads 1"
  [s-ee-k1-lk3x4]="${SB[*]} ${SEE[*]} --controller fixed --max-draft 1 --lookup 3 --lookup-max-draft 4 --threads 1"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${!runs[@]}")
for name in "${names[@]}"; do
  [ -n "${runs[$name]:-}" ] || { echo "run.sh: no run '$name'" >&2; exit 2; }
  # shellcheck disable=SC2086  # the options are words
  "$S" bench ${runs[$name]} --out "$name.json" > "$name.log" 2>&1
done
