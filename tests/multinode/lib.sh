# shellcheck shell=bash
# What the multinode tests share (sourced, never run): the cluster of
# tests/scripts/multinode/netns_cluster.sh, brought up by the ctest fixture multinode_cluster
# (tests/multinode/cluster_fixture.sh), and helpers to run jobs on it and to watch their ranks.
#
#   mn_init NAME BUILD_DIR   checks the cluster (exit 77 with the fixture's reason when it is not
#                            up), sets repo, bin, cluster, work (BUILD_DIR/multinode/NAME) and
#                            SLURM_CONF
#   mn_wait_job JOBID SECONDS    waits for the job to end; sets job_state (fails after SECONDS)
#   mn_ranks NODE            pids of the selfspec processes on node NODE
#   mn_running PID           true while PID is a selfspec process that has not exited: a zombie
#                            (exited, not yet reaped by its slurmstepd) has
#   mn_describe PID          one line on PID: state, wait channel, threads' states, command line
#   mn_tokens FILE           the "tokens":[...] of the last JSON line of FILE
#   mn_wait_idle SECONDS     waits until every node is idle again
#   mn_fail MESSAGE          prints FAIL, $work's logs, the cluster's state and logs, FAIL again
#                            (last), and exits 1

mn_init() {
  local name=$1 build_dir
  build_dir=$(cd "$2" && pwd)
  repo=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  bin=$build_dir/bin/selfspec
  cluster=$repo/tests/scripts/multinode/netns_cluster.sh
  local fixture=$build_dir/multinode/cluster
  if [ -f "$fixture/skipped" ]; then
    echo "SKIP: $(cat "$fixture/skipped")"
    exit 77
  fi
  if [ ! -f /run/selfspec-netns-cluster/slurm.conf ]; then
    echo "FAIL: the namespace cluster is not up (the fixture multinode_cluster_up failed:" \
         "$fixture/logs)" >&2
    exit 1
  fi
  [ -x "$bin" ] || { echo "FAIL: $bin not found (build the selfspec target first)" >&2; exit 1; }
  local dir
  for dir in "$build_dir" "$repo"; do
    case "$dir/" in
      /tmp/* | /dev/shm/*)
        echo "FAIL: $dir is under /tmp or /dev/shm, which every node of the cluster has its own" \
             "of: the nodes cannot see it (use a build directory elsewhere)" >&2
        exit 1 ;;
    esac
  done
  eval "$("$cluster" env)"
  cluster_logs=$fixture/logs
  export SLURM_CONF
  work=$build_dir/multinode/$name
  rm -rf "$work"
  mkdir -p "$work"
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  t_start=$(date +%s)
}

log() { echo "[$(basename "$0" .sh) +$(($(date +%s) - t_start))s] $*"; }

mn_fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$work"/*.out "$work"/*.log "$work"/results/*/*.log "$work"/results/*/job.json; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }
  done
  echo "--- the cluster: nodes, queue, the controller's and the nodes' last log lines" >&2
  sinfo -h -N -o '%N %T %E' >&2 2> /dev/null || true
  squeue -h -o '%i %j %T %R' >&2 2> /dev/null || true
  for f in "$cluster_logs"/slurmctld.log "$cluster_logs"/slurmd-*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 8 "$f" >&2; }
  done
  echo "FAIL: $*" >&2  # again, last: a log that keeps only its tail still says why
  exit 1
}

mn_wait_job() {
  local deadline=$(($(date +%s) + $2))
  job_state=
  while :; do
    job_state=$(scontrol show job -o "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    case "$job_state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | BOOT_FAIL | DEADLINE)
        return 0 ;;
    esac
    [ "$(date +%s)" -lt "$deadline" ] || mn_fail "job $1 still '${job_state:-?}' after $2 s"
    sleep 0.5
  done
}

mn_running() {
  [ "$(cat "/proc/$1/comm" 2> /dev/null)" = selfspec ] || return 1
  case "$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null)" in Z | X | '') return 1 ;; esac
  return 0
}

mn_describe() {
  local p=$1 state wchan threads
  state=$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null) || state=gone
  wchan=$(cat "/proc/$p/wchan" 2> /dev/null) || wchan=?
  threads=$(for t in /proc/"$p"/task/*; do awk '{printf "%s ", $3}' "$t/stat" 2> /dev/null; done)
  echo "pid $p: state ${state:-gone}, wchan ${wchan:-0}, threads [${threads% }]," \
       "cmdline '$(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | cut -c1-120)'"
}

mn_ranks() {
  local want p
  want=$(stat -L -c %i "/run/netns/ssmn-node$1" 2> /dev/null) || return 0
  for p in /proc/[0-9]*; do
    mn_running "${p#/proc/}" || continue
    [ "$(stat -L -c %i "$p/ns/net" 2> /dev/null)" = "$want" ] && echo "${p#/proc/}"
  done
  return 0
}

mn_tokens() { tail -n 1 "$1" 2> /dev/null | grep -o '"tokens":\[[0-9,]*\]' || true; }

mn_wait_idle() {
  local deadline=$(($(date +%s) + $1)) nodes idle
  nodes=$(cat /run/selfspec-netns-cluster/nodes)
  while :; do
    idle=$(sinfo -h -N -t idle -o %N 2> /dev/null | sort -u | grep -c . || true)
    [ "$idle" -eq "$nodes" ] && return 0
    [ "$(date +%s)" -lt "$deadline" ] || mn_fail "nodes not idle after $1 s: $(sinfo -h -N -o '%N:%T' | tr '\n' ' ')"
    sleep 0.5
  done
}
