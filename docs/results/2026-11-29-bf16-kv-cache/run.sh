#!/usr/bin/env bash
# Issue 32 item 2: the bf16 KV cache (--kv-dtype bf16), measured on the CPU (no GPU was lent this
# session; the GPU check measures it there: scripts/gpu/gpu_check, steps bench_7b_ctx4k_kv_*).
# Runs:
#  * kernels: kernel_bench's decode attention (one new token over 1024 and 4096 cached slots;
#    LLaMA-7B 32 heads of 128, Qwen2.5-1.5B 12 query heads on 2 KV heads of 128, SmolLM2-135M 9 on
#    3 of 64), AVX2 and AVX-512, f32 and bf16 caches, 3 repetitions;
#  * long-KV-rN: selfspec bench of Qwen2.5-Coder-1.5B Q4_K_M, plain decoding after a 3,000-token
#    random prompt (2 prompts, 32 tokens each, 2 threads), KV cache in KV (f32 or bf16);
#  * e-KV-rN: selfspec bench of the shipped best configuration (configs/runs/best-qwen2.5-coder-
#    1.5b.yaml: the feature head + lookups, K 1) against plain decoding, both over a KV cache of
#    KV, on the 16 reported HumanEval evaluation problems (the first 16 of the split), 64 greedy
#    tokens, 1 thread; the bench checks every prompt token for token (speculative == plain);
#  * agree: selfspec generate, plain greedy, 64 tokens, of the same 16 problems' prompts with an
#    f32 and a bf16 cache: where the two types' outputs part (they may: bf16 rounds K and V).
# Nothing here is tuned: the kernels and the option have no parameters chosen on these prompts.
#   docs/results/2026-11-29-bf16-kv-cache/run.sh NAME ...
# Uses the repository root's build (SELFSPEC_BUILD_DIR, default build); logs go to
# out/studies/bf16-kv-cache/ (git-ignored), the JSON next to this script; tables.py makes the
# page's tables from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
B=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin
out=$repo/out/studies/bf16-kv-cache
mkdir -p "$out"
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct | tail -n 1)
best=$repo/out/best/qwen2.5-coder-1.5b
[ -f "$best/feature-head.safetensors" ] || {
  echo "run.sh: no $best/feature-head.safetensors: run scripts/build-best-draft.sh qwen2.5-coder-1.5b" >&2
  exit 2
}
BEST=(--spec feature-head --feature-head "$best/feature-head.safetensors" --feature-head-dtype q4_k
      --draft-vocab "$best/vocab.json" --draft-vocab-size 16384 --controller fixed --max-draft 1
      --lookup 3 --lookup-min-ngram 2 --lookup-max-draft 2)
run() {
  local name=$1
  echo "run.sh: $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  case "$name" in
    kernels)
      "$B/kernel_bench" --benchmark_filter='attention_decode/(avx2|avx512)/' \
        --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
        --benchmark_format=json > "$here/kernels.json" 2> "$out/kernels.log" ;;
    long-*)
      local kv=${name#long-}; kv=${kv%-r[0-9]*}
      "$B/selfspec" bench --model "$Q" --weights-dtype native --kv-dtype "$kv" --prompt-len 3000 \
        --gen 32 --prompts 2 --reps 1 --threads 2 --verify-cost-rounds 0 \
        --out "$here/$name.json" > "$out/$name.log" 2>&1 ;;
    e-*)
      local kv=${name#e-}; kv=${kv%-r[0-9]*}
      "$B/selfspec" bench --model "$Q" --weights-dtype native --kv-dtype "$kv" \
        --prompts-file "$H" --split evaluation --max-prompts-per-task 16 --gen 64 \
        --verify-cost-rounds 0 --threads 1 "${BEST[@]}" \
        --out "$here/$name.json" > "$out/$name.log" 2>&1 ;;
    agree)
      python3 - "$H" "$B/selfspec" "$Q" "$here/agree.json" <<'PY'
import json, subprocess, sys
prompts_file, selfspec, model, out = sys.argv[1:]
rows = [json.loads(l) for l in open(prompts_file) if l.strip()]
rows = [r for r in rows if r["split"] == "evaluation"][:16]
result = []
for row in rows:
    tokens = {}
    for kv in ("f32", "bf16"):
        run = subprocess.run([selfspec, "generate", "--model", model, "--weights-dtype", "native",
                              "--kv-dtype", kv, "--prompt", row["prompt"], "--max-new-tokens",
                              "64", "--ignore-eos", "--threads", "2", "--json"],
                             capture_output=True, text=True, check=True)
        tokens[kv] = json.loads(run.stdout.strip().splitlines()[-1])["tokens"]
    same = next((i for i, (a, b) in enumerate(zip(tokens["f32"], tokens["bf16"])) if a != b),
                None)
    result.append({"id": row["id"], "tokens": tokens, "first_difference": same})
json.dump({"model": model, "prompts": result}, open(out, "w"), indent=1)
PY
      ;;
    *) echo "run.sh: no run '$name'" >&2; exit 2 ;;
  esac
}
[ $# -gt 0 ] || { echo "usage: run.sh NAME ..." >&2; exit 2; }
for name in "$@"; do run "$name"; done
