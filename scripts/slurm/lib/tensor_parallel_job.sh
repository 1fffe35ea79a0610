# shellcheck shell=bash disable=SC2154  # bin, out, srun_mpi, ...: set by job_common.sh
# The body of tp8_single_node.sbatch and tp16_two_nodes.sbatch (sourced after their #SBATCH
# headers, which decide the allocation): tensor parallelism over all the job's tasks.
#
# Steps (each `srun --mpi=pmix --kill-on-bad-exit=1` over every task, --tp = the task count):
#   0. `selfspec plan` on the batch node: a model that does not split over the ranks, or does not
#      fit this node's GPUs, is refused before any rank starts                  -> plan.json
#   1. greedy generation, autoregressive (`--spec none`)          -> generate_autoregressive.json
#   2. greedy generation, self-speculative (`--spec layer-skip`)   -> generate_speculative.json
#      (+ trace.jsonl); greedy self-speculative decoding is lossless, so the tokens of 1 and 2
#      must be identical: the job FAILS otherwise (lossless.json);
#   3. `selfspec bench`: autoregressive vs self-speculative side by side on the same prompts
#      -> bench.json, and bench.jsonl (one line per finished run, kept if the job is cut short)
# The generate records also go to results.jsonl as they finish. job.json records the job.
#
# Environment (the script header lists the required ones):
#   SELFSPEC_CONFIG        run config (configs/runs/*.yaml): model architecture, dtype, context,
#                          decoding method and hyperparameters
#   SELFSPEC_MODEL         HuggingFace checkpoint directory (replaces the config's architecture;
#                          without it the config runs on synthetic weights)
#   SELFSPEC_BIN           selfspec binary       (default: $SLURM_SUBMIT_DIR/build/bin/selfspec)
#   SELFSPEC_HOME          repository            (default: $SLURM_SUBMIT_DIR)
#   SELFSPEC_RESULTS       results root          (default: results, relative to the submit dir)
#   SELFSPEC_SKIP_CONFIG   skip set file (configs/skips/*.yaml) \ default: the config's skip set,
#   SELFSPEC_SKIP_UNIFORM  fraction of sublayers skipped         / or uniform 0.5 without config
#   SELFSPEC_CONTROLLER    draft-length controller of step 2 (default: the config's, else
#                          thompson); SELFSPEC_BENCH_CONTROLLERS those of step 3 (adaptive,thompson)
#   SELFSPEC_PROMPT_IDS    prompt token ids      (default 1,450,4996,17354,338,263)
#   SELFSPEC_MAX_NEW       tokens to generate    (default 256)
#   SELFSPEC_BENCH_ARGS    `selfspec bench` arguments (default: --prompts 4 --prompt-len 128
#                          --gen 128)
#   SELFSPEC_EXTRA_ARGS    extra arguments for every generate/bench run (e.g. --weights-dtype bf16)

selfspec_job_init
selfspec_model_args
ranks=${SLURM_NTASKS:?}
echo "selfspec: job $SLURM_JOB_ID, tp $ranks on ${SLURM_JOB_NODELIST:-?} (${SLURM_JOB_NUM_NODES:-1}" \
  "node(s)), model ${model_name}; results in $out"

skips=()
if [ -n "${SELFSPEC_SKIP_CONFIG:-}" ]; then
  skips=(--skip-config "$SELFSPEC_SKIP_CONFIG")
elif [ -n "${SELFSPEC_SKIP_UNIFORM:-}" ]; then
  skips=(--skip-uniform "$SELFSPEC_SKIP_UNIFORM")
elif [ -z "${SELFSPEC_CONFIG:-}" ]; then
  skips=(--skip-uniform 0.5)
fi
controller=()
if [ -n "${SELFSPEC_CONTROLLER:-}" ]; then
  controller=(--controller "$SELFSPEC_CONTROLLER")
elif [ -z "${SELFSPEC_CONFIG:-}" ]; then
  controller=(--controller thompson)
fi
read -r -a extra <<< "${SELFSPEC_EXTRA_ARGS:-}"
read -r -a bench_args <<< "${SELFSPEC_BENCH_ARGS:---prompts 4 --prompt-len 128 --gen 128}"
common=("${model_args[@]}" --tp "$ranks" "${threads[@]}" "${extra[@]}")
prompt=(--prompt-ids "${SELFSPEC_PROMPT_IDS:-1,450,4996,17354,338,263}"
        --max-new-tokens "${SELFSPEC_MAX_NEW:-256}" --ignore-eos --json
        --out-jsonl "$out/results.jsonl")

failed=()
not_run=()
step() {  # step NAME CMD...: run_step, recording NAME as failed or (after SIGTERM) not run
  if [ "$interrupted" -eq 1 ]; then not_run+=("$1"); return 0; fi
  if ! run_step "$@"; then
    failed+=("$1")
    echo "step $1 failed (see $out/$1.log)" >&2
  elif [[ $1 == generate_* ]]; then
    tail -n 1 "$out/$1.out" > "$out/$1.json"
  fi
}

started=$(date -Is)
selfspec_plan "$ranks" || exit 1
step generate_autoregressive "${srun_mpi[@]}" --ntasks="$ranks" "$bin" generate "${common[@]}" \
  "${prompt[@]}" --spec none
step generate_speculative "${srun_mpi[@]}" --ntasks="$ranks" "$bin" generate "${common[@]}" \
  "${prompt[@]}" --spec layer-skip "${skips[@]}" "${controller[@]}" --trace "$out/trace.jsonl"
step bench "${srun_mpi[@]}" --ntasks="$ranks" "$bin" bench "${common[@]}" "${bench_args[@]}" \
  --spec layer-skip "${skips[@]}" --controller "${SELFSPEC_BENCH_CONTROLLERS:-adaptive,thompson}" \
  --json --out "$out/bench.json" --out-jsonl "$out/bench.jsonl"

# Greedy self-speculative decoding must reproduce autoregressive decoding token for token.
lossless=null
if [ -s "$out/generate_autoregressive.json" ] && [ -s "$out/generate_speculative.json" ]; then
  ar=$(grep -o '"tokens":\[[0-9,]*\]' "$out/generate_autoregressive.json" || true)
  sp=$(grep -o '"tokens":\[[0-9,]*\]' "$out/generate_speculative.json" || true)
  if [ -n "$ar" ] && [ "$ar" = "$sp" ]; then lossless=true; else lossless=false; fi
  echo "{\"tokens_identical\":$lossless}" > "$out/lossless.json"
  if [ "$lossless" = false ]; then
    echo "error: self-speculative tokens differ from autoregressive tokens" >&2
    failed+=(lossless)
  fi
fi

status=ok
[ ${#failed[@]} -eq 0 ] || status=failed
[ "$interrupted" -eq 0 ] || status=interrupted
cat > "$out/job.json" <<JSON
{"job_id":"$SLURM_JOB_ID","job_name":"$SLURM_JOB_NAME","nodes":"${SLURM_JOB_NODELIST:-}","num_nodes":${SLURM_JOB_NUM_NODES:-1},"tp":$ranks,"model":$(json_string "$model_name"),"binary":$(json_string "$bin"),"started":"$started","finished":"$(date -Is)","status":"$status","failed_steps":$(json_list "${failed[@]}"),"not_run_steps":$(json_list "${not_run[@]}"),"greedy_tokens_identical":$lossless}
JSON
echo "$status; results in $out"
[ "$status" = ok ]
