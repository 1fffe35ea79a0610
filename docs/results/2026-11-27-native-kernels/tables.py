#!/usr/bin/env python3
"""Prints the markdown tables of this study's page from its JSON files (run from anywhere):
decode and prefill against llama.cpp, decode bandwidth and v(gamma) per model / weights /
threads, the kernels per format and T, the accuracy of native and bf16 weights, and issue 10's
Qwen skip-set evaluation re-run. Usage: python3 tables.py [DIR]   (DIR: this script's directory,
or run.sh's STUDY_OUT)
"""

import json
import pathlib
import sys

# The study's JSON: this script's directory (the committed results) or run.sh's STUDY_OUT.
HERE = (pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent).resolve()


def load(path):
    with open(HERE / path, encoding="utf-8") as f:
        return json.load(f)


def side_by_side():
    print("| model | threads | llama.cpp prefill | selfspec prefill | ratio | llama.cpp decode | "
          "selfspec decode | ratio | selfspec decode / stream |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, name in [("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B Q4_K_M"),
                        ("smollm2-135m", "SmolLM2-135M Q4_1")]:
        path = HERE / f"side-by-side/{model}/side_by_side.json"
        if not path.exists():
            continue
        for row in load(path)["rows"]:
            ll, ss = row["llama.cpp"], row["selfspec"]
            pre_l = ll["prefill_tokens_per_s"]["median"]
            pre_s = ss["prefill_tokens_per_s"]["median"]
            dec_l = ll["decode_tokens_per_s"]["median"]
            dec_s = ss["decode_tokens_per_s"]["median"]
            frac = ss["decode_fraction_of_measured_read_bandwidth"]["median"]
            print(f"| {name} | {row['threads']} | {pre_l:.1f} | {pre_s:.1f} | {pre_s / pre_l:.2f}x "
                  f"| {dec_l:.2f} | {dec_s:.2f} | **{dec_s / dec_l:.2f}x** | {frac:.2f} |")


def bench():
    print("| model | weights | threads | decode tok/s | bytes/token | stream GB/s | decode / stream | "
          "prefill tok/s | v(1) … v(8) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for model, name in [("qwen", "Qwen2.5-Coder-1.5B"), ("smollm2", "SmolLM2-135M")]:
        for dtype in ["native", "bf16"]:
            for threads in [1, 2]:
                path = HERE / f"bench/{model}-{dtype}-t{threads}.json"
                if not path.exists():
                    continue
                j = load(path)
                v = " ".join(f"{x:.3f}" for x in j["verify_cost"]["v"][1:])
                stream = j["measured_bandwidth_gbps"]["read_all_ranks"]
                print(f"| {name} | {'native' if dtype == 'native' else 'bf16'} | "
                      f"{threads} | {j['decode_tokens_per_s']:.2f} | "
                      f"{j['bytes_per_decode_token']['all_ranks'] / 1e6:.0f} MB | {stream:.1f} | "
                      f"{j['decode_fraction_of_measured_read_bandwidth']:.3f} | "
                      f"{j['prefill_tokens_per_s']:.1f} | {v} |")


def kernels():
    for threads in [1, 2]:
        path = HERE / f"kernels/packed-t{threads}.json"
        if not path.exists():
            continue
        j = load(path)
        tokens = sorted({r["tokens"] for r in j["results"]})
        print(f"\n{j['rows']} x {j['cols']}, {threads} thread(s), {j['isa']}, streaming read "
              f"{j['stream_read_gbps']:.1f} GB/s. Each cell: GB/s as a fraction of the streaming "
              f"read / v = t(T) / t(1) / GMAC/s.\n")
        print("| format | " + " | ".join(f"T {t}" for t in tokens) + " |")
        print("|---|" + "---:|" * len(tokens))
        formats = []
        for r in j["results"]:
            if r["format"] not in formats:
                formats.append(r["format"])
        for fmt in formats:
            cells = []
            for t in tokens:
                r = next(x for x in j["results"] if x["format"] == fmt and x["tokens"] == t)
                cells.append(f"{r['fraction_of_stream']:.2f} / {r['v']:.2f} / {r['gmacs']:.0f}")
            print(f"| {fmt} | " + " | ".join(cells) + " |")


def accuracy():
    print("| model | weights | sequences | positions | top-1 agreement | mean KL (nats) | max KL | "
          "perplexity f32 → weights |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for model, name in [("qwen", "Qwen2.5-Coder-1.5B"), ("smollm2", "SmolLM2-135M")]:
        for dtype in ["native", "bf16"]:
            path = HERE / f"accuracy/{model}-{dtype}.json"
            if not path.exists():
                continue
            j = load(path)
            label = j["candidate"].replace("f32+", "").replace("+f32", "")
            for s in j["sources"]:
                source = ("reference prompts + HF greedy continuations" if "realmodel" in s["source"]
                          else "GPL-3 text, 256-token windows")
                print(f"| {name} | {label} | {source} | {s['positions']} | "
                      f"{s['top1_agreement']:.4f} | {s['kl_mean']:.5f} | {s['kl_max']:.4f} | "
                      f"{s['perplexity_reference']:.3f} → {s['perplexity_candidate']:.3f} |")


def skip_bench():
    print("| weights | controller | AR tok/s | spec tok/s | speedup | α | M | c | v | eq. 6 | "
          "lossless |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for dtype in ["native", "bf16"]:
        for tag, label in [("adaptive", "adaptive"), ("fixed-k1", "fixed K 1"),
                           ("fixed-k2", "fixed K 2"), ("fixed-k3", "fixed K 3")]:
            path = HERE / f"skip-bench/bench-bo-{dtype}-{tag}.json"
            if not path.exists():
                continue
            r = load(path)["results"][0]["overall"]
            print(f"| {'q4_k+q6_k' if dtype == 'native' else 'bf16'} | {label} | "
                  f"{r['autoregressive_tokens_per_s']:.2f} | {r['speculative_tokens_per_s']:.2f} | "
                  f"**{r['speedup']:.2f}x** | {r['acceptance_rate']:.3f} | "
                  f"{r['mean_accepted_length']:.2f} | {r['cost_ratio_c']:.3f} | "
                  f"{r['verify_cost_ratio']:.3f} | {r['expected_speedup_eq6']:.2f}x | "
                  f"{r['lossless_prompts']}/{r['prompts']} |")


if __name__ == "__main__":
    for title, table in [("llama.cpp side by side", side_by_side), ("selfspec bench", bench),
                         ("kernels", kernels), ("accuracy", accuracy),
                         ("skip-set bench", skip_bench)]:
        print(f"\n### {title}\n")
        table()
