#!/usr/bin/env bash
# The main job on an embedded default: sets everything up, builds, writes a synthetic
# LLaMA-architecture checkpoint (seeded random weights, ~100 MB in bf16) and generates from it
# with tensor parallelism over 2 MPI ranks. Results: out/demo/generate.json.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
bin=${SELFSPEC_BUILD_DIR:-build}/bin/selfspec
model=out/demo/model
mkdir -p out/demo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

if [ ! -f "$model/config.json" ]; then
  "$bin" make-model --out "$model" --layers 8 --hidden 1024 --heads 16 --kv-heads 4 \
    --intermediate 2816 --vocab 32000 --dtype bf16 --seed 0
fi
"$bin" info --model "$model" --tp 2

echo "== mpirun -np 2 selfspec generate (greedy, 64 tokens; synthetic weights, so the ids are arbitrary)"
timeout 600 mpirun -np 2 "$bin" generate --model "$model" --prompt-ids 1,450,4996,17354 \
  --max-new-tokens 64 --ignore-eos --json > out/demo/generate.json
echo "result (out/demo/generate.json):"
tail -n 1 out/demo/generate.json
