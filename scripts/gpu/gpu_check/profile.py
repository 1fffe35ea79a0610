"""The profiling checks: ncu's time per kernel of a decode step (with --cache-control none, so that
each kernel reads its weights from HBM as it does in a real step, not from an L2 that ncu's replay
warmed), and compute-sanitizer's memcheck, racecheck and synccheck over the CUDA kernel tests."""

import os
import re

from .machine import REPO

# ---- ncu: time per kernel of a decode step ----

# A bench whose forwards are all one token (a 1-token prompt, then decode steps), eager, so that
# ncu times every kernel of a decode forward. The context stays short: attention is timed at
# realistic lengths by cuda_kernel_bench.
def ncu_bench(weights):
    """The bench's arguments, LLaMA-2-7B geometry, synthetic weights in `weights` (bf16, q4_k)."""
    return ["bench", "--architecture", os.path.join(REPO, "configs", "models", "llama-2-7b.yaml"),
            "--weights-dtype", weights, "--device", "cuda", "--cuda-graphs", "off",
            "--prompt-len", "1", "--gen", "4", "--reps", "1", "--verify-cost-rounds", "0"]

SUMMARY_HEAD = re.compile(r"\s+(.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Device \d+, "
                          r"CC [\d.]+, Invocations (\d+)")


def short_kernel_name(name):
    """The kernel's name without its parameter list, return type and namespaces. ncu prints an
    anonymous namespace as `selfspec::<unnamed>::`, `(anonymous namespace)::` or, in newer
    versions, a bare `unnamed>::` (inside template arguments too: `f<unnamed>::T, 1>`)."""
    name = re.sub(r"\(.*", "", name).replace("void ", "")
    name = name.replace("::<unnamed>::", "::").replace("(anonymous namespace)::", "")
    name = re.sub(r"^<unnamed>::", "", name).replace("unnamed>::", "")
    return re.sub(r"selfspec::|kernels::cuda::|_GLOBAL__N__\w+::", "", name)


def parse_ncu_summary(text):
    """[{kernel, grid, block, invocations, mean_us}] of `ncu --print-summary per-kernel` output
    with the gpu__time_duration.sum metric (ns or us, as ncu prints its unit)."""
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines):
        m = SUMMARY_HEAD.match(line)
        if not m:
            continue
        metric = next((l for l in lines[i + 1:i + 10] if "gpu__time_duration.sum" in l), None)
        if metric is None:
            continue
        fields = metric.split()
        try:
            value = float(fields[-1].replace(",", ""))
        except ValueError:
            continue
        unit = next((f for f in fields if f in ("ns", "usecond", "us", "msecond", "ms", "nsecond")),
                    "ns")
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
                 "msecond": 1e3}[unit]
        rows.append({"kernel": short_kernel_name(m.group(1)),
                     "grid": int(m.group(2)) * int(m.group(3)) * int(m.group(4)),
                     "block": int(m.group(5)) * int(m.group(6)) * int(m.group(7)),
                     "invocations": int(m.group(8)),
                     "mean_us": value * scale})
    return rows


def per_forward_table(rows):
    """(forwards, [{kernel, grid, block, launches_per_forward, mean_us, us_per_forward}] sorted by
    time): every forward runs the embedding once, so its invocations count the forwards."""
    forwards = sum(r["invocations"] for r in rows if r["kernel"].startswith("embedding_kernel"))
    if forwards == 0:
        return 0, []
    table = []
    for r in rows:
        table.append({"kernel": r["kernel"], "grid": r["grid"], "block": r["block"],
                      "launches_per_forward": round(r["invocations"] / forwards, 2),
                      "mean_us": round(r["mean_us"], 2),
                      "us_per_forward": round(r["mean_us"] * r["invocations"] / forwards, 1)})
    table.sort(key=lambda r: -r["us_per_forward"])
    return forwards, table


def step_ncu_decode(c, s, weights="bf16"):
    """ncu's time per kernel of one-token forwards with `weights` (bf16: raw/ncu-decode.log; a
    quantized format: raw/ncu-decode-<weights>.log)."""
    ncu = c.tools.get("ncu")
    if not ncu:
        s.fail("no ncu found (PATH, beside nvcc, /usr/local/cuda*/bin)")
        return
    args = [ncu, "--cache-control", "none", "--clock-control", "none", "--metrics",
            "gpu__time_duration.sum", "--print-summary", "per-kernel", c.program("selfspec")]
    rc, out = s.run(args + ncu_bench(weights), capture=True)
    log = "ncu-decode.log" if weights == "bf16" else f"ncu-decode-{weights}.log"
    with open(os.path.join(c.outdir, "raw", log), "w") as f:
        f.write(out)
    if rc != 0:
        s.fail(f"ncu exited with {rc}")
    forwards, table = per_forward_table(parse_ncu_summary(out))
    if not table:
        s.fail(f"no per-kernel summary in ncu's output (raw/{log})")
        return
    s.figures["weights"] = weights
    s.figures["forwards"] = forwards
    s.figures["us_per_forward"] = round(sum(r["us_per_forward"] for r in table), 1)
    s.figures["kernels"] = table


# ---- ncu's diagnosis of the bf16 GEMVs ----

# One launch each of the CUDA-core GEMV, the tensor-core GEMV (ring, ping-pong, bulk) and the
# quantized GEMV (Q4_K, row tiles) at 4096 x 4096, T = 1, from cuda_kernel_bench: why the
# tensor-core GEMV streamed 1.9 TB/s where the CUDA-core one streamed 2.6, and Q4_K 0.6
# (2026-11-29): warp stall reasons, memory workload, occupancy.
NCU_GEMV_SECTIONS = ["SpeedOfLight", "MemoryWorkloadAnalysis", "WarpStateStats", "Occupancy",
                     "LaunchStats", "SchedulerStats"]

def step_ncu_gemv(c, s):
    ncu = c.tools.get("ncu")
    if not ncu:
        s.fail("no ncu found (PATH, beside nvcc, /usr/local/cuda*/bin)")
        return
    args = [ncu, "--cache-control", "none", "--clock-control", "none",
            "-k", "regex:gemv|matmul", "--launch-skip", "2", "--launch-count", "1"]
    for section in NCU_GEMV_SECTIONS:
        args += ["--section", section]
    logs = {}
    for label, bench in (("cuda_cores", "matmul_small_batch/bf16/4096x4096/T:1/"),
                         ("tensor_ring", "tensor_pipeline/ring/bf16/4096x4096/T:1/"),
                         ("tensor_ping_pong", "tensor_pipeline/ping_pong/bf16/4096x4096/T:1/"),
                         ("tensor_bulk", "tensor_pipeline/bulk/bf16/4096x4096/T:1/"),
                         ("quant_q4_k", "quant_matmul/q4_k/4096x4096/T:1/")):
        rc, out = s.run(args + [c.program("cuda_kernel_bench"), f"--benchmark_filter={bench}",
                                "--benchmark_min_time=0.01"],
                        capture=True, env={"SELFSPEC_BENCH_POOL_MB": "256"},
                        timeout=max(20.0, s.left() / 3))
        path = os.path.join(c.outdir, "raw", f"ncu-gemv-{label}.log")
        with open(path, "w") as f:
            f.write(out)
        logs[label] = {"exit": rc, "log": os.path.basename(path)}
        if rc != 0:
            s.fail(f"ncu on {label} exited with {rc}")
    s.figures["gemv_profiles"] = logs


# ---- compute-sanitizer over the kernel tests ----

# racecheck is slow: it runs over the kernels that share memory between threads of a block.
RACECHECK_FILTER = "CudaAttention.*:CudaRmsNorm.*:CudaAddRmsNorm.*:CudaWarpLogits.*"


def step_sanitizer(c, s):
    tool = c.tools.get("compute-sanitizer")
    if not tool:
        s.fail("no compute-sanitizer found (PATH, beside nvcc, /usr/local/cuda*/bin)")
        return
    program = c.program("cuda_kernels_test")
    results = {}
    for check, extra in (("memcheck", []), ("synccheck", []),
                         ("racecheck", [f"--gtest_filter={RACECHECK_FILTER}"])):
        rc, out = s.run([tool, "--tool", check, "--error-exitcode", "9", program,
                         "--gtest_brief=1"] + extra, capture=True, timeout=max(30.0, s.left() / 2))
        errors = re.search(r"ERROR SUMMARY: (\d+) error", out)
        results[check] = {"exit": rc, "errors": int(errors.group(1)) if errors else None}
        if rc == 124:
            s.note(f"{check} timed out")
        elif rc != 0:
            s.fail(f"{check}: exit {rc}, {results[check]['errors']} error(s)")
    s.figures["sanitizer"] = results
