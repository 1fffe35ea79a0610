"""check.sh's command line and the run from the first report to the exit code: the options, the
steps in order (the environment, the kit, configure, build and link check, then the GPU checks
riskiest first), each with its title and time bound, and the verdict."""

import argparse
import os
import shlex
import signal
import sys
from functools import partial

from .build import step_build, step_configure, step_kit, step_link_check
from .checks import (CTEST_GROUPS, CTEST_REST, PDL_OFF_PATTERN, TENSOR_CORES_PATTERN,
                     rest_pattern, run_ctest_group, step_cli_cpu_vs_gpu, step_cli_graphs,
                     step_cli_speculative, step_decode_bench, step_kernel_bench, step_nccl_bench,
                     step_planted_demo)
from .machine import REPO, kill_group, step_environment
from .profile import step_ncu_decode, step_ncu_gemv, step_sanitizer
from .report import EXIT_NO_DEVICE, EXIT_USAGE, RESULTS, verdict
from .runner import Checker, progress, unrun_record

# ---- the command line ----

def argument_parser():
    p = argparse.ArgumentParser(
        prog="scripts/gpu/check.sh",
        description="Builds selfspec from the kit and runs the GPU checks; writes "
                    "OUTDIR/check.json and OUTDIR/check.md.",
        epilog="Exit status: 0 passed, 1 a check failed, 2 bad arguments, 3 no device, "
               "4 kit/configure/build failed, 5 incomplete (time budget spent).")
    p.add_argument("outdir", help="folder for the reports (created)")
    p.add_argument("--kit", default=os.environ.get("SELFSPEC_GPU_KIT",
                                                   os.path.join(REPO, ".gpu-kit")),
                   help="the kit folder of scripts/gpu/pack.sh (default: $SELFSPEC_GPU_KIT or "
                        "<repo>/.gpu-kit)")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build-gpu"),
                   help="build folder (default <repo>/build-gpu; kept, so a rerun is "
                        "incremental)")
    p.add_argument("--budget", type=float, default=540.0,
                   help="seconds for the whole run; steps that would start later are reported "
                        "'not run' (default 540)")
    p.add_argument("--build-timeout", type=float, default=420.0,
                   help="bound of the build step in seconds (default 420)")
    p.add_argument("--jobs", type=int, default=0, help="build jobs (default: all CPUs)")
    p.add_argument("--cuda-arch", default="",
                   help="CMAKE_CUDA_ARCHITECTURES (default: the GPU's compute capability from "
                        "nvidia-smi, else 90)")
    p.add_argument("--nccl-include", default="", help="folder of nccl.h (with --nccl-library)")
    p.add_argument("--nccl-library", default="", help="libnccl.so* file (with --nccl-include)")
    p.add_argument("--cmake-arg", action="append", default=[],
                   help="extra CMake argument, after check.sh's own (repeatable)")
    p.add_argument("--all-targets", action="store_true",
                   help="build every target, not only those the checks run")
    p.add_argument("--no-build", action="store_true",
                   help="skip kit, configure and build: use the programs already in --build-dir")
    p.add_argument("--steps", default="",
                   help="comma-separated step names or prefixes to run (environment, kit, "
                        "configure, build and link_check always run); e.g. ctest_,bench_")
    return p


def parse_args(argv):
    p = argument_parser()
    args = p.parse_args(argv)
    extra = os.environ.get("SELFSPEC_CHECK_CMAKE_ARGS", "")
    args.cmake_arg = shlex.split(extra) + args.cmake_arg
    if args.budget <= 0 or args.build_timeout <= 0:
        p.error("--budget and --build-timeout must be positive")
    return args


def stop_on_signals(c):
    """SIGTERM and SIGINT stop the running program, leave a report and exit with 128 + signal."""
    def on_signal(signum, frame):
        if c.current is not None:
            kill_group(c.current)
        progress(f"stopped by signal {signum} during {c.running_step}")
        c.write_reports()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def announce(c):
    """Tells the verdict on stderr; its exit code."""
    code, summary = c.final
    stream = sys.stderr
    stream.write(f"check.sh: {RESULTS[code]} (exit {code}): {summary}\n"
                 f"check.sh: reports in {os.path.join(c.outdir, 'check.md')} and check.json\n")
    if code == EXIT_NO_DEVICE:
        stream.write("check.sh: no device - nothing was checked on a GPU; this is not a pass\n")
    return code


def main(argv):
    try:
        args = parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code not in (0, None) else 0
    c = Checker(args)
    stop_on_signals(c)
    c.write_reports()
    run_build_steps(c)
    run_gpu_checks(c)
    c.final = verdict(c)
    c.write_reports()
    return announce(c)


# ---- the plan ----
# The steps of a run, in order, each with its title and time bound: the environment, the kit,
# configure, build and link check (whatever --steps says), then the GPU checks riskiest first.

def run_build_steps(c):
    """The environment and the build: a failure of the kit, configure, build or link check marks
    the build failed (exit 4), and the GPU checks do not run."""
    selection = c.selected
    c.selected = None  # the environment and build steps run whatever --steps says
    c.step("environment", "machine, tools, versions, GPU (nvidia-smi), PyTorch, NCCL", 120,
           partial(step_environment, c), info=True)
    if c.args.no_build:
        for name in ("kit", "configure", "build"):
            c.steps.append(unrun_record(name, name, "skipped", "--no-build"))
    else:
        c.step("kit", "verify and unpack the kit", 180, partial(step_kit, c), fatal=True)
        if not c.build_failed:
            c.step("configure", "cmake against the kit (SELFSPEC_MPI=OFF)", 240,
                   partial(step_configure, c), fatal=True)
        if not c.build_failed:
            c.step("build", "build the programs the checks run", c.args.build_timeout,
                   partial(step_build, c), fatal=True)
    if not c.build_failed:
        c.step("link_check", "every built program finds its libraries (ldd)", 60,
               partial(step_link_check, c), fatal=True)
    c.selected = selection


def gpu_checks(c):
    """[(name, title, bound in s, fn(step), info)]: the GPU checks, riskiest first."""
    checks = [(name, title, 150, partial(run_ctest_group, c, include=regex), False)
              for name, title, regex in CTEST_GROUPS]
    checks.append((CTEST_REST[0], CTEST_REST[1], 240,
                   partial(run_ctest_group, c, exclude=rest_pattern()), False))
    checks += [
        ("ctest_pdl_off", "the invariance, graph and lossless groups again with programmatic "
         "dependent launch off (SELFSPEC_CUDA_PDL=0)", 120,
         partial(run_ctest_group, c, include=PDL_OFF_PATTERN, env={"SELFSPEC_CUDA_PDL": "0"}),
         False),
        ("ctest_tensor_cores", "the invariance, backend, graph and lossless groups again with "
         "the bf16 GEMVs on the tensor cores and the models' fused forms "
         "(SELFSPEC_CUDA_GEMV=tensor-cores)", 120,
         partial(run_ctest_group, c, include=TENSOR_CORES_PATTERN,
                 env={"SELFSPEC_CUDA_GEMV": "tensor-cores"}),
         False),
        ("cli_graph_replay", "selfspec generate: CUDA graphs on == off (tokens)", 150,
         partial(step_cli_graphs, c), False),
        ("cli_speculative", "selfspec generate: speculative greedy == autoregressive on the GPU",
         150, partial(step_cli_speculative, c), False),
        ("cli_cpu_vs_gpu", "selfspec generate: GPU vs CPU greedy tokens (information)", 120,
         partial(step_cli_cpu_vs_gpu, c), True),
        ("bench_7b_graphs_on", "decode bench, LLaMA-2-7B geometry, bf16, CUDA graphs on; "
         "v(gamma) for gamma = 1 .. 15", 200,
         partial(step_decode_bench, c, graphs="on", verify_cost_max=15), False),
        ("bench_7b_unfused", "the same decode bench without the norm and residual add folded "
         "into the GEMVs (SELFSPEC_CUDA_FUSE=0): the fusion's gain; v(gamma) 1 .. 8", 150,
         partial(step_decode_bench, c, graphs="on", verify_cost_max=8, fuse=False), False),
        ("bench_7b_gemv_tensor_cores", "the same decode bench with the bf16 GEMVs on the tensor "
         "cores and the fused forms (SELFSPEC_CUDA_GEMV=tensor-cores); v(gamma) 1 .. 8",
         150, partial(step_decode_bench, c, graphs="on", verify_cost_max=8, gemv="tensor-cores"),
         False),
        ("bench_7b_q4k", "decode bench, LLaMA-2-7B geometry, synthetic Q4_K run as stored, "
         "graphs on; v(gamma) for gamma = 1 .. 8", 150,
         partial(step_decode_bench, c, graphs="on", verify_cost_max=8, weights="q4_k"), False),
        ("planted_demo", "the demo's planted model on the GPU: self-speculative vs autoregressive "
         "(adaptive, Thompson)", 150, partial(step_planted_demo, c), False),
        ("kernel_bench", "cuda_kernel_bench (GB/s, TFLOP/s against the device peak)", 180,
         partial(step_kernel_bench, c), False),
        ("ncu_decode", "ncu --cache-control none: time per kernel of a 7B decode step", 150,
         partial(step_ncu_decode, c), False),
        ("ncu_gemv", "ncu: stall reasons, memory workload and occupancy of the GEMVs "
         "(bf16 on CUDA cores; tensor cores: ring, ping-pong, bulk; Q4_K row tiles) at "
         "4096 x 4096, T = 1", 140,
         partial(step_ncu_gemv, c), True),
        ("bench_qwen_1p5b", "decode bench, Qwen2.5-Coder-1.5B geometry, bf16, graphs on; "
         "v(gamma) for gamma = 1 .. 8 (the GPU costs for eq. 6)", 120,
         partial(step_decode_bench, c, graphs="on", verify_cost_max=8,
                 model="qwen2.5-coder-1.5b"), False),
        ("bench_7b_pdl_off", "decode bench, graphs on, programmatic dependent launch off", 120,
         partial(step_decode_bench, c, graphs="on", pdl=False, verify_cost_max=8), False),
        ("sanitizer", "compute-sanitizer memcheck, synccheck, racecheck on the kernel tests", 150,
         partial(step_sanitizer, c), False),
        ("bench_70b_q4k", "decode bench, LLaMA-2-70B geometry, synthetic Q4_K run as stored, on "
         "one GPU", 200,
         partial(step_decode_bench, c, graphs="on", verify_cost_max=0, model="llama-2-70b",
                 weights="q4_k", gen=32, reps=1), False),
        ("ncu_decode_q4k", "ncu --cache-control none: time per kernel of a 7B decode step with "
         "synthetic Q4_K weights run as stored", 150,
         partial(step_ncu_decode, c, weights="q4_k"), True),
        ("bench_7b_graphs_off", "decode bench, LLaMA-2-7B geometry, bf16, CUDA graphs off", 120,
         partial(step_decode_bench, c, graphs="off", verify_cost_max=0), False),
        ("bench_7b_ctx4k_kv_bf16", "decode bench, LLaMA-2-7B geometry, bf16, 4000-token context, "
         "bf16 KV cache", 90,
         partial(step_decode_bench, c, graphs="on", verify_cost_max=0, gen=32, reps=1,
                 kv_dtype="bf16", prompt_len=4000), False),
        ("bench_7b_ctx4k_kv_f32", "the same with the f32 KV cache (the bf16 cache's gain)", 90,
         partial(step_decode_bench, c, graphs="on", verify_cost_max=0, gen=32, reps=1,
                 kv_dtype="f32", prompt_len=4000), False),
        ("nccl_bench", "nccl_bench, one rank (all-reduce latency at decode sizes)", 60,
         partial(step_nccl_bench, c), False),
    ]
    return checks


def run_gpu_checks(c):
    """Each GPU check, as far as --steps, the device, the build and the budget let it."""
    if not c.build_failed and not c.device["present"]:
        progress("no device: " + c.device.get("how", "") + " - the GPU checks do not run")
    for name, title, bound, fn, info in gpu_checks(c):
        c.step(name, title, bound, fn, info=info, needs_device=True)
