#!/usr/bin/env bash
# Issue 35's load runs: `selfspec serve` beside llama.cpp's `llama-server` (built from the pinned
# llama.cpp sdist by scripts/dev/llama_cpp_baseline.sh), the same GGUF (Qwen2.5-Coder-1.5B
# Q4_K_M), 2 threads, the same HumanEval problems, both driven over HTTP by
# scripts/dev/serve_load.py (streaming /v1/completions, 64 greedy tokens, ignore_eos), one server
# at a time on 127.0.0.1:
#  * tune-*: llama-server's speculation chosen on the 16 HumanEval *calibration* problems at
#    concurrency 1: none, draft-simple with Qwen2.5-Coder-0.5B Q4_K_M drafting 3 and 6 tokens,
#    and the draftless n-gram modes (ngram-simple, ngram-mod, ngram-cache); and selfspec's
#    drafts fixed or goodput-sized at concurrency 4. The best of each goes on.
#  * load-R-C-SERVER: the 16 *evaluation* problems at concurrency C = 1, 4, 16 (closed loop:
#    C clients, 16 / 32 / 48 requests), R = 1, 2 rounds; in each round and concurrency selfspec's
#    best, llama-server's best and llama-server without speculation run back to back.
#  * overload-SERVER: 10 minutes of Poisson arrivals at twice the rate the server sustained at
#    concurrency 16 (its own load-*-16 figure), 16 slots, the server's resident memory sampled
#    every second.
#  * identity: every selfspec response of the load runs against `selfspec generate` of the same
#    prompt alone (same configuration, 64 tokens, ignore_eos): identity.json.
#   docs/results/2026-11-29-serving/run.sh [tune | load | overload | identity]  (default: all)
# Writes NAME.json next to this script (gzipped where it keeps every request's text and times);
# tables.py makes the page's tables from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
S=$(cd "${SELFSPEC_BUILD_DIR:-build}" && pwd)/bin/selfspec
L=${SELFSPEC_LLAMACPP_DIR:-$HOME/.cache/selfspec/llama.cpp}/build/bin/llama-server
H=$(scripts/get-prompts.sh humaneval | tail -n 1)
Q=$(scripts/get-model.sh qwen2.5-coder-1.5b-instruct | tail -n 1)
Z=$(scripts/get-model.sh qwen2.5-coder-0.5b-instruct | tail -n 1)
[ -x "$L" ] || bash -c "source scripts/dev/llama_cpp_baseline.sh; ensure_built \"\$(llamacpp_dir)\" llama-server" >&2
# A port per run (a stopped server's port can stay taken for a moment).
PORT=${SERVE_STUDY_PORT:-18190}
GEN=64
CTX=1024  # per slot: the longest HumanEval prompt and 64 tokens fit

# The servers, by name: the command after the port and slot count.
server_command() {
  local name=$1 slots=$2
  case "$name" in
    selfspec-fixed | selfspec-goodput)
      local goodput=()
      [ "$name" = selfspec-goodput ] && goodput=(--goodput)
      echo "$S" serve --config configs/runs/best-qwen2.5-coder-1.5b.yaml --model-name qwen \
        --threads 2 --port "$PORT" --parallel "$slots" --ctx-size "$CTX" --max-queued 64 \
        "${goodput[@]}" ;;
    llama-*)
      local spec=()
      case "$name" in
        llama-none) ;;
        llama-draft3) spec=(-md "$Z" --spec-type draft-simple --spec-draft-n-max 3 -td 2) ;;
        llama-draft6) spec=(-md "$Z" --spec-type draft-simple --spec-draft-n-max 6 -td 2) ;;
        llama-ngram-simple) spec=(--spec-type ngram-simple) ;;
        llama-ngram-mod) spec=(--spec-type ngram-mod) ;;
        llama-ngram-cache) spec=(--spec-type ngram-cache) ;;
        *) echo "run.sh: no server '$name'" >&2; exit 2 ;;
      esac
      echo "$L" -m "$Q" --alias qwen -t 2 -tb 2 --host 127.0.0.1 --port "$PORT" -np "$slots" \
        -c $((slots * CTX)) --no-webui "${spec[@]}" ;;
    *) echo "run.sh: no server '$name'" >&2; exit 2 ;;
  esac
}

server_pid=
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
trap stop_server EXIT

start_server() {
  local name=$1 slots=$2 log=$3
  # shellcheck disable=SC2046  # the command is words
  $(server_command "$name" "$slots") > "$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do
    if curl -fs --max-time 2 "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; then return 0; fi
    kill -0 "$server_pid" 2>/dev/null || { tail -20 "$log" >&2; echo "run.sh: $name died" >&2; exit 1; }
    sleep 0.5
  done
  echo "run.sh: $name not ready in 150 s" >&2
  exit 1
}

# run NAME SERVER SLOTS SPLIT LOAD-ARGS...: one server, one load run, the JSON as NAME.json.
run() {
  local name=$1 server=$2 slots=$3 split=$4
  shift 4
  echo "run.sh: $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  PORT=$((PORT + 1))
  mkdir -p out/studies/serving
  start_server "$server" "$slots" "out/studies/serving/$name.log"
  python3 scripts/dev/serve_load.py --url "http://127.0.0.1:$PORT" --model qwen \
    --prompts-file "$H" --split "$split" --max-prompts 16 --max-tokens "$GEN" --temperature 0 \
    --ignore-eos --label "$name" --pid "$server_pid" --out "$here/$name.json" "$@" >&2
  stop_server
}

requests_for() { case "$1" in 1) echo 16 ;; 4) echo 32 ;; *) echo 48 ;; esac; }

# The tuned choices (tune-*.json), or the defaults before tuning.
best() {
  python3 - "$here" "$1" <<'EOF'
import glob, json, os, sys
here, who = sys.argv[1], sys.argv[2]
runs = []
for path in glob.glob(os.path.join(here, f"tune-{who}-*.json")):
    with open(path) as f:
        runs.append((json.load(f)["tokens_per_s"], os.path.basename(path)[len("tune-"):-5]))
print(max(runs)[1] if runs else {"llama": "llama-none", "selfspec": "selfspec-goodput"}[who])
EOF
}

tune() {
  for server in llama-none llama-draft3 llama-draft6 llama-ngram-simple llama-ngram-mod \
                llama-ngram-cache; do
    run "tune-$server" "$server" 1 calibration --concurrency 1 --requests 16
  done
  for server in selfspec-fixed selfspec-goodput; do
    run "tune-$server" "$server" 4 calibration --concurrency 4 --requests 32
  done
}

load() {
  local llama selfspec
  llama=$(best llama)
  selfspec=$(best selfspec)
  echo "run.sh: load runs with $selfspec and $llama" >&2
  for round in 1 2; do
    for c in 1 4 16; do
      for server in "$selfspec" "$llama" llama-none; do
        [ "$server" = llama-none ] && [ "$llama" = llama-none ] && continue
        run "load-$round-$c-$server" "$server" "$c" evaluation --concurrency "$c" \
          --requests "$(requests_for "$c")"
      done
    done
  done
}

# Twice the requests per second the server sustained at concurrency 16 (mean of its rounds).
overload_rate() {
  python3 - "$here" "$1" "$GEN" <<'EOF'
import glob, json, os, sys
here, server, gen = sys.argv[1], sys.argv[2], int(sys.argv[3])
rates = []
for path in glob.glob(os.path.join(here, f"load-*-16-{server}.json*")):
    opener = __import__("gzip").open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rates.append(json.load(f)["tokens_per_s"] / gen)
if not rates:
    sys.exit(f"no load-*-16-{server} run: run 'load' first")
print(f"{2 * sum(rates) / len(rates):.3f}")
EOF
}

overload() {
  local server
  for server in "$(best selfspec)" "$(best llama)"; do
    run "overload-$server" "$server" 16 evaluation --rate "$(overload_rate "$server")" \
      --duration 600 --timeout 600
  done
}

identity() {
  python3 - "$here" "$S" "$H" "$GEN" <<'EOF'
import glob, gzip, json, os, subprocess, sys
here, selfspec, prompts_file, gen = sys.argv[1:5]
prompts = {}
with open(prompts_file) as f:
    for line in f:
        record = json.loads(line)
        prompts[record["id"]] = record["prompt"]
alone, runs = {}, []
for path in sorted(glob.glob(os.path.join(here, "load-*-selfspec-*.json*"))):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        load = json.load(f)
    same = 0
    for request in load["per_request"]:
        pid = request["prompt_id"]
        if pid not in alone:
            out = subprocess.run(
                [selfspec, "generate", "--config", "configs/runs/best-qwen2.5-coder-1.5b.yaml",
                 "--prompt", prompts[pid], "--max-new-tokens", gen, "--ignore-eos", "--threads",
                 "2", "--json"], capture_output=True, text=True, check=True)
            alone[pid] = json.loads(out.stdout.strip().splitlines()[-1])["text"]
        same += request["text"] == alone[pid]
    runs.append({"run": load["label"], "requests": len(load["per_request"]), "identical": same})
    print(f"identity: {load['label']}: {same}/{len(load['per_request'])}", file=sys.stderr)
with open(os.path.join(here, "identity.json"), "w") as f:
    json.dump({"prompts_generated_alone": len(alone), "runs": runs}, f, indent=1)
EOF
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(tune load overload identity)
for name in "${names[@]}"; do
  case "$name" in
    tune | load | overload | identity) "$name" ;;
    *) echo "run.sh: no step '$name' (tune, load, overload, identity)" >&2; exit 2 ;;
  esac
done
# Every request's text and chunk times are kept: the load and overload runs are stored gzipped
# (tables.py reads either).
for f in "$here"/load-*.json "$here"/overload-*.json; do [ -f "$f" ] && gzip -9 -f "$f"; done
true
