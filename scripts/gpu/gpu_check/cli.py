"""check.sh's command line: the options, and the run from the first report to the exit code."""

import argparse
import os
import shlex
import signal
import sys

from .checker import Checker, progress
from .plan import run_build_steps, run_gpu_checks
from .programs import kill_group
from .repo import REPO
from .verdict import EXIT_NO_DEVICE, EXIT_USAGE, RESULTS, verdict


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
