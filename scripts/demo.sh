#!/usr/bin/env bash
# The main job on an embedded default: sets everything up, builds, writes the synthetic
# planted-redundancy checkpoint (make-model --preset planted-redundancy: seeded random weights,
# ~490 MB in bf16, some sublayers made nearly redundant on purpose, peaked next-token
# distribution) and, with tensor parallelism over 2 MPI ranks,
#   1. benchmarks autoregressive vs self-speculative decoding side by side on the same prompts
#      (speeds, acceptance rate, mean accepted length, speedup; out/demo/bench.json);
#   2. generates with self-speculative decoding and checks the tokens against plain decoding
#      (out/demo/autoregressive.json, out/demo/speculative.json, out/demo/trace.jsonl).
# The weights carry no knowledge: token ids are arbitrary; the demo measures the machinery.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
bin=${SELFSPEC_BUILD_DIR:-build}/bin/selfspec
model=out/demo/planted
mkdir -p out/demo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(timeout 900 mpirun -np 2)

if [ ! -f "$model/skips.json" ]; then
  "$bin" make-model --out "$model" --preset planted-redundancy --seed 1
fi
"$bin" info --model "$model" --tp 2
spec=(--spec layer-skip --skip-config "$model/skips.json")

echo
echo "== autoregressive vs self-speculative decoding, tp 2 (mpirun -np 2), greedy"
"${mpirun[@]}" "$bin" bench --model "$model" --prompt-len 64 --gen 128 --prompts 2 \
  "${spec[@]}" --controller adaptive,thompson --out out/demo/bench.json

echo
echo "== self-speculative generation (thompson controller) vs plain decoding, tp 2"
prompt=(--prompt-ids 1,450,4996,17354,338,263 --max-new-tokens 96 --ignore-eos --json)
"${mpirun[@]}" "$bin" generate --model "$model" "${prompt[@]}" > out/demo/autoregressive.json
"${mpirun[@]}" "$bin" generate --model "$model" "${prompt[@]}" "${spec[@]}" \
  --controller thompson --trace out/demo/trace.jsonl > out/demo/speculative.json
ar_tokens=$(tail -n 1 out/demo/autoregressive.json | grep -o '"tokens":\[[0-9,]*\]')
spec_tokens=$(tail -n 1 out/demo/speculative.json | grep -o '"tokens":\[[0-9,]*\]')
if [ "$ar_tokens" = "$spec_tokens" ]; then
  echo "tokens identical to autoregressive decoding (96 tokens); results in out/demo/"
else
  echo "error: self-speculative tokens differ from autoregressive tokens" >&2
  exit 1
fi
