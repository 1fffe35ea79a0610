# shellcheck shell=bash
# What the Slurm clusters the tests bring up share (sourced): tests/slurm/run_cpu_smoke.sh (one
# node on localhost) and tests/scripts/multinode/netns_cluster.sh (nodes in network namespaces).
# No procps needed: processes are read from /proc. The caller defines log MESSAGE.
#
#   slurm_conf_common          prints the slurm.conf lines both use: root daemons, munge
#                              authentication, Slurm's PMIx plugin for `srun --mpi=pmix`, no
#                              cgroups (proctrack/linuxproc, task/none: containers and VMs often
#                              lack them), no accounting, CPUs as consumable resources, and
#                              slurm.conf trusted over the hardware slurmd detects (a container's
#                              odd topology must not drain a node)
#   alive PID                  PID is a process that has not ended (zombies have); for a daemon
#                              just started, whose name is still its launcher's until it execs
#   running PID NAME           PID is a running process called NAME (zombies are not running)
#   pids_named NAME            pids of the running processes called NAME
#   stop_daemon NAME PID       SIGTERM, up to 20 s, then SIGKILL; only while PID is still NAME
#   munge_answers              a munged answers (munge | unmunge)
#   start_munged OUT PIDFILE   starts munged as the munge user (key created if missing), output to
#                              OUT, its pid to PIDFILE; waits up to 10 s until it answers; fails
#                              (return 1) when it does not
slurm_conf_common() {
  cat << 'CONF'
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
CONF
}

alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null) && [ -n "$state" ] && [ "$state" != Z ]
}

running() {
  [ "$(cat "/proc/$1/comm" 2> /dev/null)" = "$2" ] && alive "$1"
}

pids_named() {
  local p
  for p in /proc/[0-9]*; do
    if running "${p#/proc/}" "$1"; then echo "${p#/proc/}"; fi
  done
  return 0
}

stop_daemon() {
  local name=$1 pid=$2
  running "$pid" "$name" || return 0
  kill -TERM "$pid" 2> /dev/null || return 0
  for _ in $(seq 1 80); do
    running "$pid" "$name" || return 0
    sleep 0.25
  done
  log "$name ($pid) ignored SIGTERM for 20 s: SIGKILL"
  kill -KILL "$pid" 2> /dev/null || true
}

munge_answers() {
  munge -n 2> /dev/null | unmunge > /dev/null 2>&1
}

start_munged() {
  local out=$1 pidfile=$2 key=/etc/munge/munge.key pid
  [ -s "$key" ] || mungekey --create --keyfile "$key"
  chown munge:munge "$key" && chmod 600 "$key"
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge
  chmod 755 /run/munge
  # setpriv execs munged as the munge user in this process, so $! is munged's own pid. (fd 9: a
  # caller's lock, not to be inherited by a daemon.)
  setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground \
    > "$out" 2>&1 9>&- &
  pid=$!
  echo "$pid" > "$pidfile"
  for _ in $(seq 1 40); do
    munge_answers && return 0
    alive "$pid" || return 1  # (not `running`: until setpriv execs it, the name is setpriv's)
    sleep 0.25
  done
  munge_answers
}
