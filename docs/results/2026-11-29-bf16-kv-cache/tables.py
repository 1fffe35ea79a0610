#!/usr/bin/env python3
"""The tables of 2026-11-29-bf16-kv-cache.md, from the JSON files beside this script.

  python3 docs/results/2026-11-29-bf16-kv-cache/tables.py

Prints markdown: decode attention per ISA, geometry and context with an f32 and a bf16 cache
(kernels.json: kernel_bench's medians of 3 repetitions; GB/s counts the cache's bytes at their
size); Qwen2.5-Coder-1.5B plain decoding after 3,000 prompt tokens with either cache (long-KV-rN:
bytes per token, weights and KV, and tokens/s, each round and the mean); the best configuration
against plain decoding over either cache on the 16 reported HumanEval problems (e-KV-rN: the
bench's overall figures, medians over the prompts, its lossless count, and the drafts accepted over
all prompts, α pooled); and where greedy outputs with the two caches part (agree.json). Missing
files are skipped with a note. Standard library only.
"""
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
KV_TYPES = ("f32", "bf16")


def load(path):
    if not path.exists() or path.stat().st_size == 0:  # not run, or still running
        return None
    with path.open() as f:
        return json.load(f)


def fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def rounds(prefix, kv):
    """The JSON of every round of prefix-kv-rN, in round order."""
    paths = sorted(HERE.glob(f"{prefix}-{kv}-r*.json"),
                   key=lambda p: int(re.search(r"-r(\d+)\.json$", p.name).group(1)))
    return [r for r in (load(p) for p in paths) if r is not None]


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def kernel_table():
    k = load(HERE / "kernels.json")
    if k is None:
        return ["(kernels.json: not run)", ""]
    medians = {}
    for b in k["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        medians[b["run_name"].removesuffix("/real_time")] = b
    lines = ["| ISA | geometry (q heads on KV heads x dims) | slots | f32 µs | f32 GB/s | "
             "bf16 µs | bf16 GB/s | bf16 speedup |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    pattern = re.compile(r"attention_decode/(\w+)/T1/slots(\d+)/(\w+)$")
    for name in sorted(medians):
        m = pattern.match(name)
        if not m:
            continue
        f32 = medians[name]
        bf16 = medians.get(name + "/bf16-kv")
        if bf16 is None:
            continue
        isa, slots, geometry = m.groups()
        f32_us, bf16_us = f32["real_time"], bf16["real_time"]
        lines.append(f"| {isa} | {geometry} | {slots} | {f32_us:.0f} | {f32['GB/s']:.1f} | "
                     f"{bf16_us:.0f} | {bf16['GB/s']:.1f} | {f32_us / bf16_us:.2f}x |")
    return lines + [""]


def long_table():
    lines = ["| KV cache | weights MB/token | KV MB/token | decode tok/s by round | mean tok/s | "
             "of the measured read bandwidth | prefill tok/s |",
             "|---|---:|---:|---|---:|---:|---:|"]
    means = {}
    for kv in KV_TYPES:
        runs = rounds("long", kv)
        if not runs:
            lines.append(f"| {kv} | (no run) ||||||")
            continue
        traffic = runs[0]["bytes_per_decode_token"]
        speeds = [r["decode_tokens_per_s"] for r in runs]
        means[kv] = mean(speeds)
        fraction = mean(r["decode_fraction_of_measured_read_bandwidth"] for r in runs)
        prefill = mean(r["prefill_tokens_per_s"] for r in runs)
        lines.append(f"| {kv} | {traffic['rank0_weights'] / 1e6:.0f} | "
                     f"{traffic['rank0_kv_cache'] / 1e6:.1f} | "
                     f"{', '.join(f'{s:.2f}' for s in speeds)} | {means[kv]:.2f} | "
                     f"{fraction:.2f} | {prefill:.0f} |")
    if len(means) == 2:
        lines += ["", f"bf16 / f32: {means['bf16'] / means['f32']:.3f}x"]
    return lines + [""]


def pooled_alpha(run):
    accepted = drafted = 0
    for prompt in run["per_prompt"]:
        for s in prompt["speculative"]:
            accepted += s["accepted"]
            drafted += s["drafted"]
    return accepted / drafted if drafted else None


def engine_table():
    lines = ["| KV cache | rounds | lossless prompts | α pooled | M | c | plain tok/s | "
             "best config tok/s | speedup (by round) |",
             "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for kv in KV_TYPES:
        runs = rounds("e", kv)
        if not runs:
            lines.append(f"| {kv} | (no run) ||||||||")
            continue
        overall = [r["results"][0]["overall"] for r in runs]
        lossless = ", ".join(f"{o['lossless_prompts']}/{o['prompts']}" for o in overall)
        speedups = [o["speedup"] for o in overall]
        lines.append(
            f"| {kv} | {len(runs)} | {lossless} | {fmt(mean(pooled_alpha(r) for r in runs))} | "
            f"{fmt(mean(o['mean_accepted_length'] for o in overall), 2)} | "
            f"{fmt(mean(o['cost_ratio_c'] for o in overall))} | "
            f"{fmt(mean(o['autoregressive_tokens_per_s'] for o in overall), 1)} | "
            f"{fmt(mean(o['speculative_tokens_per_s'] for o in overall), 1)} | "
            f"{fmt(mean(speedups), 2)}x ({', '.join(f'{s:.2f}' for s in speedups)}) |")
    return lines + [""]


def agreement_table():
    a = load(HERE / "agree.json")
    if a is None:
        return ["(agree.json: not run)", ""]
    prompts = a["prompts"]
    same = [p for p in prompts if p["first_difference"] is None]
    parted = [p for p in prompts if p["first_difference"] is not None]
    lines = [f"Identical 64-token outputs: {len(same)} of {len(prompts)} prompts."]
    if parted:
        lines.append("Where the others part (token index): " + ", ".join(
            f"{p['id']} at {p['first_difference']}" for p in parted) + ".")
    return lines + [""]


def main():
    for title, table in (("Decode attention (kernel_bench)", kernel_table),
                         ("Plain decoding after 3,000 prompt tokens", long_table),
                         ("The best configuration over either cache", engine_table),
                         ("f32 against bf16 greedy outputs", agreement_table)):
        print(f"### {title}\n")
        print("\n".join(table()))


if __name__ == "__main__":
    main()
