"""The bench checks: selfspec's decode bench on a LLaMA-2-7B-geometry synthetic bf16 model (with
and without CUDA graphs, against the device's bandwidth), cuda_kernel_bench and nccl_bench; their
JSON goes to OUTDIR/raw/, their figures to the report."""

import json
import os

from .repo import REPO

TIME_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3}


def fresh_raw_file(c, name):
    """OUTDIR/raw/name, removed if an earlier run left it (a program that fails writes none)."""
    out = os.path.join(c.outdir, "raw", name)
    if os.path.exists(out):
        os.remove(out)
    return out


def read_json(s, path, what):
    """The JSON in path, or None (the step failed: no <what>)."""
    try:
        return json.load(open(path))
    except (OSError, ValueError) as e:
        s.fail(f"no {what} ({e})")
        return None


# ---- selfspec bench: decode ----

def step_decode_bench(c, s, graphs):
    out = fresh_raw_file(c, f"bench-7b-bf16-graphs-{graphs}.json")
    args = [c.program("selfspec"), "bench", "--architecture",
            os.path.join(REPO, "configs", "models", "llama-2-7b.yaml"), "--weights-dtype", "bf16",
            "--device", "cuda", "--cuda-graphs", graphs, "--prompt-len", "128", "--gen", "128",
            "--reps", "3", "--json", "--out", out]
    rc, _ = s.run(args, capture=True)
    if rc != 0:
        s.fail(f"selfspec bench exited with {rc}")
        return
    r = read_json(s, out, "bench JSON")
    if r is None:
        return
    s.figures.update(decode_figures(r))
    device = r.get("device_bandwidth_gbps")
    if not device:
        s.fail("the bench reports no device bandwidth: it did not run on the GPU")
        return
    s.figures.update(device_bandwidth_figures(r, device))
    if graphs == "off":
        record_graphs_speedup(c, s.figures)
    if r.get("cuda_graphs") != (graphs == "on"):
        s.fail(f"asked for --cuda-graphs {graphs}, the bench reports cuda_graphs "
               f"{r.get('cuda_graphs')}")


def decode_figures(r):
    return {
        "backend": r.get("backend"),
        "parameters": r.get("parameters"),
        "load_s": round(r.get("load_s", 0.0), 1),
        "prefill_tok_s": round(r.get("prefill_tokens_per_s", 0.0), 1),
        "decode_tok_s": round(r.get("decode_tokens_per_s", 0.0), 1),
        "decode_ms_per_token": round(r.get("decode_ms_per_token", 0.0), 3),
        "effective_gbps": round((r.get("effective_bandwidth_gbps") or {}).get("all_ranks", 0.0),
                                1),
    }


def device_bandwidth_figures(r, device):
    """The device's measured copy and peak bandwidth, and the fraction of each decode reached."""
    return {
        "device_copy_gbps": round(device.get("measured_copy_all_ranks", 0.0), 1),
        "device_peak_gbps": round(device.get("peak_all_ranks", 0.0), 1),
        "fraction_of_device_copy_bandwidth": round(
            r.get("decode_fraction_of_device_copy_bandwidth", 0.0), 3),
        "fraction_of_device_peak_bandwidth": round(
            r.get("decode_fraction_of_device_peak_bandwidth", 0.0), 3),
        "cuda_graphs": r.get("cuda_graphs"),
    }


def record_graphs_speedup(c, f):
    """graphs_speedup: decode tokens/s with CUDA graphs (the step before) over without (f)."""
    on = [st for st in c.steps if st["name"] == "bench_7b_graphs_on" and st.get("figures")]
    if on and on[0]["figures"].get("decode_tok_s") and f["decode_tok_s"]:
        f["graphs_speedup"] = round(on[0]["figures"]["decode_tok_s"] / f["decode_tok_s"], 3)


# ---- cuda_kernel_bench ----

def step_kernel_bench(c, s):
    out = fresh_raw_file(c, "cuda_kernel_bench.json")
    args = [c.program("cuda_kernel_bench"), f"--benchmark_out={out}",
            "--benchmark_out_format=json", "--benchmark_min_time=0.05"]
    rc, text = s.run(args, capture=True)
    if "no CUDA device" in text or "cannot query the CUDA device" in text:
        s.fail("cuda_kernel_bench found no usable CUDA device")
        return
    if rc != 0:
        s.fail(f"cuda_kernel_bench exited with {rc}")
    r = read_json(s, out, "benchmark JSON")
    if r is None:
        return
    rows, errors = kernel_rows(r)
    s.figures["device"] = (r.get("context") or {}).get("device")
    s.figures["peak_gbps"] = (r.get("context") or {}).get("peak_bandwidth_GBps")
    s.figures["benchmarks"] = rows
    if errors:
        s.fail(f"{len(errors)} benchmark(s) ended with an error: " + "; ".join(errors[:5]))
    if not rows:
        s.fail("no benchmark result")


def kernel_rows(r):
    """([{name, time_us, GB/s, fraction_of_peak, TFLOP/s}], [errors]) of Google Benchmark JSON."""
    rows = []
    errors = []
    for b in r.get("benchmarks", []):
        if b.get("error_occurred"):
            errors.append(f"{b.get('name')}: {b.get('error_message')}")
            continue
        time_us = b.get("real_time", 0.0) * TIME_UNIT_US.get(b.get("time_unit", "ns"), 1.0)
        row = {"name": b.get("name"), "time_us": round(time_us, 2)}
        if "GB/s" in b:
            row["GB/s"] = round(b["GB/s"], 1)
            if b.get("peak_GB/s"):
                row["fraction_of_peak"] = round(b["GB/s"] / b["peak_GB/s"], 3)
        if "TFLOP/s" in b:
            row["TFLOP/s"] = round(b["TFLOP/s"], 1)
        rows.append(row)
    return rows, errors


# ---- nccl_bench ----

def step_nccl_bench(c, s):
    out = fresh_raw_file(c, "nccl_bench.json")
    args = [c.program("nccl_bench"), "--iters", "100", "--warmup", "10", "--out", out]
    rc, text = s.run(args, capture=True)
    if "nothing to measure" in text:
        s.fail("nccl_bench found nothing to measure (no usable GPU, or built without CUDA)")
        return
    if rc != 0:
        s.fail(f"nccl_bench exited with {rc}")
        return
    r = read_json(s, out, "nccl_bench JSON")
    if r is None:
        return
    s.figures["nccl_version"] = r.get("nccl_version")
    s.figures["ranks"] = r.get("ranks")
    s.figures["results"] = [{k: row.get(k) for k in ("hidden", "dtype", "tokens", "bytes",
                                                      "stream_us", "graph_us")}
                            for row in r.get("results", [])]
