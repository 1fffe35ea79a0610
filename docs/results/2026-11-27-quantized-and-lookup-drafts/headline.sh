#!/usr/bin/env bash
# The headline a user would quote (issue 25): selfspec's best self-speculative decoding of the
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (configs/runs/best-qwen2.5-coder-1.5b.yaml, on the first
# 16 HumanEval evaluation problems, 64 greedy tokens, lossless) against llama.cpp's plain decoding
# of the same file (llama-bench tg64), 1 thread, interleaved: llama.cpp, selfspec, llama.cpp, ...
# for ROUNDS rounds (default 3). llama.cpp is scripts/dev/llama_cpp_baseline.sh's pinned build.
#   docs/results/2026-11-27-quantized-and-lookup-drafts/headline.sh [ROUNDS]
# Needs scripts/build-best-draft.sh qwen2.5-coder-1.5b first. Writes to STUDY_OUT.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
# shellcheck source=../../../scripts/dev/llama_cpp_baseline.sh
source scripts/dev/llama_cpp_baseline.sh
dir=$(llamacpp_dir)
ensure_built "$dir"
L=$dir/build/bin/llama-bench
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
out=${STUDY_OUT:-out/studies/2026-11-27-quantized-and-lookup-drafts}
rounds=${1:-3}
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
cfg=configs/runs/best-qwen2.5-coder-1.5b.yaml
gguf=out/best/qwen2.5-coder-1.5b/model.gguf
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  "$L" -m "$gguf" -p 0 -n 64 -t 1 -r 1 -o json > "$out/headline-llama-r$r.json"
  "$S" bench --config "$cfg" --prompts-file "$H" --max-prompts-per-task 16 --threads 1 \
    --out "$out/headline-selfspec-r$r.json" > "$out/headline-selfspec-r$r.log" 2>&1
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
llama, ar, spec, lossless = [], [], [], []
for r in range(1, rounds + 1):
    for test in json.load(open(f"{out}/headline-llama-r{r}.json")):
        if test.get("n_gen", 0) > 0:
            llama.append(test["avg_ts"])
    o = json.load(open(f"{out}/headline-selfspec-r{r}.json"))["results"][0]["overall"]
    ar.append(o["autoregressive_tokens_per_s"])
    spec.append(o["speculative_tokens_per_s"])
    lossless.append(f"{o['lossless_prompts']}/{o['prompts']}")
m = statistics.median
print(f"llama.cpp tg64 (plain), 1 thread: {m(llama):.2f} tok/s ({', '.join(f'{x:.2f}' for x in llama)})")
print(f"selfspec plain, 1 thread:          {m(ar):.2f} tok/s ({m(ar) / m(llama):.2f}x llama.cpp)")
print(f"selfspec best self-speculative:    {m(spec):.2f} tok/s ({m(spec) / m(llama):.2f}x llama.cpp, "
      f"{m(spec) / m(ar):.2f}x its plain decoding), lossless {lossless}")
PY
