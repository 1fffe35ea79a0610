#!/usr/bin/env bash
# Installs the `openai` Python client from PyPI (pinned, with its dependencies) into a folder of
# its own for the server tests (tests/integration/serve), and prints that folder: put it on
# PYTHONPATH. Nothing is installed into the system's Python. Idempotent: a folder whose client
# imports at the pinned version is used as it is.
#   usage: scripts/get-openai-client.sh [DIR]
#   DIR defaults to $SELFSPEC_PYTHON_CACHE/openai-VERSION, else ~/.cache/selfspec/python/...
set -euo pipefail

readonly kOpenAiVersion="1.55.3"
# httpx 0.28 removed what openai < 1.55.3 passed it; pinned so that the pair stays a known one.
readonly kHttpxVersion="0.28.1"

log() { echo "get-openai-client: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

python="${PYTHON:-python3}"
command -v "$python" >/dev/null || die "$python not found (set PYTHON, or apt-get install python3)"
"$python" -m pip --version >/dev/null 2>&1 ||
  die "$python has no pip (apt-get install python3-pip, or set PYTHON to one that has)"

cache="${SELFSPEC_PYTHON_CACHE:-$HOME/.cache/selfspec/python}"
dir="${1:-$cache/openai-$kOpenAiVersion}"
imports() {
  PYTHONPATH="$dir" "$python" -c "import openai, sys; sys.exit(openai.__version__ != '$kOpenAiVersion')" \
    2>/dev/null
}
if ! imports; then
  log "installing openai==$kOpenAiVersion into $dir"
  rm -rf "$dir.partial"
  PIP_NO_INPUT=1 "$python" -m pip install --no-input --disable-pip-version-check --root-user-action=ignore \
    --progress-bar off --quiet --target "$dir.partial" "openai==$kOpenAiVersion" \
    "httpx==$kHttpxVersion" >&2 || die "pip could not install openai==$kOpenAiVersion"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  imports || die "openai==$kOpenAiVersion does not import from $dir"
fi
echo "$dir"
