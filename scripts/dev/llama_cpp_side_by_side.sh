#!/usr/bin/env bash
# llama.cpp and selfspec on the same GGUF file, side by side: prefill and decode tokens/s at each
# thread count, measured interleaved, in one table.
#
#   scripts/dev/llama_cpp_side_by_side.sh GGUF OUT_DIR [--threads 1,2] [--rounds 3] [--prompt 64]
#       [--gen 128] [--selfspec PATH] [--label NAME]
#
# What it measures: ROUNDS rounds; in each round, for each thread count T of --threads, one run of
#   llama-bench -m GGUF -p PROMPT -n GEN -t T -r 1 -o json
#   selfspec bench --model GGUF --prompt-len PROMPT --gen GEN --reps 1 --threads T
#       --verify-cost-rounds 0 --out RUN.json
# llama.cpp's prefill figure is its pp (PROMPT-token prompt) entry's avg_ts and its decode figure
# its tg (GEN tokens one at a time) entry's avg_ts; selfspec's are its report's
# prefill_tokens_per_s and decode_tokens_per_s. Each run is one repetition, so each (engine, T)
# gets ROUNDS samples and the table shows their medians. The engines alternate: llama.cpp goes
# first in odd rounds, selfspec in even ones, so drift, thermal state and other people's load fall
# on both alike instead of on whichever runs second (use an even ROUNDS for an even split).
# /proc/loadavg is recorded before and after every run: a figure is only as good as the machine
# was quiet (with more runnable work than cores, multi-threaded decoding collapses, since every
# thread waits at each op's barrier for the slowest, preempted one). llama.cpp is the pinned build
# of scripts/dev/llama_cpp_baseline.sh (sourced here; it builds llama.cpp on first use, ~25
# minutes); selfspec is build/bin/selfspec of this checkout unless --selfspec names another.
#
# What it does NOT measure, or not equally:
# - Both engines run the file's quantized blocks as stored (selfspec's --weights-dtype auto keeps a
#   GGUF's quantized tensors on the CPU backend); the table's header lines give selfspec's weight
#   formats and bytes so that this can be checked. It is not a kernel-for-kernel comparison: the
#   two pack and tile the blocks differently, and llama.cpp may repack them at load.
# - Decode context: llama-bench's tg test decodes from an empty context (depth 0), selfspec's
#   decode follows its PROMPT-token prompt, so its attention reads PROMPT more cached tokens per
#   step (small next to the weights for short prompts; bench's bytes_per_decode_token counts it).
#   selfspec times GEN - 1 decode steps (the first token comes from the prefill), llama-bench GEN.
# - Both warm up before the timed repetition (llama-bench one unmeasured run of each test, selfspec
#   a few decoded tokens); neither run's load time is in the figures.
# - Token ids are random in both; the cost of a forward does not depend on them.
# - selfspec measures the machine's streaming read bandwidth at the start of each run, with T
#   threads; "selfspec decode / stream bandwidth" is its decode_fraction_of_measured_read_bandwidth
#   (bytes read per decoded token x tokens/s, over that bandwidth): how close decoding comes to the
#   memory-bound limit at that thread count, not against the machine's peak with all cores.
#
# How to read the table: one row per thread count; "ratio" is selfspec / llama.cpp of the medians
# (above 1: selfspec is faster). With 2 or 3 rounds the medians are rough: look at the per-run
# samples and the load averages in side_by_side.json before trusting a difference of a few percent.
# The header warns when the 1-minute load average passed the CPU count during the runs (the runs'
# own threads count toward it, so only other work pushes it past): then distrust the T > 1 rows.
#
# Output, in OUT_DIR (created if need be; earlier files there are overwritten):
#   side_by_side.json  every run (engine, round, T, position in the round, loadavg before/after,
#                      wall time, the parsed figures and the engine's whole JSON report), the
#                      medians, min and max per (engine, T), the ratios, and the model, build and
#                      machine description
#   side_by_side.md    the table, with the model file and size, the llama.cpp commit, selfspec's
#                      ISA and weight formats, the CPU, the command line and the date
#   runs/              each run's raw JSON and its stdout/stderr log
# The markdown is also printed on stdout at the end; progress goes to stderr. Needs python3 (stdlib
# only). Non-interactive: stdin is never read (every run gets /dev/null), so CI=true and a closed
# stdin are fine. A missing GGUF or binary, a failing run or output that cannot be parsed stops the
# script with a non-zero exit status and a message naming the run and its log.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/../.." && pwd)"
# Shared with llama_cpp_baseline.sh: ensure_built (the pinned llama.cpp build), llamacpp_dir,
# loadavg. Its log and die are replaced below, after sourcing, so its messages carry this name.
# shellcheck source=scripts/dev/llama_cpp_baseline.sh
source "$script_dir/llama_cpp_baseline.sh"

log() { echo "llama_cpp_side_by_side: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

usage() {
  cat >&2 <<EOF
usage: $0 GGUF OUT_DIR [--threads 1,2] [--rounds 3] [--prompt 64] [--gen 128]
         [--selfspec PATH] [--label NAME]
  --threads   comma-separated thread counts (default 1,2)
  --rounds    interleaved rounds; each gives one sample per engine and thread count (default 3)
  --prompt    prompt tokens for the prefill figure (default 64)
  --gen       tokens decoded for the decode figure (default 128)
  --selfspec  the selfspec binary (default: build/bin/selfspec of this checkout)
  --label     a name for this comparison, in the table's title and the JSON
llama.cpp is built into \$SELFSPEC_LLAMACPP_DIR (default ~/.cache/selfspec/llama.cpp) on first use.
EOF
  exit 2
}

# The JSON work: llama_cpp_side_by_side.py beside this script (stdlib-only), with four commands:
#   record ENGINE RAW_JSON ROUND THREADS POSITION LOAD_BEFORE LOAD_AFTER STARTED WALL_S PROMPT GEN
#       checks and parses one run's JSON and prints one JSON line describing the run (exit 1 with
#       a message if the output is not what was expected)
#   meta META_JSON BUILD_JSON LABEL GGUF THREADS ... DATE   writes the run description
#   report RUNS_JSONL OUT_DIR META_JSON   writes side_by_side.json and side_by_side.md
#   summary RUN_JSON_LINE                  one line of progress for the log
kPython="$script_dir/llama_cpp_side_by_side.py"

# Runs one engine once; appends its parsed record to $runs_jsonl. Arguments: engine, round,
# threads, position in the round (1 or 2).
run_one() {
  local engine="$1" round="$2" threads="$3" position="$4"
  local base="$out_dir/runs/r${round}-t${threads}-${engine}"
  local raw="$base.json" logfile="$base.log"
  local before after started start_ns end_ns
  local -a cmd
  if [ "$engine" = llama.cpp ]; then
    cmd=("$llama_bench" -m "$gguf" -p "$prompt" -n "$gen" -t "$threads" -r 1 -o json)
  else
    cmd=("$selfspec" bench --model "$gguf" --prompt-len "$prompt" --gen "$gen" --reps 1
      --threads "$threads" --verify-cost-rounds 0 --out "$raw")
  fi
  rm -f "$raw"
  started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  before="$(loadavg)"
  start_ns="$(date +%s%N)"
  if [ "$engine" = llama.cpp ]; then
    # llama-bench writes its JSON on stdout and its logs on stderr.
    "${cmd[@]}" </dev/null >"$raw" 2>"$logfile" ||
      die "llama-bench failed (round $round, $threads thread(s)), exit $?; see $logfile"
  else
    "${cmd[@]}" </dev/null >"$logfile" 2>&1 ||
      die "selfspec bench failed (round $round, $threads thread(s)), exit $?; see $logfile"
  fi
  end_ns="$(date +%s%N)"
  after="$(loadavg)"
  [ -s "$raw" ] || die "$engine (round $round, $threads thread(s)) wrote no JSON to $raw; see $logfile"
  local wall line
  wall="$(awk -v a="$start_ns" -v b="$end_ns" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')"
  line="$(python3 "$kPython" record "$engine" "$raw" "$round" "$threads" "$position" \
    "$before" "$after" "$started" "$wall" "$prompt" "$gen")" ||
    die "cannot parse $engine's output (round $round, $threads thread(s)): $raw; see $logfile"
  printf '%s\n' "$line" >>"$runs_jsonl"
  log "$(python3 "$kPython" summary "$line")"
}

# Settings and paths that main sets and run_one reads.
gguf="" out_dir="" prompt=64 gen=128 selfspec="" llama_bench="" runs_jsonl=""

positive_int() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }

main() {
  local -a positional=()
  local threads_list="1,2" rounds=3 label=""
  selfspec="$repo_root/build/bin/selfspec"
  local command_line
  command_line="$(printf '%q ' "$0" "$@")"
  command_line="${command_line% }"
  while [ $# -gt 0 ]; do
    case "$1" in
      -h | --help) usage ;;
      --threads | --rounds | --prompt | --gen | --selfspec | --label)
        [ $# -ge 2 ] || die "$1 needs a value"
        case "$1" in
          --threads) threads_list="$2" ;;
          --rounds) rounds="$2" ;;
          --prompt) prompt="$2" ;;
          --gen) gen="$2" ;;
          --selfspec) selfspec="$2" ;;
          --label) label="$2" ;;
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
  positive_int --rounds "$rounds"
  positive_int --prompt "$prompt"
  positive_int --gen "$gen"
  local -a threads=()
  local t
  IFS=',' read -r -a threads <<<"$threads_list"
  [ "${#threads[@]}" -gt 0 ] || die "--threads is empty"
  for t in "${threads[@]}"; do positive_int "--threads entry" "$t"; done
  [ -x "$selfspec" ] || die "selfspec binary $selfspec not found or not executable (build it, or pass --selfspec)"
  command -v python3 >/dev/null || die "python3 not found"

  local dir
  dir="$(llamacpp_dir)"
  ensure_built "$dir"
  llama_bench="$dir/build/bin/llama-bench"
  [ -x "$llama_bench" ] || die "$llama_bench not found after building llama.cpp"

  mkdir -p "$out_dir/runs" || die "cannot create $out_dir/runs"
  out_dir="$(cd "$out_dir" && pwd)"
  runs_jsonl="$out_dir/runs/runs.jsonl"
  : >"$runs_jsonl"

  # Everything the report says about the setup, gathered once.
  local cpu selfspec_version selfspec_git date meta
  cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)"
  cpu="${cpu:-unknown}"
  selfspec_version="$("$selfspec" --version </dev/null 2>/dev/null | head -n 1)" ||
    selfspec_version="unknown"
  # GIT_OPTIONAL_LOCKS=0: describe --dirty must not take the index lock from someone committing.
  selfspec_git="$(GIT_OPTIONAL_LOCKS=0 git -C "$repo_root" describe --always --dirty 2>/dev/null)" ||
    selfspec_git="no git"
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  meta="$out_dir/runs/meta.json"
  python3 "$kPython" meta "$meta" "$dir/build/selfspec-build.json" "$label" "$gguf" \
    "$(IFS=','; echo "${threads[*]}")" "$rounds" "$prompt" "$gen" "$selfspec" "$selfspec_version" \
    "$selfspec_git" "$llama_bench" "$cpu" "$command_line" "$date" || die "writing $meta failed"

  log "$gguf: ${#threads[@]} thread count(s) (${threads_list}) x $rounds round(s) x 2 engines," \
    "prompt $prompt, gen $gen; load $(loadavg)"
  local round first second
  for ((round = 1; round <= rounds; round++)); do
    if ((round % 2 == 1)); then first=llama.cpp second=selfspec; else first=selfspec second=llama.cpp; fi
    for t in "${threads[@]}"; do
      run_one "$first" "$round" "$t" 1
      run_one "$second" "$round" "$t" 2
    done
  done

  python3 "$kPython" report "$runs_jsonl" "$out_dir" "$meta" ||
    die "writing the report in $out_dir failed"
  log "wrote $out_dir/side_by_side.json and $out_dir/side_by_side.md"
  cat "$out_dir/side_by_side.md"
}

main "$@"
