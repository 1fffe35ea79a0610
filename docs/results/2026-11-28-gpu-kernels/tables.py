"""The tables of docs/results/2026-11-28-gpu-kernels.md from the committed check reports, bench
JSON and ncu logs beside this script; writes figures.json and prints the tables (markdown).

    python3 docs/results/2026-11-28-gpu-kernels/tables.py > /tmp/tables.md
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts", "gpu"))
from gpu_check.profile import parse_ncu_summary  # noqa: E402  (the check's own ncu parser)


def load(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def decode_row(label, bench):
    return {
        "run": label,
        "graphs": bench.get("cuda_graphs"),
        "decode_tok_s": round(bench["decode_tokens_per_s"], 1),
        "ms_per_token": round(bench["decode_ms_per_token"], 3),
        "effective_gbps": round(bench["effective_bandwidth_gbps"]["all_ranks"], 1),
        "copy_gbps": round(bench["device_bandwidth_gbps"]["measured_copy_all_ranks"], 1),
        "fraction_of_copy": round(bench["decode_fraction_of_device_copy_bandwidth"], 3),
        "v": [round(v, 3) for v in (bench.get("verify_cost") or {}).get("v", [])],
    }


def decode_rows():
    return [
        decode_row("1: 63250ff (start), LLaMA-2-7B, graphs on", load("raw-1/bench-7b-bf16-graphs-on.json")),
        decode_row("1: 63250ff (start), LLaMA-2-7B, graphs off",
                   load("raw-1/bench-7b-bf16-graphs-off.json")),
        decode_row("3: this page, LLaMA-2-7B, graphs on, PDL on", load("raw-3/bench-7b-bf16-graphs-on.json")),
        decode_row("3: this page, LLaMA-2-7B, graphs on, PDL off",
                   load("raw-3/bench-7b-bf16-graphs-on-pdl-off.json")),
        decode_row("3: this page, Qwen2.5-Coder-1.5B, graphs on, PDL on",
                   load("raw-3/bench-qwen2.5-coder-1.5b-bf16-graphs-on.json")),
    ]


# Kernel roles of a decode forward (LLaMA-2-7B geometry, T = 1), by kernel name and grid.
def role(kernel, grid):
    if kernel.startswith("matmul_small_batch"):
        return {512: "GEMV 4096 rows (q, k, v, o, down; after: o, down)",
                1376: "GEMV 11008 rows (gate, up)",
                1536: "GEMV fused Wq+Wk+Wv (12288 rows)",
                2752: "GEMV fused gate+up (22016 rows)",
                4000: "GEMV LM head (32000 rows)"}.get(grid, f"GEMV grid {grid}")
    for prefix, name in (("rmsnorm", "RMSNorm (+ residual add)"), ("rope_write_kv", "RoPE + KV write"),
                         ("rope", "RoPE"), ("write_kv", "KV write"),
                         ("attention", "attention (+ merge)"), ("swiglu", "SwiGLU"),
                         ("row_stats", "row statistics"), ("embedding", "embedding"),
                         ("add_inplace", "residual add"), ("gather_rows", "row gather")):
        if kernel.startswith(prefix):
            return name
    return kernel


def per_forward(log, decode_only):
    """{role: us per decode forward} and the forward count. decode_only (the first run's log,
    whose bench had a 32-token prompt): rows of the one-token forwards only - the cuBLASLt
    kernels are the prefill's, and of a kernel seen at several grids the smallest grid is the
    decode one (GEMVs apart: the prefill used cuBLASLt); the LM head row also holds the prefill's
    one logit row (2 of its 8 launches)."""
    rows = parse_ncu_summary(open(os.path.join(HERE, log)).read())
    if decode_only:
        rows = [r for r in rows if not r["kernel"].startswith(("nvjet", "cublasLt", "to_bf16"))]
        smallest = {}
        for r in rows:
            if not r["kernel"].startswith("matmul_small_batch"):
                smallest[r["kernel"]] = min(smallest.get(r["kernel"], r["grid"]), r["grid"])
        rows = [r for r in rows if r["kernel"].startswith("matmul_small_batch")
                or r["grid"] == smallest[r["kernel"]]]
    forwards = sum(r["invocations"] for r in rows if r["kernel"].startswith("embedding_kernel"))
    table = {}
    for r in rows:
        key = role(r["kernel"], r["grid"])
        entry = table.setdefault(key, {"launches": 0.0, "us": 0.0})
        entry["launches"] += r["invocations"] / forwards
        entry["us"] += r["mean_us"] * r["invocations"] / forwards
    return forwards, table


def kernel_bench_rows():
    """The cuda_kernel_bench results of run 1 (start) and run 2 (this page's kernels), by name."""
    def by_name(path):
        out = {}
        for b in load(path)["benchmarks"]:
            if b.get("error_occurred"):
                continue
            out[b["name"].replace("/manual_time", "")] = {
                "us": round(b["real_time"] / 1e3 if b.get("time_unit") == "ns" else b["real_time"], 2),
                "fraction_of_peak": round(b["GB/s"] / b["peak_GB/s"], 3) if b.get("peak_GB/s") else None}
        return out
    before = by_name("raw-1/cuda_kernel_bench.json")
    after = by_name("raw-2/cuda_kernel_bench.json")
    rows = []
    for name in after:
        rows.append({"name": name, "before_us": (before.get(name) or {}).get("us"),
                     "after_us": after[name]["us"],
                     "after_fraction_of_peak": after[name]["fraction_of_peak"]})
    return rows


# Eq. 6 for Qwen2.5-Coder-1.5B's best configuration (EESD exit head after layer N = 4, a
# 16,384-id draft vocabulary, one draft per round) on the GPU: alpha from the CPU study (the
# acceptance does not depend on the device), v(gamma) from the GPU bench of the geometry, and the
# draft's cost c estimated from the GPU decode time: the LM head (151,936 x 1,536 bf16) and the
# pruned draft head (16,384 rows) at the fractions of copy bandwidth the fused GEMVs of this page
# reach at those sizes, the per-forward fixed kernels (embedding, final norm, row statistics) from
# the 7B ncu table, and the rest spread evenly over the 28 layers.
QWEN = {"layers": 28, "hidden": 1536, "vocab": 151936, "draft_vocab": 16384, "exit_layer": 4}
LM_HEAD_FRACTION = 0.85      # gate|up fused, 180 MB: 0.82 (bench) - 0.92 (ncu) of copy bandwidth
DRAFT_HEAD_FRACTION = 0.55   # a 50 MB matrix: about the 4096 x 4096 GEMV's 0.54 of peak
FIXED_US = 25.0              # embedding + final norm + row statistics, 7B ncu table


def eq6_qwen():
    cpu = load("../2026-11-27-eesd-n-sweep/bench-qwen-n4-k1-t1.json")["results"][0]["overall"]
    gpu = load("raw-3/bench-qwen2.5-coder-1.5b-bf16-graphs-on.json")
    alpha = cpu["acceptance_rate"]
    decode_us = gpu["decode_ms_per_token"] * 1e3
    copy = gpu["device_bandwidth_gbps"]["measured_copy_all_ranks"] * 1e9
    head_us = QWEN["vocab"] * QWEN["hidden"] * 2 / (LM_HEAD_FRACTION * copy) * 1e6
    draft_head_us = QWEN["draft_vocab"] * QWEN["hidden"] * 2 / (DRAFT_HEAD_FRACTION * copy) * 1e6
    layer_us = (decode_us - head_us - FIXED_US) / QWEN["layers"]
    draft_us = (QWEN["exit_layer"] + 1) * layer_us + draft_head_us + FIXED_US
    c = draft_us / decode_us
    v = gpu["verify_cost"]["v"]
    rows = []
    for gamma in range(1, 5):
        expected = sum(alpha ** i for i in range(gamma + 1))
        rows.append({"gamma": gamma, "alpha": round(alpha, 3), "c": round(c, 3),
                     "v": round(v[gamma], 3),
                     "eq6_v1": round(expected / (gamma * c + 1.0), 3),
                     "speedup": round(expected / (gamma * c + v[gamma]), 3)})
    cpu_row = {"alpha": round(alpha, 3), "c": round(cpu["cost_ratio_c"], 3),
               "v": round(cpu["verify_cost_ratio"], 3), "eq6": round(cpu["expected_speedup_eq6"], 3),
               "eq6_measured_v": round((1 + alpha) / (cpu["cost_ratio_c"] + cpu["verify_cost_ratio"]), 3),
               "measured": round(cpu["speedup"], 3)}
    return {"gpu": rows, "cpu_gamma1": cpu_row, "decode_us": round(decode_us, 1),
            "layer_us": round(layer_us, 1), "head_us": round(head_us, 1),
            "draft_us": round(draft_us, 1)}


def md(rows, columns):
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in columns) + " |")
    return "\n".join(out)


def main():
    decode = decode_rows()
    f1, before = per_forward("ncu-1-baseline.log", decode_only=True)
    f3, after = per_forward("ncu-3.log", decode_only=False)
    kernels = kernel_bench_rows()
    checks = {name: {"result": load(name)["result"],
                     "steps": {s["name"]: s["status"] for s in load(name)["steps"]}}
              for name in ("check-1-baseline.json", "check-2-lossless-failures.json", "check-3.json")}
    eq6 = eq6_qwen()
    figures = {"decode": decode, "ncu_forwards": {"before": f1, "after": f3}, "eq6_qwen": eq6,
               "per_forward_us": {"before": before, "after": after}, "kernel_bench": kernels,
               "checks": checks}
    with open(os.path.join(HERE, "figures.json"), "w") as f:
        json.dump(figures, f, indent=1, sort_keys=True)

    print("## Decode\n")
    print(md(decode, ["run", "decode_tok_s", "ms_per_token", "effective_gbps", "copy_gbps",
                      "fraction_of_copy"]))
    print("\n## v(gamma)\n")
    width = max(len(d["v"]) for d in decode)
    vrows = []
    for d in decode:
        if d["v"]:
            row = {"run": d["run"]}
            row.update({f"v({g})": d["v"][g] for g in range(1, len(d["v"]))})
            vrows.append(row)
    print(md(vrows, ["run"] + [f"v({g})" for g in range(1, width)]))
    print(f"\n## Per decode forward (ncu --cache-control none; {f1} and {f3} forwards)\n")
    roles = sorted(set(before) | set(after), key=lambda k: -max(before.get(k, {}).get("us", 0),
                                                                after.get(k, {}).get("us", 0)))
    prow = []
    for k in roles:
        b = before.get(k)
        a = after.get(k)
        prow.append({"kernel": k,
                     "before launches": round(b["launches"], 1) if b else None,
                     "before us": round(b["us"], 1) if b else None,
                     "after launches": round(a["launches"], 1) if a else None,
                     "after us": round(a["us"], 1) if a else None})
    prow.append({"kernel": "sum", "before us": round(sum(v["us"] for v in before.values()), 1),
                 "after us": round(sum(v["us"] for v in after.values()), 1)})
    print(md(prow, ["kernel", "before launches", "before us", "after launches", "after us"]))
    print(f"\n## Eq. 6, Qwen2.5-Coder-1.5B EESD N = 4 on the GPU (decode {eq6['decode_us']} us, "
          f"layer {eq6['layer_us']} us, LM head {eq6['head_us']} us, draft {eq6['draft_us']} us)\n")
    print(md(eq6["gpu"], ["gamma", "alpha", "c", "v", "eq6_v1", "speedup"]))
    cpu = eq6["cpu_gamma1"]
    print(f"\nCPU, gamma 1 (the study): alpha {cpu['alpha']}, c {cpu['c']}, v {cpu['v']}, "
          f"eq. 6 with v = 1 {cpu['eq6']}, with the measured v {cpu['eq6_measured_v']}, "
          f"measured {cpu['measured']}")
    print("\n## cuda_kernel_bench\n")
    print(md(kernels, ["name", "before_us", "after_us", "after_fraction_of_peak"]))


if __name__ == "__main__":
    main()
