#!/usr/bin/env bash
# The build without MPI (issue 12): configures and builds selfspec with MPI hidden from CMake
# (-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON, as on a machine that has no MPI: the single-rank engine)
# into ./build-nompi, and runs its unit tests, the launch tests (among them its refusals of
# --tp > 1 and of a launch as one of several tasks) and the multi-rank tests, which report
# themselves skipped with the reason. scripts/test.sh runs it after the full suite. With ccache
# (scripts/build.sh uses it when installed) and the same CUDA setting as ./build, little beyond
# comm/ and the tests is compiled again. Extra arguments go to CMake. JUnit XML goes to
# build-nompi/test-results.xml.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SELFSPEC_NO_MPI_BUILD_DIR:-build-nompi}
SELFSPEC_BUILD_DIR=$build_dir ./scripts/build.sh -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DSELFSPEC_BUILD_BENCH=OFF "$@"
rc=0
ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -j "$(nproc)" \
  --output-junit "$PWD/$build_dir/test-results.xml" -L '^unit|^integration:launch$|^mpi$' || rc=$?
if [ "$rc" -ne 0 ]; then
  ./tests/scripts/failed-tests.sh "$build_dir" || true
  exit "$rc"
fi
