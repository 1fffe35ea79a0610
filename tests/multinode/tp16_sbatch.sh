#!/usr/bin/env bash
# The real scripts/slurm/tp16_two_nodes.sbatch on the namespace cluster (ctest
# multinode_tp16_sbatch), scaled to it: --nodes=2 --ntasks-per-node=2 (TP 4) on the LLaMA-2-70B
# geometry with 2 layers of synthetic bf16 weights (configs/runs/cpu-smoke-70b-geometry.yaml;
# about 5 GB over the 4 ranks). The job COMPLETES, its self-speculative tokens equal the
# autoregressive ones (the job checks), every rank's start line names its node, and the same
# generation on one node (1 x 4) gives the same tokens.
#
#   tests/multinode/tp16_sbatch.sh BUILD_DIR      exit 0 pass, 1 fail, 77 skipped
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mn_init tp16_sbatch "${1:?usage: $0 BUILD_DIR}"

config=configs/runs/cpu-smoke-70b-geometry.yaml
jobid=$(SELFSPEC_HOME=$repo SELFSPEC_BIN=$bin SELFSPEC_RESULTS=$work/results \
        SELFSPEC_CONFIG=$config SELFSPEC_MAX_NEW=6 \
        SELFSPEC_BENCH_ARGS="--prompts 1 --prompt-len 8 --gen 6 --reps 1" \
        sbatch --parsable --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
        --time=00:10:00 --output="$work/slurm-%j.out" "$repo/scripts/slurm/tp16_two_nodes.sbatch" \
        2> "$work/sbatch.log") || mn_fail "sbatch refused tp16_two_nodes.sbatch"
jobid=${jobid%%;*}
[ -n "$jobid" ] || mn_fail "sbatch printed no job id"
log "submitted tp16_two_nodes.sbatch (2 nodes x 2 ranks, 70B geometry) as job $jobid"
mn_wait_job "$jobid" 400
results=$work/results/selfspec-tp16-$jobid
cp "$work/slurm-$jobid.out" "$work/job.out" 2> /dev/null || true
[ "$job_state" = COMPLETED ] || mn_fail "job $jobid: $job_state (see $results)"
grep -q '"status":"ok"' "$results/job.json" || mn_fail "job.json: status not ok"
grep -q '"tokens_identical":true' "$results/lossless.json" ||
  mn_fail "self-speculative tokens differ from autoregressive ones"
grep -q '"num_nodes":2' "$results/job.json" || mn_fail "job.json: not 2 nodes"
for r in 0 1 2 3; do
  node=ssnode$((r / 2 + 1))
  grep -q "start \[rank $r/4 $node\]" "$results/generate_autoregressive.log" ||
    mn_fail "job $jobid: no start line of rank $r on $node"
done
two_nodes=$(mn_tokens "$results/generate_autoregressive.json")
timeout 300 srun --mpi=pmix --kill-on-bad-exit=1 --overcommit --nodes=1 --ntasks=4 \
  "$bin" generate --config "$repo/$config" --tp 4 --threads 1 \
  --prompt-ids 1,450,4996,17354,338,263 --max-new-tokens 6 --ignore-eos --json --spec none \
  > "$work/70b-1x4.out" 2> "$work/70b-1x4.log" || mn_fail "70B geometry on one node failed"
one_node=$(mn_tokens "$work/70b-1x4.out")
[ -n "$two_nodes" ] && [ "$two_nodes" = "$one_node" ] ||
  mn_fail "70B geometry TP 4: 2 nodes gave '$two_nodes', 1 node '$one_node'"
log "PASS: tp16_two_nodes.sbatch on 2 nodes x 2 ranks COMPLETED, lossless, tokens" \
    "$two_nodes identical to 1 node x 4"
