"""The tables of docs/results/2026-11-29-gpu-tensor-core-gemv.md from the committed check reports,
bench JSON and ncu log beside this script; writes figures.json and prints the tables (markdown).

    python3 docs/results/2026-11-29-gpu-tensor-core-gemv/tables.py > /tmp/tables.md

Run 1 (check-1.*, raw-1/) was commit 1c5f899, where kAuto put bf16 on the tensor cores: its
`matmul_small_batch` kernel rows and its `bench_7b_graphs_on` decode are the tensor-core GEMV, and
`matmul_cuda_cores` / `bench_7b_gemv_cuda_cores` the CUDA-core one. Run 2 (check-2.*, raw-2/) reused
run 1's build for the steps run 1's budget left out. Run 3 (raw-3/) was commit d3e56f4: the GPU
tests of the pipelines and the fixed tests, and the pipeline benches.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts", "gpu"))
from gpu_check.profile import parse_ncu_summary  # noqa: E402  (the check's own ncu parser)


def load(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def table(rows, columns):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join("" if row.get(c) is None else str(row[c]) for c in columns)
                     + " |")
    return "\n".join(lines)


# ---- correctness ----

def test_rows():
    rows = []
    for step in load("check-1.json")["steps"]:
        figures = step.get("figures") or {}
        if not step["name"].startswith("ctest_") or "tests" not in figures:
            continue
        rows.append({"group": step["name"], "tests": figures.get("tests"),
                     "passed": figures.get("passed"), "failed": figures.get("failed", 0),
                     "skipped": figures.get("skipped", 0), "status": step["status"]})
    return rows


def run3_tests():
    """[{test, outcome}] of run 3's gtest log."""
    text = open(os.path.join(HERE, "raw-3", "tests.log")).read()
    rows = {}
    for outcome, name in re.findall(r"^\[ +(OK|FAILED) +\] (\S+)(?: \(|, where)", text, re.M):
        rows.setdefault(name, outcome)  # a failure is listed again in gtest's summary
    return [{"test": name, "outcome": outcome} for name, outcome in rows.items()]


# ---- decode ----

def decode_row(label, gemv, bench):
    verify = (bench.get("verify_cost") or {}).get("v", [])
    return {
        "run": label, "gemv": gemv,
        "kv": bench.get("kv_dtype"), "context": bench.get("prompt_len"),
        "decode_tok_s": round(bench["decode_tokens_per_s"], 1),
        "ms_per_token": round(bench["decode_ms_per_token"], 3),
        "fraction_of_copy": round(bench["decode_fraction_of_device_copy_bandwidth"], 3),
        "v": [round(v, 3) for v in verify[1:]],  # v(1), v(2), ...
    }


def decode_rows():
    return [
        decode_row("LLaMA-2-7B bf16, graphs on", "tensor cores",
                   load("raw-1/bench-7b-bf16-graphs-on.json")),
        decode_row("LLaMA-2-7B bf16, graphs on", "CUDA cores",
                   load("raw-1/bench-7b-bf16-graphs-on-gemv-cuda-cores.json")),
        decode_row("LLaMA-2-7B bf16, graphs on, PDL off", "tensor cores",
                   load("raw-1/bench-7b-bf16-graphs-on-pdl-off.json")),
        decode_row("LLaMA-2-7B Q4_K as stored", "quantized GEMV",
                   load("raw-1/bench-7b-q4_k-graphs-on.json")),
        decode_row("Qwen2.5-Coder-1.5B bf16", "tensor cores",
                   load("raw-1/bench-qwen2.5-coder-1.5b-bf16-graphs-on.json")),
        decode_row("LLaMA-2-7B bf16, 4000-token context", "tensor cores",
                   load("raw-2/bench-7b-bf16-graphs-on-kv-bf16-ctx-4000.json")),
        decode_row("LLaMA-2-7B bf16, 4000-token context", "tensor cores",
                   load("raw-2/bench-7b-bf16-graphs-on-kv-f32-ctx-4000.json")),
    ]


def verification_cost(rows):
    """ms of a forward of gamma + 1 tokens (v(gamma) x the decode step) for both GEMVs."""
    out = []
    for row in rows[:2]:
        for gamma, v in enumerate(row["v"][:8], start=1):
            out.append({"gemv": row["gemv"], "gamma": gamma, "v": v,
                        "forward_ms": round(v * row["ms_per_token"], 2)})
    return out


# ---- kernels ----

def bench_rows(name):
    rows = []
    for b in load(name)["benchmarks"]:
        if b.get("error_occurred"):
            continue
        rows.append({"name": b["name"].replace("/manual_time", ""),
                     "time_us": round(b["real_time"], 2), "GB/s": round(b.get("GB/s", 0.0), 1),
                     "fraction_of_peak": round(b.get("GB/s", 0.0) / b["peak_GB/s"], 3)})
    return rows


def gemv_rows():
    wanted = ("matmul_small_batch/bf16/4096x4096/", "matmul_cuda_cores/bf16/4096x4096/",
              "matmul_small_batch/bf16/11008x4096/", "matmul_cuda_cores/bf16/11008x4096/",
              "matmul_swiglu", "matmul_fused", "matmul_normed", "matmul_accumulate", "cublaslt")
    rows = [r for r in bench_rows("raw-1/cuda_kernel_bench.json") if r["name"].startswith(wanted)]
    for r in rows:  # run 1: auto was the tensor cores
        r["kernel"] = ("CUDA cores" if "cuda_cores" in r["name"] else
                       "cuBLASLt" if r["name"].startswith("cublaslt") else "tensor cores")
    return rows


def pipeline_rows():
    return bench_rows("raw-3/pipelines.json")


def other_kernel_rows():
    prefixes = ("quant_matmul", "attention", "rope_write_kv", "rmsnorm", "add_rmsnorm")
    return [r for r in bench_rows("raw-1/cuda_kernel_bench.json") if r["name"].startswith(prefixes)]


# ---- ncu ----

def ncu_rows():
    rows = parse_ncu_summary(open(os.path.join(HERE, "raw-1", "ncu-decode.log")).read())
    forwards = sum(r["invocations"] for r in rows if r["kernel"].startswith("embedding_kernel"))
    out = []
    for r in sorted(rows, key=lambda r: -r["invocations"] * r["mean_us"]):
        out.append({"kernel": r["kernel"][:70], "grid": r["grid"],
                    "launches_per_forward": round(r["invocations"] / forwards, 1),
                    "mean_us": round(r["mean_us"], 2),
                    "us_per_forward": round(r["invocations"] * r["mean_us"] / forwards, 1)})
    return forwards, out


def main():
    decode = decode_rows()
    forwards, ncu = ncu_rows()
    figures = {
        "tests_run_1": test_rows(), "tests_run_3": run3_tests(),
        "decode": decode, "verification_cost": verification_cost(decode),
        "gemv_kernels": gemv_rows(), "pipelines": pipeline_rows(),
        "other_kernels": other_kernel_rows(),
        "ncu_decode_forwards": forwards, "ncu_decode": ncu,
        "sanitizer": next((s.get("figures", {}).get("sanitizer")
                           for s in load("check-1.json")["steps"] if s["name"] == "sanitizer"),
                          None),
    }
    with open(os.path.join(HERE, "figures.json"), "w") as f:
        json.dump(figures, f, indent=1)
        f.write("\n")
    print("## GPU tests, run 1\n")
    print(table(figures["tests_run_1"], ["group", "tests", "passed", "failed", "skipped", "status"]))
    print("\n## Run 3 tests\n")
    print(table(figures["tests_run_3"], ["test", "outcome"]))
    print("\n## Decode\n")
    rows = [dict(r, v=" ".join(str(v) for v in r["v"][:8])) for r in decode]
    print(table(rows, ["run", "gemv", "kv", "context", "decode_tok_s", "ms_per_token",
                       "fraction_of_copy", "v"]))
    print("\n## Verification cost\n")
    print(table(figures["verification_cost"], ["gemv", "gamma", "v", "forward_ms"]))
    print("\n## GEMV kernels, run 1\n")
    print(table(figures["gemv_kernels"], ["name", "kernel", "time_us", "GB/s", "fraction_of_peak"]))
    print("\n## Pipelines, run 3\n")
    print(table(figures["pipelines"], ["name", "time_us", "GB/s", "fraction_of_peak"]))
    print("\n## Other kernels, run 1\n")
    print(table(figures["other_kernels"], ["name", "time_us", "GB/s", "fraction_of_peak"]))
    print(f"\n## ncu, run 1 ({forwards} one-token forwards)\n")
    print(table(ncu, ["kernel", "grid", "launches_per_forward", "mean_us", "us_per_forward"]))


if __name__ == "__main__":
    main()
