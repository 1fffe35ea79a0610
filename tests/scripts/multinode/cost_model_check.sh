#!/usr/bin/env bash
# Checks `selfspec plan --comm-table`'s per-token latency prediction against measurement on the
# namespace cluster (tests/scripts/multinode/netns_cluster.sh), one transport at a time:
#
#   tests/scripts/multinode/cost_model_check.sh OUTDIR [BUILD_DIR]      (root; a few minutes)
#
# The same TP 2 job (a seeded synthetic model, 1 thread per rank) runs over:
#   shm         1 node x 2 ranks: Open MPI shared memory              (calibration, see below)
#   tcp         2 nodes x 1 rank: TCP over the veth bridge
#   tcp-50mbit  2 nodes x 1 rank: the link limited to 50 Mbit/s (tbf)
#   tcp-10mbit  2 nodes x 1 rank: the link limited to 10 Mbit/s (tbf)
# (netem delays are the other way to slow a link; kernels without sch_netem, such as this VM's,
# only allow rate limits, and a rate limit moves the all-reduce times just as well: what the
# model reads is the measured time per message size.)
# For each transport: comm_bench measures the collectives at this model's message sizes (the comm
# table, comm-<name>.json), `selfspec bench` measures autoregressive and self-speculative decoding
# (bench-<name>.json: ms per token, communication per token, acceptance α, draft length), and
# `selfspec plan --comm-table comm-<name>.json` predicts both (plan-<name>.json) with the run's K
# and the α that gives its measured tokens per round (cost_model_report.py says why). A transport
# measured before into the same OUTDIR is not measured again (delete its comm-/bench- files to
# redo it).
#
# Calibration: on a CPU the "weight streaming" term is really all of a forward's compute, which
# the memory bandwidth of a STREAM-like read overestimates. The shm run fixes it: effective
# bandwidth = weight bytes per rank / (measured ms per token - the shm table's communication).
# The shm row is therefore not a test of the model; the other transports are. The report
# (tests/scripts/multinode/cost_model_report.py) writes cost_model_check.json, report.md and
# cost_model.png to OUTDIR, with the error of each prediction (pass: within +-30 %).
set -euo pipefail
out=${1:?usage: $0 OUTDIR [BUILD_DIR]}
repo=$(cd -P "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=$(cd "${2:-$repo/build}" && pwd)
bin=$build/bin/selfspec
comm_bench=$build/bin/comm_bench
multinode=$repo/tests/scripts/multinode
cluster=$multinode/netns_cluster.sh
mkdir -p "$out"
out=$(cd "$out" && pwd)
for b in "$bin" "$comm_bench"; do [ -x "$b" ] || { echo "error: $b not built" >&2; exit 1; }; done
log() { echo "[cost-model-check] $*" >&2; }
# The report plots with matplotlib: Debian's python3-matplotlib (scripts/setup.sh).
python=${SELFSPEC_PYTHON:-/usr/bin/python3}

own_cluster=0
if [ ! -f /run/selfspec-netns-cluster/slurm.conf ]; then
  "$cluster" up "$out/cluster" 2 2
  own_cluster=1
fi
cleanup() {
  "$cluster" rate 2 off 2> /dev/null || true
  [ "$own_cluster" -eq 0 ] || "$cluster" down
}
trap cleanup EXIT
eval "$("$cluster" env)"
export SLURM_CONF OMPI_MCA_btl_vader_single_copy_mechanism=none

hidden=1024 vocab=8000
[ -d "$out/model" ] || "$bin" make-model --out "$out/model" --layers 8 --hidden $hidden \
  --heads 16 --kv-heads 4 --intermediate 2816 --vocab $vocab --seed 11 > /dev/null
skip=0.5 max_draft=4
bench_args=(bench --model "$out/model" --device cpu --threads 1 --tp 2 --prompt-len 16 --gen 32
            --reps 3 --bandwidth-mb 16 --spec layer-skip --skip-uniform $skip --controller fixed
            --max-draft $max_draft --json)

measure() {  # measure NAME NODES RATE (kept from an earlier run into the same OUTDIR)
  local name=$1 nodes=$2 rate=$3 layout
  if [ -s "$out/comm-$name.json" ] && [ -s "$out/bench-$name.json" ]; then
    log "$name: measured before (comm-$name.json, bench-$name.json): kept"
    return 0
  fi
  layout=(--mpi=pmix --kill-on-bad-exit=1 --overcommit --nodes="$nodes" --ntasks=2)
  [ "$nodes" -eq 1 ] || layout+=(--ntasks-per-node=1)
  "$cluster" rate 2 "$rate"
  log "$name: comm_bench"
  timeout 600 srun "${layout[@]}" "$comm_bench" --hidden $hidden --tokens 1,2,4,5,8,16 \
    --vocab $vocab --iters 100 --warmup 10 --no-memory --transport "$name" \
    --out "$out/comm-$name.json" > "$out/comm-$name.log" 2>&1
  log "$name: bench"
  timeout 900 srun "${layout[@]}" "$bin" "${bench_args[@]}" --out "$out/bench-$name.json" \
    > /dev/null 2> "$out/bench-$name.log"
  "$cluster" rate 2 off
}

measure shm 1 off
measure tcp 2 off
measure tcp-50mbit 2 50mbit
measure tcp-10mbit 2 10mbit

# The effective weight-streaming bandwidth from the shm run, then a prediction per transport.
read -r bandwidth_gbps alpha draft_len < <("$python" "$multinode/cost_model_report.py" \
  calibrate "$out" "$bin")
log "calibration (shm): effective bandwidth ${bandwidth_gbps} GB/s per rank; K ${draft_len}," \
    "α ${alpha} (measured tokens per round)"
for name in shm tcp tcp-50mbit tcp-10mbit; do
  "$bin" plan --model "$out/model" --tp 2 --comm-table "$out/comm-$name.json" \
    --memory-bandwidth "$bandwidth_gbps" --alpha "$alpha" --draft-len "$draft_len" \
    --skip-fraction $skip --json > "$out/plan-$name.json"
done
"$python" "$multinode/cost_model_report.py" report "$out" shm tcp tcp-50mbit tcp-10mbit
