#!/usr/bin/env bash
# Runs serve_test.py (`selfspec serve` with real clients) as ctest does: fetches the openai client
# from PyPI into the cache (scripts/get-openai-client.sh), then runs the given unittest names.
# Usage: run_serve_test.sh SELFSPEC_BINARY [UNITTEST-NAMES...]
# SELFSPEC_MPIEXEC / SELFSPEC_MPIEXEC_FLAGS come from ctest (empty: no MPI, the TP tests skip).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 SELFSPEC_BINARY [UNITTEST-NAMES...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
openai_path=$("$root/scripts/get-openai-client.sh" | tail -n 1)
export SELFSPEC_BIN=$1 SELFSPEC_SOURCE_DIR=$root SELFSPEC_OPENAI_PATH=$openai_path
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
exec "${PYTHON:-python3}" -W ignore::ResourceWarning "$here/serve_test.py" "$@"
