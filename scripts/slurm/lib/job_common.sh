# shellcheck shell=bash disable=SC2034  # the variables set here are used by the scripts that source it
# What the job scripts in scripts/slurm/ share; sourced by them (never run on its own):
#
#   source "${SELFSPEC_HOME:-$SLURM_SUBMIT_DIR}/scripts/slurm/lib/job_common.sh"
#
# (sbatch runs a copy of the batch script from its spool directory, so the library is found
# through the repository: the submit directory, or SELFSPEC_HOME.)
#
#   selfspec_job_init          binary, results directory ${SELFSPEC_RESULTS:-results}/<name>-<id>/,
#                              the SIGTERM trap, srun flags, threads per rank
#   selfspec_model_args        the model options from SELFSPEC_CONFIG and/or SELFSPEC_MODEL
#   selfspec_plan TP [NAME]    `selfspec plan` on the batch node, in seconds: can the model be
#                              split over TP ranks, does it fit the GPUs
#   run_step NAME CMD...       runs a step so that the trap can stop it; NAME.out / NAME.log
#   json_string, json_list     JSON helpers for the job's own summary files
#
# Conventions (scripts/slurm/README.md): `srun --mpi=pmix --kill-on-bad-exit=1` for every
# parallel step; `--signal=B:TERM@120` sends SIGTERM to the batch shell 120 s before the time
# limit (and on preemption): the trap passes it on to the ranks of the running step (scancel
# --signal=TERM) — they stop at the next decoding step and write what they finished — starts no
# further step, and the script still writes its summary.

selfspec_job_init() {
  : "${SLURM_JOB_ID:?this is a Slurm batch script: submit it with sbatch}"
  repo=${SELFSPEC_HOME:-$SLURM_SUBMIT_DIR}
  bin=${SELFSPEC_BIN:-$repo/build/bin/selfspec}
  if [ ! -x "$bin" ]; then
    echo "error: selfspec binary '$bin' not found or not executable (build it, or set SELFSPEC_BIN)" >&2
    exit 1
  fi
  local results_root=${SELFSPEC_RESULTS:-results}
  case "$results_root" in /*) ;; *) results_root=$SLURM_SUBMIT_DIR/$results_root ;; esac
  out=$results_root/${SLURM_JOB_NAME}-${SLURM_JOB_ID}
  mkdir -p "$out"
  # Open MPI's shared-memory transport otherwise tries cross-memory attach (process_vm_readv),
  # which containers often forbid.
  export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}

  interrupted=0
  step_pid=
  trap selfspec_on_term TERM INT

  srun_mpi=(srun --mpi=pmix --kill-on-bad-exit=1)
  threads=()
  if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then
    # Slurm 22.05's srun no longer inherits --cpus-per-task from the job: pass it on.
    srun_mpi+=(--cpus-per-task="$SLURM_CPUS_PER_TASK")
    threads=(--threads "$SLURM_CPUS_PER_TASK")
  fi
}

selfspec_on_term() {
  interrupted=1
  echo "$(date -Is) SIGTERM: time limit or preemption; stopping the current step" >&2
  [ -n "$step_pid" ] || return 0
  # Signal the ranks themselves (every step of the job; not this batch shell): srun answers a
  # SIGTERM of its own by killing its step with SIGKILL, which would give the ranks no chance to
  # stop at a step boundary and write what they finished.
  scancel --signal=TERM "$SLURM_JOB_ID" 2>/dev/null || kill -TERM "$step_pid" 2>/dev/null || true
}

# run_step NAME CMD...: CMD in the background with stdout in NAME.out and stderr in NAME.log
# (bash runs traps only between commands, so a foreground srun would delay the trap until it
# ended); waits for it and returns its exit status. Returns 143 without running after SIGTERM.
run_step() {
  local name=$1 rc=0
  shift
  [ "$interrupted" -eq 0 ] || return 143
  echo "$(date -Is) step $name: $*"
  echo "+ $*" > "$out/$name.log"
  "$@" > "$out/$name.out" 2>> "$out/$name.log" &
  step_pid=$!
  while :; do
    wait "$step_pid" && rc=0 || rc=$?
    # A trapped signal interrupts `wait` (status > 128) while the step still runs: wait again.
    kill -0 "$step_pid" 2>/dev/null || break
  done
  step_pid=
  return "$rc"
}

# selfspec_model_args: model_args=(--config RUN.yaml) and/or (--model DIR).
#   SELFSPEC_CONFIG  a run config (configs/runs/*.yaml): architecture, dtype, context, decoding
#                    method and hyperparameters; relative to the submit directory, else to the
#                    repository
#   SELFSPEC_MODEL   a HuggingFace checkpoint directory; replaces the config's architecture
# With a config and no model the config's architecture runs on synthetic weights: a dry run of
# the deployment (sharding, memory, collectives, speed) without the checkpoint.
selfspec_model_args() {
  model_args=()
  model_name=
  if [ -n "${SELFSPEC_CONFIG:-}" ]; then
    local config=$SELFSPEC_CONFIG
    case "$config" in
      /*) ;;
      *) if [ -f "$SLURM_SUBMIT_DIR/$config" ]; then config=$SLURM_SUBMIT_DIR/$config; else config=$repo/$config; fi ;;
    esac
    if [ ! -f "$config" ]; then
      echo "error: SELFSPEC_CONFIG=$SELFSPEC_CONFIG: no such run config" >&2
      exit 1
    fi
    model_args+=(--config "$config")
    model_name=$config
  fi
  if [ -n "${SELFSPEC_MODEL:-}" ]; then
    if [ ! -f "$SELFSPEC_MODEL/config.json" ]; then
      echo "error: SELFSPEC_MODEL=$SELFSPEC_MODEL has no config.json (not a model directory)" >&2
      exit 1
    fi
    model_args+=(--model "$SELFSPEC_MODEL")
    model_name=$SELFSPEC_MODEL
  elif [ -n "${SELFSPEC_CONFIG:-}" ]; then
    echo "note: no SELFSPEC_MODEL: the run config's architecture runs with synthetic weights"
  else
    echo "error: set SELFSPEC_MODEL (a checkpoint directory) and/or SELFSPEC_CONFIG (a run" >&2
    echo "  config, e.g. configs/runs/llama-2-70b-tp8-draft-verify.yaml)" >&2
    exit 1
  fi
}

# The smallest GPU memory on this node in GB (10^9 bytes), or nothing without nvidia-smi.
gpu_memory_gb() {
  command -v nvidia-smi > /dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2> /dev/null |
    sort -n | head -n 1 | awk '{ if ($1 > 0) printf "%.1f", $1 * 1048576 / 1e9 }'
}

# selfspec_plan TP [NAME]: `selfspec plan` for TP ranks (against this node's GPU memory when
# nvidia-smi is there) into NAME.json (default plan). Returns selfspec's status: 0 fits, 2 the
# model cannot be split over TP ranks, 3 it does not fit; the reason goes to stderr.
selfspec_plan() {
  local tp=$1 name=${2:-plan} rc=0 memory
  local budget=()
  memory=$(gpu_memory_gb)
  [ -z "$memory" ] || budget=(--gpu-memory "$memory")
  "$bin" plan "${model_args[@]}" --tp "$tp" "${budget[@]}" --json > "$out/$name.out" \
    2> "$out/$name.log" || rc=$?
  tail -n 1 "$out/$name.out" > "$out/$name.json"
  case "$rc" in
    0) ;;
    2) echo "TP $tp: the model cannot be split over $tp ranks:" \
         "$(grep -o '"tp_reason":"[^"]*"' "$out/$name.json")" >&2 ;;
    3) echo "TP $tp: the model does not fit ${memory} GB GPUs (see $out/$name.json)" >&2 ;;
    *) echo "TP $tp: selfspec plan failed:" >&2; cat "$out/$name.log" >&2 ;;
  esac
  return "$rc"
}

json_string() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
json_list() {
  local list='' item
  for item in "$@"; do list+="${list:+,}$(json_string "$item")"; done
  echo "[$list]"
}
