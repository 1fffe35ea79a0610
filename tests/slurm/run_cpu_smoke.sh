#!/usr/bin/env bash
# Runs the real scripts/slurm/cpu_smoke.sbatch on a real, single-node Slurm cluster brought up on
# localhost for the duration of the test:
#
#   tests/slurm/run_cpu_smoke.sh BUILD_DIR        (ctest: slurm_cpu_smoke, label "slurm")
#
#  1. installs the Debian packages if missing (slurmctld slurmd slurm-client munge libpmix-dev;
#     with a temporary policy-rc.d so that the packages do not start daemons of their own);
#  2. writes a minimal /etc/slurm/slurm.conf (NodeName=localhost with this machine's CPUs and
#     memory, one partition, proctrack/linuxproc, task/none, no accounting, MpiDefault=pmix);
#  3. starts munged (unless one already answers), slurmctld and slurmd, and waits until sinfo
#     shows the node idle;
#  4. submits scripts/slurm/cpu_smoke.sbatch with sbatch, polls it with a timeout, and checks
#     JobState=COMPLETED, ExitCode 0:0, result.json with "status":"ok" and identical tokens from
#     1 rank and 2 ranks (srun --mpi=pmix: tp 1 vs tp 2, checked again here);
#  5. preemption: submits the real scripts/slurm/tp8_single_node.sbatch shrunk to 2 CPU ranks with
#     a generation too long to finish, sends SIGTERM to its batch shell once the ranks generate
#     (`scancel --batch --signal=TERM`, what --signal=B:TERM@120 and preemption do), and checks
#     that the ranks stopped cleanly (exit 143), the partial result is in results.jsonl marked
#     interrupted, and job.json says interrupted;
#  6. serving: submits the real scripts/slurm/serve.sbatch (2 CPU ranks, a small model with a
#     tokenizer), waits for the address it publishes, gets a completion from it over HTTP, sends
#     SIGTERM to the batch shell and checks that rank 0 drained and the job COMPLETED (exit 0);
#  7. on exit, whatever happened: cancels the job, stops exactly the daemons it started (by pid),
#     removes its state directories and restores /etc/slurm/slurm.conf as it found it.
#
# PMIx: Debian's Slurm 22.05 has one PMIx plugin, mpi_pmix_v4.so (`srun --mpi=list`: pmix, with
# "specific pmix plugin versions available: pmix_v4"; `--mpi=pmix` is an alias of it). The plugin
# does not link libpmix: it dlopen()s /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so, the
# unversioned symlink shipped by libpmix-dev (PMIx 4.2.2), so libpmix-dev is required at run time.
# Open MPI 4.1 (Debian: built --with-pmix=/usr/lib/x86_64-linux-gnu/pmix2, the same PMIx 4.2.2)
# then wires up its ranks directly through the plugin; no mpirun is involved.
#
# Exit codes: 0 pass, 1 fail, 77 skipped (not root, or a Slurm daemon that this test did not
# start is already running: it will not reconfigure a live cluster). Logs and the job's results
# stay in BUILD_DIR/slurm-cpu-smoke/. Timeout for the job: SELFSPEC_SLURM_JOB_TIMEOUT (600 s).
set -euo pipefail

SKIP=77
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root: installs Debian packages, writes /etc/slurm/slurm.conf and starts" \
       "munged, slurmctld and slurmd on localhost"
  exit "$SKIP"
fi
repo=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=$(cd "$1" && pwd)
bin=$build_dir/bin/selfspec
job_script=$repo/scripts/slurm/cpu_smoke.sbatch
# shellcheck source=../../scripts/slurm/lib/test_cluster.sh
source "$repo/scripts/slurm/lib/test_cluster.sh"
if [ ! -x "$bin" ]; then
  echo "FAIL: $bin not found (build the selfspec target first)" >&2
  exit 1
fi
if [ ! -f "$job_script" ]; then
  echo "FAIL: $job_script not found" >&2
  exit 1
fi
job_timeout=${SELFSPEC_SLURM_JOB_TIMEOUT:-600}
t_start=$(date +%s)
log() { echo "[slurm-smoke +$(( $(date +%s) - t_start ))s] $*"; }

# Only one instance at a time on this machine (fixed ports, one /etc/slurm/slurm.conf).
lock_dir=/run/lock
[ -d "$lock_dir" ] || lock_dir=/tmp
exec 9> "$lock_dir/selfspec-slurm-smoke.lock"
# (The daemons are started with fd 9 closed, so the lock dies with this script.)
flock -w 300 9 || { echo "FAIL: another slurm smoke test has held the lock for 300 s" >&2; exit 1; }

state=/var/spool/selfspec-slurm-smoke       # daemon state, removed on exit
pids=/run/selfspec-slurm-smoke              # pids of the daemons this test started
work=$build_dir/slurm-cpu-smoke             # logs and results, kept
conf=/etc/slurm/slurm.conf
marker="# written by selfspec tests/slurm/run_cpu_smoke.sh"
export SLURM_CONF=$conf

# --- 0. leftovers of an earlier run of this test that was killed before its cleanup ----------
for name in slurmd slurmctld munged; do
  if [ -f "$pids/$name.pid" ]; then
    old=$(cat "$pids/$name.pid")
    if [ "$(cat "/proc/$old/comm" 2>/dev/null)" = "$name" ]; then
      log "stopping $name ($old) left over by an earlier run of this test"
      stop_daemon "$name" "$old"
    fi
    rm -f "$pids/$name.pid"
  fi
done
# A live cluster is one whose daemons read the slurm.conf this test rewrites: started without -f,
# or with -f naming it. Daemons of other clusters (their own -f, such as the multinode tests'
# namespace cluster) are left alone.
reads_conf() {  # reads_conf PID: the daemon reads $conf
  local arg next=0 file=$conf
  [ -r "/proc/$1/cmdline" ] || return 1
  while IFS= read -r -d '' arg; do
    if [ "$next" = 1 ]; then file=$arg; next=0; fi
    [ "$arg" = -f ] && next=1
  done < "/proc/$1/cmdline"
  [ "$file" = "$conf" ]
}
for name in slurmctld slurmd; do
  other=
  for p in $(pids_named "$name"); do
    if reads_conf "$p"; then other="$other $p"; fi
  done
  if [ -n "$other" ]; then
    echo "SKIP: $name is already running (pid$other) and was not started by this test; it" \
         "will not reconfigure a live Slurm cluster"
    exit "$SKIP"
  fi
done

# --- cleanup, from here on whatever happens ---------------------------------------------------
jobid=
conf_backup=
conf_state=absent
cleanup() {
  local rc=$? name
  trap - EXIT INT TERM
  set +e
  if [ -n "$jobid" ] && squeue -h -j "$jobid" 2>/dev/null | grep -q .; then
    log "cancelling job $jobid"
    scancel "$jobid" 2>/dev/null
    for _ in $(seq 1 60); do
      squeue -h -j "$jobid" 2>/dev/null | grep -q . || break
      sleep 0.5
    done
  fi
  for name in slurmd slurmctld munged; do
    if [ -f "$pids/$name.pid" ]; then
      stop_daemon "$name" "$(cat "$pids/$name.pid")"
      rm -f "$pids/$name.pid"
    fi
  done
  rmdir "$pids" 2>/dev/null
  # slurmstepd processes end with their job; give stragglers a moment, then report them.
  for _ in $(seq 1 20); do
    [ -z "$(pids_named slurmstepd)" ] && break
    sleep 0.5
  done
  [ -z "$(pids_named slurmstepd)" ] || log "warning: slurmstepd still running: $(pids_named slurmstepd)"
  rm -rf "$state"
  case "$conf_state" in
    ours) rm -f "$conf" ;;
    backed-up) mv -f "$conf_backup" "$conf" ;;
  esac
  log "cleaned up (exit code $rc, $(( $(date +%s) - t_start )) s in all)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 1. packages ------------------------------------------------------------------------------
packages=(slurmctld slurmd slurm-client munge libpmix-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  # Keep the packages' maintainer scripts from starting munge/slurm daemons of their own.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && own_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  install_rc=0
  { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } ||
    install_rc=$?
  [ "$own_policy" -eq 0 ] || rm -f "$policy"
  if [ "$install_rc" -ne 0 ]; then
    echo "FAIL: could not install ${missing[*]} (apt-get exit code $install_rc)" >&2
    exit 1
  fi
fi
plugin=$(find /usr/lib -name mpi_pmix.so -path '*slurm*' -print -quit 2>/dev/null || true)
libpmix=$(find /usr/lib -path '*/pmix2/lib/libpmix.so' -print -quit 2>/dev/null || true)
if [ -z "$plugin" ] || [ -z "$libpmix" ]; then
  echo "FAIL: srun --mpi=pmix needs Slurm's mpi_pmix.so (slurm-wlm-basic-plugins: found" \
       "'${plugin:-none}') and the libpmix.so it dlopen()s (libpmix-dev: found '${libpmix:-none}')" >&2
  exit 1
fi

rm -rf "$work" "$state"
mkdir -p "$work/logs" "$work/results" "$state/slurmctld" "$state/slurmd" "$pids"

# --- 2. slurm.conf ----------------------------------------------------------------------------
# This machine as slurmd sees it: "NodeName=host CPUs=.. Boards=.. SocketsPerBoard=..
# CoresPerSocket=.. ThreadsPerCore=.. RealMemory=..". The smoke job needs 2 CPUs: on a 1-CPU
# machine declare 2 (SlurmdParameters=config_overrides makes slurmd trust slurm.conf over the
# hardware it detects, so a container's odd topology cannot drain the node either).
hw=$(slurmd -C 2>/dev/null | head -n 1 | sed 's/^NodeName=[^ ]* //')
cpus=$(printf '%s' "$hw" | grep -o 'CPUs=[0-9]*' | cut -d= -f2)
if [ -z "$hw" ] || [ -z "$cpus" ]; then
  mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
  hw="CPUs=$(nproc) RealMemory=$mem"
  cpus=$(nproc)
fi
if [ "$cpus" -lt 2 ]; then
  hw="CPUs=2 $(printf '%s' "$hw" | grep -o 'RealMemory=[0-9]*')"
fi
if [ -e "$conf" ]; then
  if grep -qxF "$marker" "$conf"; then
    conf_state=ours  # left by a killed earlier run: rewrite it, remove it at the end
  else
    conf_backup=$conf.selfspec-smoke-backup
    cp -p "$conf" "$conf_backup"
    conf_state=backed-up
  fi
else
  conf_state=ours
fi
mkdir -p "$(dirname "$conf")"
cat > "$conf" <<EOF
$marker
# A single-node cluster on localhost for the CPU smoke test; removed when the test ends.
ClusterName=selfspec-smoke
SlurmctldHost=localhost
$(slurm_conf_common)
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$state/slurmctld
SlurmdSpoolDir=$state/slurmd
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$work/logs/slurmctld.log
SlurmdLogFile=$work/logs/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=localhost $hw State=UNKNOWN
PartitionName=smoke Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
cp "$conf" "$work/logs/slurm.conf"
log "slurm.conf: NodeName=localhost $hw"

# --- 3. daemons -------------------------------------------------------------------------------
# daemon_alive NAME: our daemon still runs (fails fast instead of waiting for a timeout).
daemon_alive() {
  alive "$(cat "$pids/$1.pid")"
}
fail_daemon() {
  echo "FAIL: $1 did not come up; its log:" >&2
  tail -n 30 "$work/logs/$1".* >&2 || true
  exit 1
}

if munge_answers; then
  log "munged already running: using it"
else
  start_munged "$work/logs/munged.out" "$pids/munged.pid" || fail_daemon munged
  log "munged started (pid $(cat "$pids/munged.pid"))"
fi

slurmctld -D -c -f "$conf" > "$work/logs/slurmctld.out" 2>&1 9>&- &
echo $! > "$pids/slurmctld.pid"
slurmd -D -N localhost -f "$conf" > "$work/logs/slurmd.out" 2>&1 9>&- &
echo $! > "$pids/slurmd.pid"
node_state=
for _ in $(seq 1 120); do
  daemon_alive slurmctld || fail_daemon slurmctld
  daemon_alive slurmd || fail_daemon slurmd
  node_state=$(sinfo -h -N -n localhost -o %T 2>/dev/null | head -n 1 || true)
  [ "$node_state" = idle ] && break
  sleep 0.5
done
if [ "$node_state" != idle ]; then
  echo "FAIL: node localhost is '${node_state:-unknown}', not idle, after 60 s" >&2
  sinfo -N -l >&2 || true
  tail -n 30 "$work/logs/slurmctld.log" "$work/logs/slurmd.log" >&2 || true
  exit 1
fi
log "slurmctld ($(cat "$pids/slurmctld.pid")) and slurmd ($(cat "$pids/slurmd.pid")) up; node idle"
srun --mpi=list 2>&1 | sed 's/^/  srun --mpi=list: /' | tr -s '\t' ' '

# --- 4. the job -------------------------------------------------------------------------------
cd "$work"
jobid=$(SELFSPEC_HOME=$repo SELFSPEC_BIN=$bin SELFSPEC_RESULTS=$work/results \
        sbatch --parsable --output="$work/slurm-%x-%j.out" "$job_script")
jobid=${jobid%%;*}
log "submitted $job_script as job $jobid"
wait_job() {  # wait_job JOBID: waits (at most job_timeout s) until it ends; sets job_state
  local deadline=$(( $(date +%s) + job_timeout ))
  job_state=
  while :; do
    job_state=$(scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    case "$job_state" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) return 0 ;;
    esac
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "FAIL: job $1 still '${job_state:-?}' after ${job_timeout} s" >&2
      scontrol show job "$1" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}
wait_job "$jobid"
job_line=$(scontrol show job -o "$jobid")
exit_code=$(printf '%s' "$job_line" | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
job_name=$(printf '%s' "$job_line" | grep -o 'JobName=[^ ]*' | cut -d= -f2)
results=$work/results/$job_name-$jobid
log "job $jobid: JobState=$job_state ExitCode=$exit_code"

# --- 5. checks --------------------------------------------------------------------------------
failures=()
[ "$job_state" = COMPLETED ] || failures+=("JobState=$job_state, expected COMPLETED")
[ "$exit_code" = 0:0 ] || failures+=("ExitCode=$exit_code, expected 0:0")
# fail_if_any STEP JOB_OUT LOG LINES: when $failures holds any, prints them, the job's output and
# the last LINES of LOG, and exits 1.
fail_if_any() {
  [ ${#failures[@]} -gt 0 ] || return 0
  echo "FAIL ($1):" >&2
  printf '  %s\n' "${failures[@]}" >&2
  cat "$2" >&2 || true
  tail -n "$4" "$3" >&2 || true
  exit 1
}
tokens_of() { grep -o '"tokens":\[[0-9,]*\]' "$1" 2>/dev/null | head -n 1 || true; }
tp_of() { grep -o '"tp":[0-9]*' "$1" 2>/dev/null | head -n 1 | cut -d: -f2 || true; }
if [ ! -s "$results/result.json" ]; then
  failures+=("no $results/result.json")
else
  grep -q '"status":"ok"' "$results/result.json" || failures+=("result.json: status is not ok")
  grep -q '"tokens_identical":true' "$results/result.json" ||
    failures+=("result.json: tokens_identical is not true")
  # The same check independently, on the runs' own JSON lines.
  t1=$(tokens_of "$results/tp1.json") t2=$(tokens_of "$results/tp2.json")
  [ "$(tp_of "$results/tp1.json")" = 1 ] || failures+=("tp1.json: not a 1-rank run")
  [ "$(tp_of "$results/tp2.json")" = 2 ] || failures+=("tp2.json: not a 2-rank run")
  if [ -z "$t1" ] || [ "$t1" != "$t2" ]; then
    failures+=("tokens differ between 1 and 2 ranks: '$t1' vs '$t2'")
  fi
fi
if [ ${#failures[@]} -gt 0 ]; then
  echo "FAIL:" >&2
  printf '  %s\n' "${failures[@]}" >&2
  echo "--- job output ($work/slurm-$job_name-$jobid.out)" >&2
  cat "$work/slurm-$job_name-$jobid.out" >&2 || true
  for f in "$results"/*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
  done
  echo "--- slurmctld / slurmd logs: $work/logs" >&2
  exit 1
fi
log "PASS: cpu_smoke.sbatch COMPLETED under Slurm; 1 rank and 2 ranks (srun --mpi=pmix) gave" \
    "identical tokens $t1; results in $results"

# --- 6. preemption: the real tp8_single_node.sbatch, shrunk to 2 CPU ranks --------------------
# A generation long enough to be cut: once it runs, `scancel --batch --signal=TERM` does what
# --signal=B:TERM@120 and preemption do. Expected: the ranks stop at a step boundary (exit 143),
# the interrupted generation's record is in results.jsonl with "interrupted":true, job.json says
# "interrupted", and the job ends (FAILED, non-zero) well before its time limit.
"$bin" make-model --out "$work/preempt-model" --layers 4 --hidden 256 --heads 8 --kv-heads 4 \
  --intermediate 512 --vocab 4000 --seed 3 > /dev/null
jobid=$(SELFSPEC_HOME=$repo SELFSPEC_BIN=$bin SELFSPEC_RESULTS=$work/results \
        SELFSPEC_MODEL=$work/preempt-model SELFSPEC_PROMPT_IDS=1,2,3 SELFSPEC_MAX_NEW=100000 \
        SELFSPEC_EXTRA_ARGS="--device cpu --ctx-size 100100" \
        sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
        --time=00:10:00 --output="$work/slurm-%x-%j.out" "$repo/scripts/slurm/tp8_single_node.sbatch")
jobid=${jobid%%;*}
results=$work/results/selfspec-tp8-$jobid
log "submitted tp8_single_node.sbatch (2 CPU ranks, 100000 tokens) as job $jobid"
deadline=$(( $(date +%s) + 120 ))
until grep -q "start \[rank 1/2" "$results/generate_autoregressive.log" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "FAIL: job $jobid never started generating" >&2
    cat "$work/slurm-selfspec-tp8-$jobid.out" >&2 || true
    exit 1
  fi
  sleep 0.2
done
sleep 2
t_term=$(date +%s.%N)
scancel --batch --signal=TERM "$jobid"
wait_job "$jobid"
seconds=$(awk -v now="$(date +%s.%N)" -v then="$t_term" 'BEGIN { printf "%.1f", now - then }')
log "job $jobid: JobState=$job_state ${seconds} s after SIGTERM"
failures=()
[ "$job_state" = FAILED ] || failures+=("JobState=$job_state, expected FAILED (interrupted)")
grep -q '"status":"interrupted"' "$results/job.json" 2>/dev/null ||
  failures+=("job.json does not say interrupted")
last=$(tail -n 1 "$results/results.jsonl" 2>/dev/null || true)
case "$last" in
  *'"interrupted":true'*) ;;
  *) failures+=("results.jsonl: the last record is not an interrupted generation: ${last:0:200}") ;;
esac
grep -q "stopped by SIGTERM" "$results/generate_autoregressive.log" ||
  failures+=("the ranks did not stop on SIGTERM (see generate_autoregressive.log)")
grep -q "exit code 143" "$results/generate_autoregressive.log" ||
  failures+=("the ranks did not exit with 143")
fail_if_any preemption "$work/slurm-selfspec-tp8-$jobid.out" \
  "$results/generate_autoregressive.log" 20
n_tokens=$(printf '%s' "$last" | grep -o '"n_generated":[0-9]*' | cut -d: -f2)
log "PASS: SIGTERM to the batch shell stopped both ranks after $n_tokens tokens (exit 143), the" \
    "record is in results.jsonl, job.json says interrupted; job over ${seconds} s after SIGTERM"

# --- 7. serving: the real serve.sbatch over 2 CPU ranks ---------------------------------------
# It publishes http://HOST:PORT in results/.../address once /health answers 200; a completion
# must come back; SIGTERM to the batch shell (what --signal=B:TERM@120 does) makes rank 0 drain,
# every rank exit 0, and the job COMPLETE.
"$bin" make-model --out "$work/serve-model" --layers 2 --hidden 64 --heads 8 --kv-heads 2 \
  --intermediate 96 --vocab 1300 --seed 5 > /dev/null
cp "$repo/tests/data/tokenizer/gpt2_style.tokenizer.json" "$work/serve-model/tokenizer.json"
serve_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
jobid=$(SELFSPEC_HOME=$repo SELFSPEC_BIN=$bin SELFSPEC_RESULTS=$work/results \
        SELFSPEC_MODEL=$work/serve-model SELFSPEC_SERVE_PORT=$serve_port \
        SELFSPEC_SERVE_ARGS="--ctx-size 256 --model-name tiny" \
        sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=00:10:00 \
        --output="$work/slurm-%x-%j.out" "$repo/scripts/slurm/serve.sbatch")
jobid=${jobid%%;*}
results=$work/results/selfspec-serve-$jobid
log "submitted serve.sbatch (2 CPU ranks, port $serve_port) as job $jobid"
deadline=$(( $(date +%s) + 120 ))
until [ -s "$results/address" ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "FAIL: job $jobid published no address in 120 s" >&2
    cat "$work/slurm-selfspec-serve-$jobid.out" "$results/serve.log" >&2 || true
    exit 1
  fi
  sleep 0.5
done
address=$(cat "$results/address")
completion=$(curl -sS --max-time 60 "http://127.0.0.1:$serve_port/v1/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model": "tiny", "prompt": "Hello", "max_tokens": 5, "temperature": 0, "ignore_eos": true}' \
  || true)
scancel --batch --signal=TERM "$jobid"
wait_job "$jobid"
job_line=$(scontrol show job -o "$jobid")
exit_code=$(printf '%s' "$job_line" | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
log "job $jobid: served at $address; JobState=$job_state ExitCode=$exit_code after SIGTERM"
failures=()
case "$completion" in
  *'"completion_tokens":5'*) ;;
  *) failures+=("no completion of 5 tokens from $address: ${completion:0:300}") ;;
esac
[ "$job_state" = COMPLETED ] || failures+=("JobState=$job_state, expected COMPLETED (drained)")
[ "$exit_code" = 0:0 ] || failures+=("ExitCode=$exit_code, expected 0:0")
grep -q "serve: drained; exiting" "$results/serve.log" ||
  failures+=("rank 0 did not drain (see serve.log)")
grep -q "start \[rank 1/2" "$results/serve.log" || failures+=("the server did not run 2 ranks")
fail_if_any serving "$work/slurm-selfspec-serve-$jobid.out" "$results/serve.log" 30
log "PASS: serve.sbatch served a completion over 2 ranks and drained on SIGTERM (exit 0)"
