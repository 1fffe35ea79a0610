#!/usr/bin/env bash
# The first GPU run as one command. On the GPU machine (nvcc, CMake, ninja, Python with PyTorch
# and its NCCL; no apt, network or MPI), with the kit of scripts/gpu/pack.sh beside the sources:
#
#   scripts/gpu/check.sh OUTDIR [--kit DIR] [--build-dir DIR] [--budget S] [--steps LIST] ...
#
# builds selfspec from the kit (all CPUs, MPI off, CUDA arch of the GPU) into build-gpu/, then runs,
# each step under its own time bound and all within --budget (default 540 s): ctest -L gpu riskiest
# first (top-p tie cut, tree-mask attention, prefill workspace, speculative_accept, cuBLASLt,
# token-count invariance, backend vs CPU, graph replay, speculative losslessness, device-side
# verification, the rest);
# selfspec generate with CUDA graphs on vs off and speculative vs autoregressive on the GPU; the
# decode bench on a LLaMA-2-7B-geometry synthetic bf16 model with and without CUDA graphs; the
# CUDA kernel and NCCL benches; and records nvidia-smi, versions and the GPU. It writes
# OUTDIR/check.json and OUTDIR/check.md (rewritten after every step), step logs in OUTDIR/logs/
# and raw results in OUTDIR/raw/. `scripts/gpu/check.sh --help` lists the options.
#
# Exit status: 0 every check passed; 1 a check failed; 2 bad arguments; 3 no device (no GPU
# visible: the build was done and checked, nothing ran on a GPU - not a pass); 4 the kit,
# configuration or build failed; 5 incomplete (the time budget ran out first).
# The work is done by scripts/gpu/check.py (which lists the exit codes) and its package
# scripts/gpu/gpu_check/ (whose __init__.py maps the modules), run with the first Python 3 found
# ($SELFSPEC_PYTHON, python3 on PATH, PyTorch's /opt/torch/.venv/bin/python3, /usr/bin/python3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

python=""
for candidate in "${SELFSPEC_PYTHON:-}" "$(command -v python3 || true)" \
                 /opt/torch/.venv/bin/python3 /usr/bin/python3; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    python=$candidate
    break
  fi
done

if [ -z "$python" ]; then
  echo "check.sh: no Python 3 found (SELFSPEC_PYTHON, python3 on PATH," \
       "/opt/torch/.venv/bin/python3, /usr/bin/python3): it runs scripts/gpu/check.py" >&2
  # Still leave a report where one was asked for.
  outdir=${1:-}
  if [ -n "$outdir" ] && [ "${outdir#-}" = "$outdir" ]; then
    mkdir -p "$outdir"
    printf '{"schema": "selfspec-gpu-check/1", "result": "build failed", "exit_code": 4, %s}\n' \
      '"summary": "no Python 3 found to run scripts/gpu/check.py"' >"$outdir/check.json"
    printf '# selfspec GPU check: BUILD FAILED\n\n- exit code: 4 (no Python 3 found to run %s)\n' \
      'scripts/gpu/check.py' >"$outdir/check.md"
  fi
  exit 4
fi

exec "$python" "$here/check.py" "$@"
