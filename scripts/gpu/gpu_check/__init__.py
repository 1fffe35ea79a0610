"""The GPU check's parts (scripts/gpu/check.py, run by scripts/gpu/check.sh).

  cli              the command line and the run from the first report to the exit code
  plan             the steps in order, with their titles and time bounds
  checker          the run's state and the step runner (skipped, not run, passed, failed, info)
  step             one step: its bounded commands, log, figures and notes
  budget           the time budget of the whole run
  verdict          the exit codes and the verdict from the steps
  report           check.json (and check.md through markdown), rewritten after every step
  markdown         check.md
  environment      the environment step: machine, tools, PyTorch, NCCL, GPU, commit
    tools, device, nccl, pythons   what it finds and how
  kit, configure, build, link_check   the build steps
  ctest_groups     ctest -L gpu in groups, riskiest first (ctest_results reads the outcomes)
  generate_checks  selfspec generate: graphs on == off, speculative == autoregressive, GPU vs CPU
    generate       the models and the runs they share
  benches          the decode bench, cuda_kernel_bench, nccl_bench
  programs, logs, repo   finding and running programs, step logs, the repository's path
"""
