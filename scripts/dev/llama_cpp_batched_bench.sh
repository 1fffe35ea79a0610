#!/usr/bin/env bash
# llama.cpp's batched decoding on a GGUF file: aggregate generation tokens/s with B sequences
# decoded together, for each B of --concurrency, at one thread count. The llama.cpp side of
# `selfspec bench-serving` (selfspec's load benchmark) on the same file and threads.
#
#   scripts/dev/llama_cpp_batched_bench.sh GGUF OUT_DIR [--threads 2] [--concurrency 1,2,4,8,16]
#       [--prompt 128] [--gen 64] [--rounds 2]
#
# What it measures: ROUNDS rounds; in each round, for each B of --concurrency, one run of
#   llama-batched-bench -m GGUF -t THREADS -npp PROMPT -ntg GEN -npl B -c CTX --output-format jsonl
# (CTX = B x (PROMPT + GEN) rounded up to a multiple of 256 per sequence, which llama.cpp would
# round to anyway). One run = one llama.cpp process: model load (not timed), a warm-up decode of
# 16 tokens (not timed), then one timed measurement, which is:
# - prefill: B sequences, each with ITS OWN prompt of PROMPT random token ids (the prompt is not
#   shared: no -pps), all B x PROMPT tokens submitted as one batch (llama.cpp splits it into
#   ubatches of 512); T_PP is its time, i.e. every sequence's time to first token, and S_PP
#   = B x PROMPT / T_PP.
# - generation: GEN steps; each step is one llama_decode of B tokens, one per sequence (sequence j
#   at position PROMPT + i; the default interleaved pattern, no -tgs), with logits for all of them.
#   T_TG is the time of the GEN steps and S_TG = B x GEN / T_TG: the AGGREGATE generated tokens/s
#   over all B sequences, generation phase only (prefill excluded). Per sequence that is S_TG / B.
# - total: T = T_PP + T_TG and S = B x (PROMPT + GEN) / T.
# This script adds "gen tok/s incl. prefill" = B x GEN / T: generated tokens over the whole run,
# prefill included, the analogue of bench-serving's aggregate tokens/s (generated ÷ wall).
# llama.cpp's settings are its defaults: KV cache f16, one KV stream per sequence (not unified),
# flash attention "auto" (llama.cpp decides at context creation; -1 in the JSON), n_batch 2048,
# n_ubatch 512, -t THREADS for both the decode and the batch threads. Token ids are random and
# nothing is sampled. Each run is one measurement (llama-batched-bench has no repetitions), so
# each B gets ROUNDS samples and the table shows their medians. The order of the B values
# alternates: ascending in odd rounds, descending in even ones, so that drift falls on all alike
# (use an even ROUNDS for an even split). /proc/loadavg is recorded before and after every run: a
# figure is only as good as the machine was quiet (with more runnable work than cores,
# multi-threaded decoding collapses, since every thread waits at each op's barrier for the
# slowest, preempted one). llama.cpp is the pinned build of scripts/dev/llama_cpp_baseline.sh
# (sourced here): llama-batched-bench is added to that build tree on first use (only its own two
# sources are compiled; the whole build, if there is none yet, takes ~25 minutes).
#
# What it does NOT measure, or not as bench-serving does:
# - Serving: the B sequences start together and end together (one fixed batch, one wave): no
#   arrivals (--rate), no queue of more requests than slots, no slot refilled when a request ends,
#   no per-request TTFT/inter-token percentiles. bench-serving's aggregate tokens/s is over all
#   its requests (several waves when --requests exceeds B); compare "gen tok/s incl. prefill" with
#   a bench-serving run of B requests of PROMPT random tokens arriving at once (one wave), and
#   S_TG with its decode phase.
# - Speculation: llama-batched-bench decodes plainly; it is the baseline for bench-serving's plain
#   mode and the bar for its speculative modes, not a like-for-like speculative figure.
# - Sampling and detokenization: none (random ids in, logits out); EOS never ends a sequence.
# - Attention context: the decode steps attend to PROMPT..PROMPT+GEN cached tokens per sequence,
#   as in bench-serving with the same --prompt-len and --gen.
# - Kernels: llama.cpp runs the file's quantized blocks as stored (and may repack them at load);
#   selfspec packs and tiles them its own way. Engines are compared, not kernels.
#
# How to read the table: one row per B (medians over rounds). "S_TG gen tok/s (aggregate)" is the
# batch's generated tokens/s; "per sequence" is what each of the B streams sees; "S_TG /
# S_TG(B=1)" is the batching gain (near B while decoding stays memory-bound on the weights, less
# once the batch's compute or its attention over the KV cache dominates). With 1 or 2 rounds the
# medians are rough: look at the samples and the load averages in batched_bench.json before
# trusting a difference of a few percent. The header warns when the 1-minute load average passed
# the CPU count during the runs (the run's own threads count toward it, so only other work pushes
# it past): then distrust the figures, the multi-threaded ones first.
#
# Output, in OUT_DIR (created if need be; earlier files there are overwritten):
#   batched_bench.json  every run (round, B, prompt and generated tokens per sequence, N_KV,
#                       prefill time and tokens/s, generation time, S_TG, per sequence, incl.
#                       prefill, total time and tokens/s, loadavg before/after, wall time, start
#                       time and llama-batched-bench's raw row), per B the median, min and max over
#                       the rounds, the settings, the llama.cpp commit, the model file's name,
#                       path and size, the CPU (lscpu), nproc, the threads, the command and date
#   batched_bench.md    the table, with the same description in its header
#   runs/               each run's raw output (rROUND-bB.jsonl: llama-batched-bench's stdout) and
#                       log (rROUND-bB.log: its stderr), runs.jsonl (the parsed runs) and meta.json
# The markdown is also printed on stdout at the end; progress goes to stderr. Needs python3 (stdlib
# only; the parsing is llama_cpp_batched_bench.py beside this script). Non-interactive: stdin is
# never read (every run gets /dev/null). A missing GGUF, a failed build, a failing run or output
# that cannot be parsed (e.g. no row for the B asked) stops the script with a non-zero exit
# status and a message naming the run and its files.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Shared with llama_cpp_baseline.sh: ensure_built (the pinned llama.cpp build, plus
# llama-batched-bench), llamacpp_dir, loadavg. Its log and die are replaced below, after sourcing,
# so that its messages carry this script's name.
# shellcheck source=scripts/dev/llama_cpp_baseline.sh
source "$script_dir/llama_cpp_baseline.sh"

log() { echo "llama_cpp_batched_bench: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

usage() {
  cat >&2 <<EOF
usage: $0 GGUF OUT_DIR [--threads 2] [--concurrency 1,2,4,8,16] [--prompt 128] [--gen 64]
         [--rounds 2]
  --threads      threads for llama.cpp (decode and prefill; default 2)
  --concurrency  comma-separated batch sizes B: sequences decoded together (default 1,2,4,8,16)
  --prompt       prompt tokens per sequence, not shared between sequences (default 128)
  --gen          tokens generated per sequence (default 64)
  --rounds       rounds; each gives one sample per B (default 2)
llama.cpp is built into \$SELFSPEC_LLAMACPP_DIR (default ~/.cache/selfspec/llama.cpp) on first
use, with \$SELFSPEC_LLAMACPP_JOBS (default 2) jobs.
EOF
  exit 2
}

kPython="$script_dir/llama_cpp_batched_bench.py"
# llama.cpp rounds each sequence's context up to a multiple of this (llama-context.cpp).
readonly kCtxPad=256

# Settings and paths that main sets and run_one reads.
gguf="" out_dir="" threads=2 prompt=128 gen=64 batched_bench="" runs_jsonl=""

# Runs llama-batched-bench once with B sequences; appends its parsed record to $runs_jsonl.
# Arguments: round, B.
run_one() {
  local round="$1" b="$2"
  local base="$out_dir/runs/r${round}-b${b}"
  local raw="$base.jsonl" logfile="$base.log"
  local per_seq ctx before after started start_ns end_ns status=0
  per_seq=$(((prompt + gen + kCtxPad - 1) / kCtxPad * kCtxPad))
  ctx=$((b * per_seq))
  local -a cmd=("$batched_bench" -m "$gguf" -t "$threads" -npp "$prompt" -ntg "$gen" -npl "$b"
    -c "$ctx" --output-format jsonl)
  printf '%q ' "${cmd[@]}" >"$logfile"
  printf '\n' >>"$logfile"
  started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  before="$(loadavg)"
  start_ns="$(date +%s%N)"
  # The rows go to stdout, llama.cpp's log to stderr.
  "${cmd[@]}" </dev/null >"$raw" 2>>"$logfile" || status=$?
  end_ns="$(date +%s%N)"
  after="$(loadavg)"
  [ "$status" = 0 ] ||
    die "llama-batched-bench failed (round $round, B=$b), exit $status; see $logfile"
  local wall line
  wall="$(awk -v a="$start_ns" -v b="$end_ns" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')"
  line="$(python3 "$kPython" record "$raw" "$round" "$b" "$threads" "$prompt" "$gen" \
    "$before" "$after" "$started" "$wall")" ||
    die "cannot parse llama-batched-bench's output (round $round, B=$b): $raw; see $logfile"
  printf '%s\n' "$line" >>"$runs_jsonl"
  log "$(python3 "$kPython" summary "$line")"
}

positive_int() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }

main() {
  local -a positional=()
  local concurrency_list="1,2,4,8,16" rounds=2
  local command_line
  command_line="$(printf '%q ' "$0" "$@")"
  command_line="${command_line% }"
  while [ $# -gt 0 ]; do
    case "$1" in
      -h | --help) usage ;;
      --threads | --concurrency | --prompt | --gen | --rounds)
        [ $# -ge 2 ] || die "$1 needs a value"
        case "$1" in
          --threads) threads="$2" ;;
          --concurrency) concurrency_list="$2" ;;
          --prompt) prompt="$2" ;;
          --gen) gen="$2" ;;
          --rounds) rounds="$2" ;;
        esac
        shift 2
        ;;
      --*) die "unknown option $1 (see --help)" ;;
      *)
        positional+=("$1")
        shift
        ;;
    esac
  done
  [ "${#positional[@]}" -eq 2 ] || usage
  gguf="${positional[0]}"
  out_dir="${positional[1]}"

  [ -f "$gguf" ] || die "GGUF $gguf: no such file"
  gguf="$(cd "$(dirname "$gguf")" && pwd)/$(basename "$gguf")"
  positive_int --threads "$threads"
  positive_int --rounds "$rounds"
  positive_int --prompt "$prompt"
  positive_int --gen "$gen"
  local -a concurrency=()
  local b
  IFS=',' read -r -a concurrency <<<"$concurrency_list"
  [ "${#concurrency[@]}" -gt 0 ] || die "--concurrency is empty"
  for b in "${concurrency[@]}"; do positive_int "--concurrency entry" "$b"; done
  [ "$(printf '%s\n' "${concurrency[@]}" | sort -u | wc -l)" -eq "${#concurrency[@]}" ] ||
    die "--concurrency $concurrency_list repeats a value"
  command -v python3 >/dev/null || die "python3 not found"

  local dir
  dir="$(llamacpp_dir)"
  # ensure_built dies (with the step that failed) if the build fails.
  ensure_built "$dir" llama-batched-bench
  batched_bench="$dir/build/bin/llama-batched-bench"
  [ -x "$batched_bench" ] || die "$batched_bench not found after building llama.cpp"

  mkdir -p "$out_dir/runs" || die "cannot create $out_dir/runs"
  out_dir="$(cd "$out_dir" && pwd)"
  runs_jsonl="$out_dir/runs/runs.jsonl"
  : >"$runs_jsonl"

  # Everything the report says about the setup, gathered once.
  local cpu date meta
  cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)" || cpu=""
  cpu="${cpu:-unknown}"
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  meta="$out_dir/runs/meta.json"
  python3 "$kPython" meta "$meta" "$dir/build/selfspec-build.json" "$gguf" "$threads" \
    "$(IFS=','; echo "${concurrency[*]}")" "$rounds" "$prompt" "$gen" "$batched_bench" "$cpu" \
    "$command_line" "$date" || die "writing $meta failed"

  log "$gguf: B in ${concurrency_list} x $rounds round(s), $threads thread(s), prompt $prompt," \
    "gen $gen per sequence; load $(loadavg)"
  local round i
  for ((round = 1; round <= rounds; round++)); do
    if ((round % 2 == 1)); then
      for ((i = 0; i < ${#concurrency[@]}; i++)); do run_one "$round" "${concurrency[i]}"; done
    else
      for ((i = ${#concurrency[@]} - 1; i >= 0; i--)); do run_one "$round" "${concurrency[i]}"; done
    fi
  done

  python3 "$kPython" report "$runs_jsonl" "$out_dir" "$meta" ||
    die "writing the report in $out_dir failed"
  log "wrote $out_dir/batched_bench.json and $out_dir/batched_bench.md"
  cat "$out_dir/batched_bench.md"
}

main "$@"
