"""The steps of a run, in order, each with its title and time bound: the environment, the kit,
configure, build and link check (whatever --steps says), then the GPU checks riskiest first."""

from functools import partial

from .benches import step_decode_bench, step_kernel_bench, step_nccl_bench
from .build import step_build
from .checker import progress
from .configure import step_configure
from .ctest_groups import CTEST_GROUPS, CTEST_REST, rest_pattern, run_ctest_group
from .environment import step_environment
from .generate_checks import step_cli_cpu_vs_gpu, step_cli_graphs, step_cli_speculative
from .kit import step_kit
from .link_check import step_link_check
from .step import unrun_record


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
        ("cli_graph_replay", "selfspec generate: CUDA graphs on == off (tokens)", 150,
         partial(step_cli_graphs, c), False),
        ("cli_speculative", "selfspec generate: speculative greedy == autoregressive on the GPU",
         150, partial(step_cli_speculative, c), False),
        ("cli_cpu_vs_gpu", "selfspec generate: GPU vs CPU greedy tokens (information)", 120,
         partial(step_cli_cpu_vs_gpu, c), True),
        ("bench_7b_graphs_on", "decode bench, LLaMA-2-7B geometry, bf16, CUDA graphs on", 200,
         partial(step_decode_bench, c, graphs="on"), False),
        ("bench_7b_graphs_off", "decode bench, LLaMA-2-7B geometry, bf16, CUDA graphs off", 200,
         partial(step_decode_bench, c, graphs="off"), False),
        ("kernel_bench", "cuda_kernel_bench (GB/s, TFLOP/s against the device peak)", 180,
         partial(step_kernel_bench, c), False),
        ("nccl_bench", "nccl_bench, one rank (all-reduce latency at decode sizes)", 120,
         partial(step_nccl_bench, c), False),
    ]
    return checks


def run_gpu_checks(c):
    """Each GPU check, as far as --steps, the device, the build and the budget let it."""
    if not c.build_failed and not c.device["present"]:
        progress("no device: " + c.device.get("how", "") + " - the GPU checks do not run")
    for name, title, bound, fn, info in gpu_checks(c):
        c.step(name, title, bound, fn, info=info, needs_device=True)
