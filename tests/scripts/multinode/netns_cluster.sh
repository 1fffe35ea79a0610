#!/usr/bin/env bash
# A real multi-node Slurm cluster on one Linux machine: every "node" is a network namespace with
# its own veth link, address, hostname, /tmp and /dev/shm, and its own slurmd; traffic between
# nodes crosses a bridge, so Open MPI, PMIx and Slurm talk TCP between nodes exactly as they do
# between machines (and a link can be taken down, or slowed with netem, per node). The multinode
# tests (tests/multinode/) bring it up; by hand (tests/scripts/multinode/netns_cluster.sh):
#
#   netns_cluster.sh up WORKDIR [NODES] [CPUS_PER_NODE]   (default 2 nodes x 2;
#                                   up once every node is idle, reaches the others over TCP and
#                                   has run a first step)
#   netns_cluster.sh exec NODE CMD...     run CMD on node NODE (1, 2, ...)
#   netns_cluster.sh env                  the environment that sbatch/srun need
#   netns_cluster.sh link NODE up|down    that node's link to the bridge
#   netns_cluster.sh delay NODE USEC      netem delay on that node's link (0: off)
#   netns_cluster.sh rate NODE RATE       bandwidth limit on that link (off: none)
#   netns_cluster.sh kill NODE            SIGKILL to everything on the node
#   netns_cluster.sh start-slurmd NODE    (re)start the node's slurmd
#   netns_cluster.sh rsh-agent            the launch agent (a command) for mpirun
#   netns_cluster.sh down                 stop everything, remove every trace
#
# Layout: bridge ssmn-br 10.213.7.1/24 in this (the "head") namespace, where slurmctld runs; node
# i is namespace ssmn-node<i> with eth0 10.213.7.(10+i)/24 joined to the bridge by veth ssmn-v<i>,
# hostname ssnode<i> (its own UTS namespace, kept in STATE/uts/), an /etc/hosts naming every node,
# slurmd -N ssnode<i> (SlurmdSpoolDir, pid and log per node).
# munged is this machine's (one key, as on a real cluster with a shared munge.key); it is started
# only if none answers and then stopped by `down`. The Slurm configuration is STATE/slurm.conf on
# ports 6917/6918 (not the defaults, so a Slurm of this machine is not disturbed); `env` prints
# SLURM_CONF for sbatch, squeue and scontrol.
#
# Plain mpirun across nodes, without ssh (docs/guide/deployment.md, "Several nodes"): run mpirun on a node and give it
# the launch agent, which enters the target node's namespaces instead of logging in:
#   netns_cluster.sh exec 1 mpirun --host ssnode1:2,ssnode2:2 -np 4 \
#     --mca plm_rsh_agent "$(netns_cluster.sh rsh-agent)" --mca plm_rsh_no_tree_spawn 1 selfspec ...
#
# Needs root, iproute2 (ip, tc with netem), util-linux (unshare, nsenter), slurmctld, slurmd,
# munge and libpmix-dev. Exit codes: 0 ok, 1 failure, 77 cannot run here (not root, no network
# namespaces, or a cluster of this script already up). STATE is /run/selfspec-netns-cluster.
set -euo pipefail

state=/run/selfspec-netns-cluster
prefix=ssmn
bridge=${prefix}-br
subnet=10.213.7
head_addr=$subnet.1
ctl_port=6917
slurmd_port=6918
SKIP=77
self=$(cd -P "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=../../../scripts/slurm/lib/test_cluster.sh
source "$(dirname "$self")/../../../scripts/slurm/lib/test_cluster.sh"

log() { echo "[netns-cluster] $*" >&2; }
die() { echo "netns-cluster: error: $*" >&2; exit 1; }
node_ns() { echo "${prefix}-node$1"; }
node_name() { echo "ssnode$1"; }
node_addr() { echo "$subnet.$((10 + $1))"; }
node_count() { cat "$state/nodes" 2>/dev/null || echo 0; }

# stop_uts UTS: ends every process of that UTS namespace (as readlink /proc/PID/ns/uts names it):
# SIGTERM, up to 10 s, then SIGKILL.
stop_uts() {
  local p left
  for _ in $(seq 1 40); do
    left=
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/ns/uts" 2> /dev/null)" = "$1" ] || continue
      [ "$(awk '{print $3}' "$p/stat" 2> /dev/null)" != Z ] || continue
      left="$left ${p#/proc/}"
    done
    [ -n "$left" ] || return 0
    # shellcheck disable=SC2086  # a list of pids
    kill -TERM $left 2> /dev/null || true
    sleep 0.25
  done
  # shellcheck disable=SC2086
  kill -KILL $left 2> /dev/null || true
}

# pids_in_ns NS: processes whose network namespace is NS.
pids_in_ns() {
  local want p
  want=$(stat -L -c %i "/run/netns/$1" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [ "$(stat -L -c %i "$p/ns/net" 2>/dev/null)" = "$want" ] && echo "${p#/proc/}"
  done
  return 0
}

# ---- exec: a command on a node ----------------------------------------------------------------
# nsenter switches to the node's network and UTS namespaces (address, hostname); unshare gives the
# command a mount namespace of its own (changes stay in it), where __enter mounts the node's
# /etc/hosts, /tmp and /dev/shm (PMIx and Open MPI keep per-job files there, and two nodes must not
# share them). Not `ip netns exec`: it remounts /sys, which hides /sys/fs/cgroup from slurmd.
cmd_exec() {
  local node=$1
  shift
  [ -f "$state/uts/$(node_name "$node")" ] || die "no node $node (is the cluster up? $state)"
  exec nsenter --net="/run/netns/$(node_ns "$node")" --uts="$state/uts/$(node_name "$node")" -- \
    unshare --mount --propagation slave -- "$self" __enter "$node" "$@"
}
cmd_enter() {
  local node=$1 fs
  shift
  fs=$state/fs/$(node_name "$node")
  mount --bind "$fs/hosts" /etc/hosts
  mount --bind "$fs/tmp" /tmp
  mount --bind "$fs/shm" /dev/shm
  exec "$@"
}

# ---- the launch agent for mpirun (plm_rsh_agent) ------------------------------------------------
# Open MPI calls it as `AGENT HOST WORD...` and expects the words to run as a shell command on
# HOST, as ssh would.
cmd_rsh() {
  local host=$1 node
  shift
  node=${host#ssnode}
  case "$node" in '' | *[!0-9]*) die "rsh agent: unknown host '$host' (nodes are ssnode1..)" ;; esac
  cmd_exec "$node" /bin/sh -c "$*"
}

cmd_env() {
  echo "export SLURM_CONF=$state/slurm.conf"
}

cmd_link() {
  [ -n "${2:-}" ] || die "usage: link NODE up|down"
  ip link set "${prefix}-v$1" "$2"
}

# delay NODE USEC: netem on both ends of the node's link (each direction gets USEC), so a round
# trip between this node and any other gains 2 x USEC (4 x between two delayed nodes). Needs the
# kernel's sch_netem (exit 77 without it: some VM kernels lack it; `rate` works there).
# rate NODE RATE: a token-bucket limit (tbf: RATE such as 20mbit) on both ends of the node's link:
# a slow link by bandwidth; its queue holds 30 s of traffic, so nothing is dropped for lateness.
# Either with 0 / off removes what is there.
clear_link() {
  tc qdisc del dev "${prefix}-v$1" root 2> /dev/null || true
  ip netns exec "$(node_ns "$1")" tc qdisc del dev eth0 root 2> /dev/null || true
}
shape_link() {  # shape_link NODE QDISC-ARGS...: the same root qdisc on both ends
  local node=$1
  shift
  tc qdisc add dev "${prefix}-v$node" root "$@" &&
    ip netns exec "$(node_ns "$node")" tc qdisc add dev eth0 root "$@"
}
cmd_delay() {
  local node=${1:?usage: delay NODE USEC} usec=${2:?usage: delay NODE USEC}
  clear_link "$node"
  [ "$usec" -gt 0 ] || return 0
  if ! shape_link "$node" netem delay "${usec}us" 2> /dev/null; then
    clear_link "$node"
    echo "SKIP: this kernel has no netem qdisc (sch_netem): 'rate' limits bandwidth instead" >&2
    exit $SKIP
  fi
}
cmd_rate() {
  local node=${1:?usage: rate NODE RATE} rate=${2:?usage: rate NODE RATE}
  clear_link "$node"
  case "$rate" in 0 | off) return 0 ;; esac
  # burst: one full frame (the least tbf allows); a larger bucket would let the small messages of
  # a decode step, spaced by compute, pass at line rate while back-to-back ones pay the rate.
  shape_link "$node" tbf rate "$rate" burst 1600 latency 30s
}

# kill NODE: the node "crashes": every process on it (slurmd, slurmstepd, ranks) gets SIGKILL.
cmd_kill() {
  local p
  for p in $(pids_in_ns "$(node_ns "${1:?usage: kill NODE}")"); do kill -KILL "$p" 2> /dev/null || true; done
}

# start-slurmd NODE: (re)starts the node's slurmd (after `kill`); ReturnToService=2 lets the
# controller take the node back once it registers.
cmd_start_slurmd() {
  local node=${1:?usage: start-slurmd NODE}
  work=$(cat "$state/work")
  mkdir -p "$work/logs"
  SLURM_CONF=$state/slurm.conf "$self" exec "$node" slurmd -D -N "$(node_name "$node")" \
    -f "$state/slurm.conf" >> "$work/logs/slurmd-$(node_name "$node").out" 2>&1 &
  echo $! > "$state/slurmd-$node.pid"  # exec chain: this pid becomes slurmd itself
}

# ---- up ----------------------------------------------------------------------------------------
preflight() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces, veth, slurmd)"; exit $SKIP; }
  local tool
  for tool in ip tc unshare nsenter slurmctld slurmd munged sbatch srun; do
    command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed"; exit $SKIP; }
  done
  if ! ip netns add "${prefix}-probe" 2> /dev/null; then
    echo "SKIP: cannot create network namespaces here (ip netns add failed)"
    exit $SKIP
  fi
  ip netns del "${prefix}-probe"
  # The kernel's bridge and veth drivers, and the UTS and mount namespaces every node command uses.
  if ! ip link add "${prefix}-pbr" type bridge 2> /dev/null; then
    echo "SKIP: this kernel cannot make a bridge (ip link add type bridge failed)"
    exit $SKIP
  fi
  ip link del "${prefix}-pbr"
  if ! ip link add "${prefix}-pv0" type veth peer name "${prefix}-pv1" 2> /dev/null; then
    echo "SKIP: this kernel cannot make veth pairs (ip link add type veth failed)"
    exit $SKIP
  fi
  ip link del "${prefix}-pv0"
  if ! unshare --uts --mount --propagation slave true 2> /dev/null; then
    echo "SKIP: cannot create UTS and mount namespaces here (unshare --uts --mount failed)"
    exit $SKIP
  fi
  if [ -d "$state" ]; then
    echo "SKIP: a cluster is already up ($state): '$self down' removes it"
    exit $SKIP
  fi
  local other
  other=$(pids_named slurmctld | tr '\n' ' ')  # (zombies of an earlier cluster do not count)
  if [ -n "$other" ]; then
    echo "SKIP: a slurmctld not started by this script is running (pid ${other% }); it will not" \
         "share this machine"
    exit $SKIP
  fi
}

make_network() {
  local nodes=$1 i ns
  ip link add "$bridge" type bridge
  ip addr add "$head_addr/24" dev "$bridge"
  ip link set "$bridge" up
  mkdir -p "$state/uts"
  for i in $(seq 1 "$nodes"); do
    ns=$(node_ns "$i")
    ip netns add "$ns"
    ip link add "${prefix}-v$i" type veth peer name eth0 netns "$ns"
    ip link set "${prefix}-v$i" master "$bridge" up
    ip netns exec "$ns" ip addr add "$(node_addr "$i")/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip route add default via "$head_addr"
    touch "$state/uts/$(node_name "$i")"
    unshare --uts="$state/uts/$(node_name "$i")" hostname "$(node_name "$i")"
    mkdir -p "$state/fs/$(node_name "$i")/tmp" "$state/fs/$(node_name "$i")/shm"
    chmod 1777 "$state/fs/$(node_name "$i")/tmp" "$state/fs/$(node_name "$i")/shm"
    {
      echo "127.0.0.1 localhost"
      echo "$head_addr ssmn-head"
      for j in $(seq 1 "$nodes"); do echo "$(node_addr "$j") $(node_name "$j")"; done
    } > "$state/fs/$(node_name "$i")/hosts"
    mkdir -p "$state/slurmd-$(node_name "$i")"
  done
}

start_munge() {
  if munge_answers; then
    log "munged already running: using it"
    return 0
  fi
  start_munged "$work/logs/munged.out" "$state/munged.pid" ||
    die "munged did not come up ($work/logs/munged.out)"
}

write_slurm_conf() {
  local nodes=$1 cpus=$2 mem i
  mem=$(awk '/^MemTotal:/ {print int($2 / 1024 / 4)}' /proc/meminfo)
  mkdir -p "$state/slurmctld"
  cat > "$state/slurm.conf" << EOF
# A ${nodes}-node cluster in network namespaces (tests/scripts/multinode/netns_cluster.sh).
ClusterName=selfspec-netns
SlurmctldHost=ssmn-head($head_addr)
$(slurm_conf_common)
SlurmdTimeout=20
MessageTimeout=5
KillWait=5
SlurmctldPort=$ctl_port
SlurmdPort=$slurmd_port
StateSaveLocation=$state/slurmctld
SlurmdSpoolDir=$state/slurmd-%n
SlurmctldPidFile=$state/slurmctld.pidfile
SlurmdPidFile=$state/slurmd-%n.pidfile
SlurmctldLogFile=$work/logs/slurmctld.log
SlurmdLogFile=$work/logs/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
EOF
  for i in $(seq 1 "$nodes"); do
    echo "NodeName=$(node_name "$i") NodeAddr=$(node_addr "$i") CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  done >> "$state/slurm.conf"
  echo "PartitionName=nodes Nodes=ssnode[1-$nodes] Default=YES MaxTime=INFINITE State=UP" \
    >> "$state/slurm.conf"
  cp "$state/slurm.conf" "$work/logs/slurm.conf"
}

start_slurm() {
  local nodes=$1 i idle
  export SLURM_CONF=$state/slurm.conf
  # slurmctld runs only where the hostname is SlurmctldHost's: a UTS namespace of its own.
  unshare --uts /bin/sh -c 'hostname ssmn-head && exec slurmctld -D -c -f "$1"' sh "$SLURM_CONF" \
    > "$work/logs/slurmctld.out" 2>&1 &
  echo $! > "$state/slurmctld.pid"
  # Its UTS namespace, shared by the helpers it forks (slurmscriptd): `down` ends them all.
  for _ in $(seq 1 20); do
    [ "$(cat "/proc/$!/comm" 2> /dev/null)" = slurmctld ] && break
    sleep 0.1
  done
  readlink "/proc/$!/ns/uts" > "$state/head.uts" 2> /dev/null || true
  for i in $(seq 1 "$nodes"); do cmd_start_slurmd "$i"; done
  for _ in $(seq 1 120); do
    alive "$(cat "$state/slurmctld.pid")" || die "slurmctld exited: $work/logs/slurmctld.*"
    idle=$(sinfo -h -N -t idle -o %N 2> /dev/null | sort -u | grep -c . || true)
    [ "$idle" -eq "$nodes" ] && return 0
    sleep 0.5
  done
  sinfo -N -l >&2 || true
  die "not all $nodes nodes idle after 60 s: $work/logs/"
}

# Every node reaches every other one by name over TCP (the ranks' path, node to node through the
# bridge, which slurmd's registration with the head does not take): a connection to the other
# node's slurmd port, retried for up to 30 s.
check_node_to_node() {
  local nodes=$1 i j t0
  t0=$(date +%s)
  for i in $(seq 1 "$nodes"); do
    for j in $(seq 1 "$nodes"); do
      [ "$i" -ne "$j" ] || continue
      for _ in $(seq 1 30); do
        "$self" exec "$i" timeout 2 bash -c \
          "exec 3<> /dev/tcp/$(node_name "$j")/$slurmd_port" 2> /dev/null && continue 2
        sleep 1
      done
      die "$(node_name "$i") cannot reach $(node_name "$j") over TCP (port $slurmd_port) within 30 s"
    done
  done
  log "every node reaches every other over TCP ($(($(date +%s) - t0)) s)"
}

# The cluster is up once it has run a step on every node: srun -N NODES hostname, each node
# answering with its own name (the first step also pays for whatever its daemons do only once).
check_first_step() {
  local nodes=$1 t0 got want
  t0=$(date +%s)
  got=$(SLURM_CONF=$state/slurm.conf timeout 120 srun --nodes="$nodes" --ntasks-per-node=1 \
        --mpi=none hostname 2> "$work/logs/first-step.err" | sort | tr '\n' ' ') ||
    die "a first step on all $nodes nodes failed: $(tail -n 3 "$work/logs/first-step.err" | tr '\n' ' ')"
  want=$(for i in $(seq 1 "$nodes"); do node_name "$i"; done | sort | tr '\n' ' ')
  [ "$got" = "$want" ] || die "a first step on all nodes answered '$got', not '$want'"
  log "first step on every node: $got($(($(date +%s) - t0)) s)"
}

cmd_up() {
  work=${1:?usage: up WORKDIR [NODES] [CPUS_PER_NODE]}
  local nodes=${2:-2} cpus=${3:-2}
  preflight
  mkdir -p "$work/logs" "$state"
  work=$(cd "$work" && pwd)
  echo "$nodes" > "$state/nodes"
  echo "$work" > "$state/work"
  log "up: $nodes nodes x $cpus CPUs; logs in $work/logs"
  make_network "$nodes"
  start_munge
  write_slurm_conf "$nodes" "$cpus"
  start_slurm "$nodes"
  check_node_to_node "$nodes"
  check_first_step "$nodes"
  log "cluster up: $(sinfo -h -N -o '%N:%T' | sort -u | tr '\n' ' ')"
}

# ---- down --------------------------------------------------------------------------------------
cmd_down() {
  [ -d "$state" ] || { log "nothing to take down"; return 0; }
  local nodes i ns p
  nodes=$(node_count)
  export SLURM_CONF=$state/slurm.conf
  if [ -f "$state/slurm.conf" ]; then
    for p in $(squeue -h -o %i 2> /dev/null); do scancel "$p" 2> /dev/null || true; done
  fi
  for i in $(seq 1 "$nodes"); do
    [ -f "$state/slurmd-$i.pid" ] && stop_daemon slurmd "$(cat "$state/slurmd-$i.pid")"
  done
  [ -f "$state/slurmctld.pid" ] && stop_daemon slurmctld "$(cat "$state/slurmctld.pid")"
  [ -s "$state/head.uts" ] && stop_uts "$(cat "$state/head.uts")"
  [ -f "$state/munged.pid" ] && stop_daemon munged "$(cat "$state/munged.pid")"
  # Whatever still runs on a node (stepds, ranks, orteds) goes with it.
  for i in $(seq 1 "$nodes"); do
    ns=$(node_ns "$i")
    for p in $(pids_in_ns "$ns"); do kill -KILL "$p" 2> /dev/null || true; done
  done
  sleep 0.2
  for i in $(seq 1 "$nodes"); do
    ns=$(node_ns "$i")
    ip link del "${prefix}-v$i" 2> /dev/null || true
    ip netns del "$ns" 2> /dev/null || true
    umount "$state/uts/$(node_name "$i")" 2> /dev/null || true
  done
  ip link del "$bridge" 2> /dev/null || true
  rm -rf "$state"
  log "down"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  exec) shift; cmd_exec "$@" ;;
  __enter) shift; cmd_enter "$@" ;;
  __rsh) shift; cmd_rsh "$@" ;;
  rsh-agent) echo "$self __rsh" ;;
  env) cmd_env ;;
  link) shift; cmd_link "$@" ;;
  delay) shift; cmd_delay "$@" ;;
  rate) shift; cmd_rate "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  start-slurmd) shift; cmd_start_slurmd "$@" ;;
  *) sed -n '2,30p' "$self" >&2; exit 2 ;;
esac
