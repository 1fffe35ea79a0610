#!/usr/bin/env bash
# Node failures on the namespace cluster (ctest multinode_link_down, multinode_node_killed,
# multinode_slow_link):
#
#   tests/multinode/node_failures.sh BUILD_DIR link-down|node-killed|slow-link
#
# A TP 4 job over 2 nodes x 2 ranks (sbatch, `srun --mpi=pmix --kill-on-bad-exit=1`, collective
# deadline SELFSPEC_COMM_TIMEOUT_S=$deadline) runs `selfspec bench` with one line per finished
# run in bench.jsonl. Once a few runs are on disk:
#   link-down    node 2's link goes down (`ip link set ... down`: packets vanish, no reset);
#   node-killed  node 2 crashes: its slurmd, slurmstepd and ranks get SIGKILL;
# then every rank still alive must exit, non-zero, within the deadline (plus a grace for the
# watchdog's check period and process exit), the ranks' messages must name the collective or the
# peer, the job must end (FAILED or NODE_FAIL, not COMPLETED), and bench.jsonl must hold the runs
# finished before, every line whole. The times to exit and to the job's end are measured and
# printed (exit_seconds, job_end_seconds in result.json).
#   slow-link    node 2's link gets netem delay (100 ms each way, far beyond a LAN, far below the
#                deadline), or where the kernel lacks netem a 1 Mbit/s limit: a greedy generation
#                over both nodes must complete with the tokens of the unslowed run, and its
#                communication time must show the slow link.
# Afterwards the node is brought back (link up, slurmd restarted) and must be idle again.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mode=${2:?usage: $0 BUILD_DIR link-down|node-killed|slow-link}
case "$mode" in link-down | node-killed | slow-link) ;; *) echo "unknown mode $mode" >&2; exit 2 ;; esac
mn_init "$mode" "${1:?usage: $0 BUILD_DIR MODE}"
deadline=10
grace=5
export SELFSPEC_COMM_TIMEOUT_S=$deadline

"$bin" make-model --out "$work/model" --layers 2 --hidden 256 --heads 8 --kv-heads 4 \
  --intermediate 512 --vocab 4000 --seed 5 > /dev/null
restore() {
  "$cluster" link 2 up 2> /dev/null || true
  "$cluster" rate 2 off 2> /dev/null || true
}
trap restore EXIT

# --- slow link: slow is not dead -----------------------------------------------------------------
if [ "$mode" = slow-link ]; then
  gen=(srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks=4 --ntasks-per-node=2 "$bin"
       generate --model "$work/model" --device cpu --threads 1 --tp 4 --prompt-ids 1,2,3
       --max-new-tokens 6 --ignore-eos --json)
  timeout 120 "${gen[@]}" > "$work/fast.out" 2> "$work/fast.log" || mn_fail "the run over the normal link failed"
  # netem delay where the kernel has it; else (VM kernels without sch_netem) a bandwidth limit.
  slow="delay of 100 ms each way"
  if ! "$cluster" delay 2 100000 2> /dev/null; then
    slow="bandwidth limit of 128 kbit/s (this kernel has no netem)"
    "$cluster" rate 2 128kbit
  fi
  t0=$(date +%s.%N)
  timeout 300 "${gen[@]}" > "$work/slow.out" 2> "$work/slow.log" ||
    mn_fail "the run over a slow link ($slow) failed: a slow link was taken for a dead one"
  seconds=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
  restore
  fast=$(mn_tokens "$work/fast.out") slow_tokens=$(mn_tokens "$work/slow.out")
  [ -n "$fast" ] && [ "$fast" = "$slow_tokens" ] || mn_fail "tokens differ: '$fast' vs '$slow_tokens'"
  comm_fast=$(grep -o '"comm_s":[0-9.e-]*' "$work/fast.out" | cut -d: -f2)
  comm_slow=$(grep -o '"comm_s":[0-9.e-]*' "$work/slow.out" | cut -d: -f2)
  awk -v s="$comm_slow" -v f="$comm_fast" 'BEGIN { exit !(s > 2 * f + 1.0) }' ||
    mn_fail "communication took ${comm_slow} s over the slow link, ${comm_fast} s without:" \
      "was it slowed?"
  printf '{"mode":"slow-link","slow":"%s","deadline_s":%s,"seconds":%s,"comm_s_slow":%s,"comm_s_fast":%s,"tokens_identical":true}\n' \
    "$slow" "$deadline" "$seconds" "$comm_slow" "$comm_fast" > "$work/result.json"
  log "PASS: over a link slowed by a $slow the job completed in ${seconds} s (comm" \
      "${comm_slow} s vs ${comm_fast} s unslowed) within its ${deadline} s collective deadline," \
      "with identical tokens $fast"
  exit 0
fi

# --- link down / node killed -------------------------------------------------------------------
# --no-requeue: Slurm would otherwise requeue a batch job whose node failed (JobRequeue=1).
jobid=$(sbatch --parsable --no-requeue --nodes=2 --ntasks-per-node=2 --time=00:05:00 \
        --output="$work/job.out" --export=ALL --wrap \
        "srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=4 --ntasks-per-node=2 '$bin' bench \
         --model '$work/model' --device cpu --threads 1 --tp 4 --prompt-len 8 --gen 16 \
         --reps 500 --bandwidth-mb 16 --out-jsonl '$work/bench.jsonl'")
jobid=${jobid%%;*}
log "job $jobid: TP 4 bench over 2 nodes, collective deadline ${deadline} s"
wait_until=$(($(date +%s) + 120))
runs_on_disk() { cat "$work/bench.jsonl" 2> /dev/null | grep -c '"record":"run"' || true; }
until [ "$(runs_on_disk)" -ge 3 ]; do
  [ "$(date +%s)" -lt "$wait_until" ] || mn_fail "job $jobid wrote no 3 runs in 120 s"
  sleep 0.2
done
node1=$(mn_ranks 1 | tr '\n' ' ') node2=$(mn_ranks 2 | tr '\n' ' ')
[ -n "$node1" ] && [ -n "$node2" ] || mn_fail "ranks not on both nodes: '$node1' / '$node2'"
t0=$(date +%s.%N)
if [ "$mode" = link-down ]; then
  "$cluster" link 2 down
  survivors="$node1 $node2"  # both sides of a cut link live on
  log "node 2's link down (ranks on node 1: $node1; node 2: $node2)"
else
  "$cluster" kill 2
  survivors=$node1
  log "node 2 killed (slurmd, slurmstepd, ranks); ranks on node 1: $node1"
fi
finished=$(runs_on_disk)

# Every surviving rank must be gone within the deadline (+ grace).
limit=$((deadline + grace))
exit_seconds=
while :; do
  left=
  # An exited rank that its slurmstepd has not reaped yet (a zombie) has exited: node 2's
  # slurmstepd may be slow to reap while its link is down.
  for p in $survivors; do mn_running "$p" && left="$left $p"; done
  now=$(date +%s.%N)
  elapsed=$(awk -v a="$now" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
  if [ -z "$left" ]; then exit_seconds=$elapsed; break; fi
  if awk -v e="$elapsed" -v l="$limit" 'BEGIN { exit !(e > l) }'; then
    for p in $left; do log "$(mn_describe "$p")"; done
    mn_fail "ranks$left still running ${elapsed} s after the failure (deadline ${deadline} s)"
  fi
  sleep 0.1
done
log "every surviving rank exited ${exit_seconds} s after the failure (deadline ${deadline} s)"

# The job must end. A cut link comes back first (the ranks of both sides are gone; the job ends
# once node 2's slurmstepd reaches srun again); a crashed node stays down, as a real one would
# until it reboots: the controller declares it down after SlurmdTimeout (20 s) and ends the job
# (NODE_FAIL), and only then does node 2's slurmd come back. Either way node 2 must be idle again.
restore
t_job=$(date +%s)
mn_wait_job "$jobid" 120
job_end_seconds=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
log "job $jobid: $job_state, $(($(date +%s) - t_job)) s after the ranks were gone" \
    "(${job_end_seconds} s after the failure)"
[ "$mode" = node-killed ] && "$cluster" start-slurmd 2
case "$job_state" in FAILED | NODE_FAIL | CANCELLED) ;; *) mn_fail "job ended $job_state" ;; esac
if [ "$mode" = link-down ]; then
  grep -q "collective '.*' has waited" "$work/job.out" ||
    mn_fail "no rank named the collective it waited in"
else
  grep -qE "collective '.*' has waited|ssnode2|rank [23]/4|process.*(exited|killed|died)" \
    "$work/job.out" || mn_fail "no rank named the collective or the lost peer"
fi
# Every surviving rank exited non-zero (srun reports each node's tasks).
for node in ssnode1 $([ "$mode" = link-down ] && echo ssnode2); do
  grep -qE "srun: error: $node: tasks? [0-9-]+: Exited with exit code [1-9]" "$work/job.out" ||
    mn_fail "the ranks on $node did not exit non-zero"
done
lines=$(grep -c . "$work/bench.jsonl")
bad=$(python3 -c 'import json,sys
bad=0
for line in open(sys.argv[1]):
    try: json.loads(line)
    except ValueError: bad+=1
print(bad)' "$work/bench.jsonl")
[ "$bad" -eq 0 ] || mn_fail "bench.jsonl: $bad torn lines"
[ "$lines" -ge "$finished" ] || mn_fail "bench.jsonl lost runs: $lines lines, $finished before"
mn_wait_idle 90
printf '{"mode":"%s","deadline_s":%s,"exit_seconds":%s,"job_end_seconds":%s,"job_state":"%s","runs_on_disk":%s}\n' \
  "$mode" "$deadline" "$exit_seconds" "$job_end_seconds" "$job_state" "$lines" > "$work/result.json"
log "PASS: $mode: survivors out in ${exit_seconds} s (deadline ${deadline} s), job $job_state," \
    "$lines finished runs intact in bench.jsonl, node 2 idle again"
