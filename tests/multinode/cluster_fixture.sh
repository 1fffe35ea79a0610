#!/usr/bin/env bash
# The ctest fixture of the multinode tests (label "multinode"):
#
#   tests/multinode/cluster_fixture.sh up BUILD_DIR     (multinode_cluster_up: FIXTURES_SETUP)
#   tests/multinode/cluster_fixture.sh down BUILD_DIR   (multinode_cluster_down: FIXTURES_CLEANUP,
#                                                        runs even when a test failed)
#
# `up` brings up a 2-node Slurm cluster of network namespaces with 2 CPUs per node
# (tests/scripts/multinode/netns_cluster.sh; logs in BUILD_DIR/multinode/cluster/logs). Where it
# cannot run (not root, no network namespaces, Slurm missing) it records the reason in
# BUILD_DIR/multinode/cluster/skipped and exits 77 (skipped); every test then skips with that
# reason. A cluster left behind by a run of this fixture that was killed is taken down first.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 up|down BUILD_DIR" >&2; exit 2; }
repo=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$repo/tests/scripts/multinode/netns_cluster.sh
fixture=$(cd "$2" && pwd)/multinode/cluster
state=/run/selfspec-netns-cluster

case "$1" in
  up)
    if [ -d "$state" ] && [ "$(cat "$state/work" 2> /dev/null)" = "$fixture" ]; then
      echo "taking down the cluster a killed earlier run left behind"
      "$cluster" down
    fi
    rm -rf "$fixture"
    mkdir -p "$fixture"
    rc=0
    "$cluster" up "$fixture" 2 2 > "$fixture/up.out" 2>&1 || rc=$?
    cat "$fixture/up.out"
    if [ "$rc" -eq 77 ]; then
      grep -m1 '^SKIP: ' "$fixture/up.out" | sed 's/^SKIP: //' > "$fixture/skipped"
      exit 77
    fi
    if [ "$rc" -ne 0 ]; then
      echo "FAIL: the cluster did not come up (exit code $rc); taking down what did" >&2
      "$cluster" down || true
      exit 1
    fi
    ;;
  down)
    if [ -d "$state" ] && [ "$(cat "$state/work" 2> /dev/null)" != "$fixture" ]; then
      echo "the cluster in $state is not this fixture's ($fixture): left alone"
      exit 0
    fi
    "$cluster" down
    ;;
  *) echo "usage: $0 up|down BUILD_DIR" >&2; exit 2 ;;
esac
