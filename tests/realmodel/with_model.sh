#!/usr/bin/env bash
# Runs a command with a real model's GGUF at hand: fetches it into the model cache with
# scripts/get-model.sh (idempotent: a cached file with the right sha256 is used as it is), exports
# SELFSPEC_REALMODEL_NAME and SELFSPEC_REALMODEL_GGUF, and runs the rest of the command line.
# Usage: with_model.sh MODEL-NAME COMMAND [ARGS...]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 MODEL-NAME COMMAND [ARGS...]" >&2; exit 2; }
name=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
path=$("$here/../../scripts/get-model.sh" "$name" | tail -n 1)
[[ -f $path ]] || { echo "with_model.sh: get-model.sh printed no file for $name" >&2; exit 1; }
export SELFSPEC_REALMODEL_NAME=$name SELFSPEC_REALMODEL_GGUF=$path
exec "$@"
