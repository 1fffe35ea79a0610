#!/usr/bin/env bash
# Sets everything up (Debian packages), builds (and the clang fuzz targets, scripts/build-fuzz.sh),
# and runs the whole test suite with ctest. Multi-rank tests run under mpirun with hard timeouts.
# JUnit XML goes to build/test-results.xml; when tests fail, the end of what each printed is
# repeated last (tests/scripts/failed-tests.sh), where a CI log's tail shows it. Then builds and
# tests the flavour without MPI (scripts/test-no-mpi.sh, ./build-nompi) unless
# SELFSPEC_TEST_NO_MPI=0.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
./scripts/build-fuzz.sh
build_dir=${SELFSPEC_BUILD_DIR:-build}
# Open MPI refuses to run as root without these; oversubscription lets 4 ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# The large real models (Qwen2.5-Coder 0.5B/1.5B: 1.6 GB of downloads, tens of minutes) run on
# demand only, when a label is asked for: scripts/test.sh -L realmodel-large.
labels=(-LE realmodel-large)
for arg in "$@"; do
  case $arg in -L* | --label-regex* | --label-exclude*) labels=() ;; esac
done
rc=0
ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -j "$(nproc)" \
  --output-junit "$PWD/$build_dir/test-results.xml" "${labels[@]}" "$@" || rc=$?
if [ "$rc" -ne 0 ]; then
  ./tests/scripts/failed-tests.sh "$build_dir" || true
  exit "$rc"
fi
if [ "${SELFSPEC_TEST_NO_MPI:-1}" != 0 ]; then
  ./scripts/test-no-mpi.sh
fi
