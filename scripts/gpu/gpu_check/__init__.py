"""The GPU check's parts (scripts/gpu/check.py, run by scripts/gpu/check.sh).

  run      the command line, the steps in order with their titles and time bounds, and the run
           from the first report to the exit code
  runner   the run's state, its time budget and the step runner; one step's bounded commands,
           log, figures and notes (skipped, not run, passed, failed, info)
  machine  the environment step and what it finds (tools, Pythons, the GPU, NCCL, the commit);
           the repository's path and running other programs
  build    the build steps: kit, configure, build, link check
  checks   the GPU checks: ctest -L gpu in groups riskiest first (and again with programmatic
           dependent launch off), the selfspec generate comparisons, the decode bench (v(gamma),
           PDL on and off, graphs on and off), cuda_kernel_bench and nccl_bench
  profile  ncu's time per kernel of a decode step (--cache-control none) and compute-sanitizer
           over the kernel tests
  report   the exit codes and the verdict, check.json and check.md (rewritten after every
           step), the step logs
"""
