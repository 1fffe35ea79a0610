#!/usr/bin/env bash
# llama.cpp's plain-decoding speed on a GGUF file: the baseline that selfspec's plain
# (autoregressive) tokens/s is reported against (issue 9).
#
#   scripts/dev/llama_cpp_baseline.sh GGUF [THREADS] [OUT.json]
#
# What it measures: `llama-bench -m GGUF -p 0 -n 64 -t THREADS -r 3 -o json`, i.e. llama.cpp's
# token-generation ("tg64") rate on the CPU: 64 tokens decoded one at a time from an empty context,
# 3 repetitions, mean and standard deviation of tokens/s. THREADS defaults to nproc.
#
# What it does NOT measure: equal work. llama.cpp decodes straight from the file's quantized
# blocks (Q4_1, Q4_K, ... : about 4.5-5 bits a weight, dot products on the packed blocks), whereas
# selfspec dequantizes every tensor at load into --weights-dtype (bf16 by default, or f32) and then
# streams about 3x (bf16) to 6.5x (f32) more bytes of weights per token. Decoding is memory-bound,
# so the two figures compare engines (each at its own natural setting), not kernels on the same
# data. llama.cpp has no option to expand a quantized file at load, so no like-for-like bf16/f32
# figure is recorded.
#
# Where llama.cpp comes from: only PyPI and Debian are reachable, so it is built from the sdist of
# llama-cpp-python (pinned below, sha256-checked), which vendors llama.cpp under vendor/llama.cpp.
# The sdist's CHANGELOG names the vendored llama.cpp commit; it is passed to CMake as the build
# commit, so the record does not hang on whatever git metadata an sdist carries (0.3.36 carries a
# one-commit shallow clone: the commit agrees, but llama.cpp's build number would read 1, so it is
# not recorded). Built once: CPU only, native ISA, no network features, only the targets
# llama-bench, llama-simple and llama-tokenize, into $SELFSPEC_LLAMACPP_DIR (default
# ~/.cache/selfspec/llama.cpp); a build that is already there is reused. Other tools of the same
# build are added on demand, into the same build tree (`ensure_built DIR TARGET...`, e.g.
# llama-batched-bench for scripts/dev/llama_cpp_batched_bench.sh): only their own sources are
# compiled, the libraries already built are reused. The build runs under
# `nice -n 10` with $SELFSPEC_LLAMACPP_JOBS (default 2) jobs and takes about 25 minutes on a busy
# 2-core machine. Needs python3 with pip, cmake, g++ (Debian: apt-get install cmake g++
# python3-pip).
#
# Output: the one-line summary on stdout; with OUT.json also a JSON record: tokens/s (mean, stddev,
# per repetition), llama.cpp's build (llama-cpp-python version, commit, backend), the model as
# llama-bench describes it (type, size, parameters), the GGUF's path and size, the CPU, nproc,
# THREADS and /proc/loadavg before and after the run (the figure is only as good as the machine was
# quiet: with more runnable work than cores, multi-threaded decoding collapses because every
# thread waits at each op's barrier for the slowest, preempted one). Progress and llama.cpp's own
# logs go to stderr.
#
# Sourcing this file (`source scripts/dev/llama_cpp_baseline.sh`) defines its functions and runs
# nothing: scripts/dev/llama_cpp_side_by_side.sh and scripts/dev/llama_cpp_batched_bench.sh use
# ensure_built, llamacpp_dir and loadavg so that they share one pinned build. log and die may be
# redefined after sourcing; ensure_built calls them.
#
# The same build serves the greedy sanity check (no chat template, greedy sampler):
#   $SELFSPEC_LLAMACPP_DIR/build/bin/llama-simple -m GGUF -n 24 "The capital of France is"
#   $SELFSPEC_LLAMACPP_DIR/build/bin/llama-tokenize -m GGUF -p "The capital of France is" --ids
set -euo pipefail

readonly kPackage="llama-cpp-python"
readonly kVersion="0.3.36"
readonly kSdistSha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
readonly kTargets=(llama-bench llama-simple llama-tokenize)
readonly kGenTokens=64
readonly kRepetitions=3
# The JSON work (the record and its summary line) is done by llama_cpp_baseline.py beside this
# file (BASH_SOURCE: this file also when sourced).
kBaselinePy="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/llama_cpp_baseline.py"
readonly kBaselinePy

usage() {
  echo "usage: $0 GGUF [THREADS] [OUT.json]" >&2
  echo "  THREADS defaults to nproc; llama.cpp is built into \$SELFSPEC_LLAMACPP_DIR" >&2
  echo "  (default ~/.cache/selfspec/llama.cpp) on first use" >&2
  exit 2
}

log() { echo "llama_cpp_baseline: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# Scratch files, removed on exit whatever happens (main installs the trap, so sourcing does not).
scratch=""
cleanup() { if [ -n "$scratch" ]; then rm -rf "$scratch"; fi; }

# Where the pinned llama.cpp build lives.
llamacpp_dir() { echo "${SELFSPEC_LLAMACPP_DIR:-$HOME/.cache/selfspec/llama.cpp}"; }

require_tools() {
  local tool
  for tool in python3 cmake g++ sha256sum tar; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install cmake g++ python3-pip)"
  done
  python3 -m pip --version >/dev/null 2>&1 || die "python3 has no pip (apt-get install python3-pip)"
}

# Downloads and unpacks the sdist into $1/src; prints the llama.cpp source folder.
fetch_sources() {
  local dir="$1"
  local src="$dir/src/llama_cpp_python-$kVersion"
  if [ -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
    echo "$src/vendor/llama.cpp"
    return
  fi
  mkdir -p "$dir/src"
  local sdist="$dir/src/llama_cpp_python-$kVersion.tar.gz"
  if [ ! -f "$sdist" ]; then
    log "downloading the $kPackage==$kVersion sdist with pip (no dependencies, nothing installed)"
    PIP_NO_INPUT=1 python3 -m pip download --no-deps --no-binary=:all: --no-input \
      --disable-pip-version-check --progress-bar off --quiet -d "$dir/src" \
      "$kPackage==$kVersion" </dev/null >&2 || die "pip download $kPackage==$kVersion failed"
  fi
  local digest
  digest="$(sha256sum "$sdist" | cut -d' ' -f1)"
  [ "$digest" = "$kSdistSha256" ] || die "$sdist has sha256 $digest, expected $kSdistSha256"
  tar -xzf "$sdist" -C "$dir/src" || die "unpacking $sdist failed"
  [ -f "$src/vendor/llama.cpp/CMakeLists.txt" ] || die "$sdist has no vendor/llama.cpp"
  echo "$src/vendor/llama.cpp"
}

# The llama.cpp commit that the sdist's CHANGELOG names for this release ("unknown" if none).
vendored_commit() {
  local changelog="$1/../../CHANGELOG.md"
  local commit
  commit="$(awk -v version="## [$kVersion]" '
    index($0, version) == 1 { inside = 1; next }
    inside && /^## \[/ { exit }
    inside && match($0, /llama\.cpp@[0-9a-f]+/) {
      print substr($0, RSTART + 10, RLENGTH - 10)
      exit
    }
  ' "$changelog" 2>/dev/null || true)"
  echo "${commit:-unknown}"
}

# Configures (or reconfigures: an existing tree keeps what it built) $1/build from the sources $2
# (the server too, so that llama-server can be built on demand: only targets asked for are built),
# recording llama.cpp commit $3.
configure_llamacpp() {
  local dir="$1" src="$2" commit="$3"
  nice -n 10 cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_COMMIT="$commit" >&2 ||
    die "configuring llama.cpp in $dir/build failed"
}

# Builds the targets $2... in the configured tree $1/build.
build_targets() {
  local dir="$1"
  shift
  nice -n 10 cmake --build "$dir/build" -j "${SELFSPEC_LLAMACPP_JOBS:-2}" --target "$@" >&2 ||
    die "building $* in $dir/build failed"
}

# Configures and builds the CPU tools into $1/build unless they are all there already. Further
# arguments name more targets of the same build (e.g. llama-batched-bench) to have there too: with
# the standard tools already built, only those are built, in the existing tree (reconfigured with
# the same settings first if it does not know them, e.g. one configured without the tools).
ensure_built() {
  local dir="$1"
  shift
  local -a extra=("$@")
  local bin="$dir/build/bin" target missing=0
  local -a extra_missing=()
  for target in "${kTargets[@]}"; do [ -x "$bin/$target" ] || missing=1; done
  for target in "${extra[@]}"; do [ -x "$bin/$target" ] || extra_missing+=("$target"); done
  if [ "$missing" = 0 ] && [ -f "$dir/build/selfspec-build.json" ]; then
    [ "${#extra_missing[@]}" -gt 0 ] || return 0
    require_tools
    local src commit
    src="$(fetch_sources "$dir")"
    commit="$(vendored_commit "$src")"
    # `--target help` lists the targets of a Makefile ("... NAME") or Ninja ("NAME: phony") tree.
    local known=1 targets_help
    targets_help="$(cmake --build "$dir/build" --target help 2>/dev/null)" || targets_help=""
    for target in "${extra_missing[@]}"; do
      grep -Eq -- "(^|[ ])$target(:.*)?\$" <<<"$targets_help" || known=0
    done
    if [ "$known" = 0 ]; then
      log "reconfiguring $dir/build so that it has ${extra_missing[*]}"
      configure_llamacpp "$dir" "$src" "$commit"
    fi
    log "building ${extra_missing[*]} in $dir/build (llama.cpp $commit); the libraries are reused"
    build_targets "$dir" "${extra_missing[@]}"
    for target in "${extra_missing[@]}"; do
      [ -x "$bin/$target" ] || die "$bin/$target missing after building it"
    done
    return 0
  fi
  require_tools
  local src commit
  src="$(fetch_sources "$dir")"
  commit="$(vendored_commit "$src")"
  log "building llama.cpp $commit ($kPackage $kVersion) into $dir/build; this takes a while"
  configure_llamacpp "$dir" "$src" "$commit"
  build_targets "$dir" "${kTargets[@]}" "${extra[@]}"
  printf '{"package": "%s", "version": "%s", "llama_cpp_commit": "%s"}\n' \
    "$kPackage" "$kVersion" "$commit" >"$dir/build/selfspec-build.json"
}

# Runs llama-bench on $1 with $2 threads; its JSON goes to $3.
run_bench() {
  local bin="$1" gguf="$2" threads="$3" out="$4"
  log "llama-bench -m $gguf -p 0 -n $kGenTokens -t $threads -r $kRepetitions"
  "$bin/llama-bench" -m "$gguf" -p 0 -n "$kGenTokens" -t "$threads" -r "$kRepetitions" \
    -o json >"$out" || die "llama-bench failed on $gguf"
}

# Merges llama-bench's JSON, the build record and the machine's state into one record on stdout.
make_record() { python3 "$kBaselinePy" record "$@"; }

summary_line() { python3 "$kBaselinePy" summary "$1"; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

main() {
  if [ $# -lt 1 ] || [ $# -gt 3 ]; then usage; fi
  local gguf="$1" threads="${2:-$(nproc)}" out="${3:-}"
  [ -f "$gguf" ] || die "$gguf: no such file"
  [[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer, got '$threads'"
  trap cleanup EXIT
  local dir
  dir="$(llamacpp_dir)"
  ensure_built "$dir"
  scratch="$(mktemp -d)"
  local before after
  before="$(loadavg)"
  run_bench "$dir/build/bin" "$gguf" "$threads" "$scratch/bench.json"
  after="$(loadavg)"
  make_record "$scratch/bench.json" "$dir/build/selfspec-build.json" "$gguf" "$threads" \
    "$before" "$after" >"$scratch/record.json" || die "reading llama-bench's output failed"
  if [ -n "$out" ]; then
    cp "$scratch/record.json" "$out"
    log "wrote $out"
  fi
  summary_line "$scratch/record.json"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then main "$@"; fi
