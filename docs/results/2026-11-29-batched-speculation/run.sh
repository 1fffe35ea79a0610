#!/usr/bin/env bash
# Issue 34's load runs: the batched speculative loop (selfspec bench-serving) against plain
# continuous batching of the same requests and against llama.cpp's batched decoding of the same
# GGUF (scripts/dev/llama_cpp_batched_bench.sh), 2 threads, one run at a time:
#  * q-serving / s-serving: Qwen2.5-Coder-1.5B (Q4_K_M) and SmolLM2-135M (Q4_1) with their best
#    configurations (configs/runs/best-*.yaml), evaluation prompts only (16 HumanEval problems;
#    4 of each of chat, qa, summarisation and maths with the chat template), 64 greedy tokens,
#    concurrency 1, 2, 4, 8, 16, modes plain / fixed / goodput interleaved, 3 rounds, all requests
#    arriving at once (16 Qwen requests; 48 SmolLM2 requests, its 16 prompts 3 times, so that a
#    run lasts long enough to measure);
#  * q-poisson: the same Qwen requests (32) arriving as a Poisson process, concurrency 8;
#  * q-bench / s-bench: `selfspec bench` of the same prompts, one sequence at a time;
#  * q-single: the check that concurrency 1 stays within 3 % of bench's single-sequence
#    speculative tokens/s, interleaved so that the machine's drift cancels: 3 rounds, each
#    `selfspec bench` of the 16 Qwen prompts (q-single-bench-R) and bench-serving at concurrency
#    1, plain and fixed (q-single-serving-R), in alternating order;
#  * q-llama / s-llama: llama-batched-bench at B = 1, 2, 4, 8, 16, prompt 128, 64 tokens;
#  * q-vt: v(T) for T = 1 … 64 (verification forwards of T tokens over a 128-token context);
#  * cpu-peak: this CPU's instruction throughput (../shared/probes/peak.c, one thread: the clock
#    and vpdpbusd / FMA per cycle), the ceiling the v(T) rates are compared with; skipped with a
#    note where the probe is not there;
#  * z-tp1 / z-tp2: Qwen2.5-Coder-0.5B (Q4_K_M; SmolLM2's 9 heads do not split over 2 ranks) with
#    a layer-skip draft and lookups at TP 1 and TP 2 (mpirun), --json-tokens, for per-request
#    token identity at every concurrency and mode (the same tokens as plain decoding alone at the
#    same TP degree); z-tp1-inv / z-tp2-inv the same with --reduction tp-invariant, whose forwards
#    are bit-identical at every TP degree, so TP 1 and TP 2 give the same tokens too.
#   docs/results/2026-11-29-batched-speculation/run.sh [NAME ...]   (default: all, in this order)
# The Qwen head and vocabulary come from scripts/build-best-draft.sh (out/best/MODEL/). Uses the
# repository root's build (SELFSPEC_BUILD_DIR, default build); writes the JSON files next to this
# script (the load runs gzipped); tables.py makes the page's tables from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
P=$repo/bench/prompts
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct | tail -n 1)
SM=$(scripts/get-model.sh smollm2-135m-instruct | tail -n 1)
Z=$(scripts/get-model.sh qwen2.5-coder-0.5b-instruct | tail -n 1)
SUITE=$P/chat.jsonl,$P/qa.jsonl,$P/summarisation.jsonl,$P/maths.jsonl
QC=(--config configs/runs/best-qwen2.5-coder-1.5b.yaml --prompts-file "$H"
    --max-prompts-per-task 16 --threads 2)
SC=(--config configs/runs/best-smollm2-135m.yaml --prompts-file "$SUITE"
    --max-prompts-per-task 4)
ZC=(--model "$Z" --weights-dtype native --spec layer-skip --skip-uniform 0.25 --controller fixed
    --max-draft 3 --lookup 3 --lookup-max-draft 2 --prompts-file "$SUITE" --chat
    --max-prompts-per-task 4 --concurrency 1,4,16 --modes plain,fixed,goodput --requests 16
    --gen 32 --json-tokens)
LOAD=(--concurrency 1,2,4,8,16 --modes plain,fixed,goodput --rounds 3 --gen 64)
mpi=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {
  local name=$1
  echo "run.sh: $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  case "$name" in
    q-serving) "$S" bench-serving "${QC[@]}" "${LOAD[@]}" --requests 16 --out "$here/$name.json" ;;
    q-poisson) "$S" bench-serving "${QC[@]}" --concurrency 8 --modes plain,fixed,goodput \
                 --requests 32 --rate 1.5 --gen 64 --out "$here/$name.json" ;;
    q-bench) "$S" bench "${QC[@]}" --gen 64 --out "$here/$name.json" ;;
    q-single)
      for round in 1 2 3; do
        order=(bench serving)
        [ $((round % 2)) = 0 ] && order=(serving bench)
        for what in "${order[@]}"; do
          if [ "$what" = bench ]; then
            "$S" bench "${QC[@]}" --gen 64 --out "$here/$name-bench-$round.json"
          else
            "$S" bench-serving "${QC[@]}" --concurrency 1 --modes plain,fixed --rounds 1 \
              --requests 16 --gen 64 --out "$here/$name-serving-$round.json"
          fi
        done
      done ;;
    q-llama) scripts/dev/llama_cpp_batched_bench.sh "$Q" "out/studies/$name" --threads 2 \
               --concurrency 1,2,4,8,16 --prompt 128 --gen 64 --rounds 2 >/dev/null
             cp "out/studies/$name/batched_bench.json" "$here/$name.json" ;;
    q-vt) "$S" bench --model "$Q" --weights-dtype native --prompt-len 128 --prompts 1 --gen 8 \
            --threads 2 --verify-cost-max 63 --verify-cost-rounds 3 --out "$here/$name.json" ;;
    cpu-peak)
      probe=$repo/../shared/probes/peak.c
      [ -f "$probe" ] || { echo "run.sh: no $probe: cpu-peak skipped" >&2; return 0; }
      mkdir -p out/studies
      gcc -O2 -march=native "$probe" -o "out/studies/peak" -lpthread -lm
      out/studies/peak | python3 -c 'import json, sys; print(json.dumps({"probe": "peak.c", "threads": 1, "lines": sys.stdin.read().splitlines()}, indent=1))' \
        > "$here/$name.json" ;;
    s-serving) "$S" bench-serving "${SC[@]}" --threads 2 "${LOAD[@]}" --requests 48 --out "$here/$name.json" ;;
    s-bench) "$S" bench "${SC[@]}" --threads 2 --gen 64 --out "$here/$name.json" ;;
    s-llama) scripts/dev/llama_cpp_batched_bench.sh "$SM" "out/studies/$name" --threads 2 \
               --concurrency 1,2,4,8,16 --prompt 128 --gen 64 --rounds 2 >/dev/null
             cp "out/studies/$name/batched_bench.json" "$here/$name.json" ;;
    z-tp1) "$S" bench-serving "${ZC[@]}" --threads 2 --out "$here/$name.json" ;;
    z-tp2) timeout 1200 "${mpi[@]}" "$S" bench-serving "${ZC[@]}" --threads 1 --tp 2 \
             --out "$here/$name.json" ;;
    z-tp1-inv) "$S" bench-serving "${ZC[@]}" --threads 2 --reduction tp-invariant \
                 --out "$here/$name.json" ;;
    z-tp2-inv) timeout 1200 "${mpi[@]}" "$S" bench-serving "${ZC[@]}" --threads 1 --tp 2 \
                 --reduction tp-invariant --out "$here/$name.json" ;;
    *) echo "run.sh: no run '$name'" >&2; exit 2 ;;
  esac
}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(q-bench q-single q-serving q-poisson q-llama q-vt cpu-peak s-bench s-serving s-llama
                                  z-tp1 z-tp2 z-tp1-inv z-tp2-inv)
for name in "${names[@]}"; do
  run "$name"
  # The load runs hold every request's token times: stored gzipped (tables.py reads either).
  case "$name" in
    *-serving | q-poisson | z-*) gzip -9 -f "$here/$name.json" ;;
    q-single) gzip -9 -f "$here/$name"-serving-*.json ;;
  esac
done
