#!/usr/bin/env python3
"""Plots of the native-kernels study (issue 22) from its JSON files (in DIR: this script's
directory, or run.sh's STUDY_OUT):

  plots/verify_cost.png    v(gamma) of Qwen2.5-Coder-1.5B and SmolLM2-135M, native and bf16
                           weights, 1 and 2 threads (selfspec bench, bench/*.json)
  plots/kernels.png        each packed format's GB/s as a fraction of the streaming read, and v,
                           against the token count T (packed_matmul_bench, kernels/*.json)
  plots/side_by_side.png   decode and prefill tokens/s, selfspec against llama.cpp
                           (scripts/dev/llama_cpp_side_by_side.sh, side-by-side/*/side_by_side.json)

Usage: python3 plot.py [DIR]   (needs matplotlib)
"""

import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The study's JSON: this script's directory (the committed results) or run.sh's STUDY_OUT.
HERE = (pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent).resolve()


def load(path):
    with open(HERE / path, encoding="utf-8") as f:
        return json.load(f)


def verify_cost():
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, model in zip(axes, ["qwen", "smollm2"]):
        for dtype, style in [("native", "-"), ("bf16", "--")]:
            for threads, colour in [(1, "tab:blue"), (2, "tab:orange")]:
                path = HERE / f"bench/{model}-{dtype}-t{threads}.json"
                if not path.exists():
                    continue
                v = load(path.relative_to(HERE))["verify_cost"]["v"]
                ax.plot(range(len(v)), v, style, color=colour, marker="o", markersize=3,
                        label=f"{dtype}, {threads} thread(s)")
        ax.axhline(1.15, color="grey", linewidth=0.8, linestyle=":")
        ax.axhline(1.05, color="grey", linewidth=0.8, linestyle=":")
        ax.set_title({"qwen": "Qwen2.5-Coder-1.5B Q4_K_M", "smollm2": "SmolLM2-135M Q4_1"}[model])
        ax.set_xlabel("gamma (drafted tokens verified)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("v(gamma) = t(gamma + 1 tokens) / t(1 token)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "plots/verify_cost.png", dpi=120)


def kernels():
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for col, threads in enumerate([1, 2]):
        path = HERE / f"kernels/packed-t{threads}.json"
        if not path.exists():
            continue
        data = load(path.relative_to(HERE))
        formats = sorted({r["format"] for r in data["results"]})
        for fmt in formats:
            rows = [r for r in data["results"] if r["format"] == fmt]
            t = [r["tokens"] for r in rows if r["tokens"] <= 16]
            axes[0][col].plot(t, [r["fraction_of_stream"] for r in rows if r["tokens"] <= 16],
                              marker="o", markersize=3, label=fmt)
            axes[1][col].plot(t, [r["v"] for r in rows if r["tokens"] <= 16], marker="o",
                              markersize=3, label=fmt)
        axes[0][col].set_title(f"{data['rows']} x {data['cols']}, {threads} thread(s), "
                               f"stream {data['stream_read_gbps']:.1f} GB/s")
        axes[0][col].set_ylabel("GB/s / streaming read")
        axes[1][col].set_ylabel("v = t(T) / t(1)")
        axes[1][col].set_xlabel("tokens T")
        for ax in axes[:, col]:
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "plots/kernels.png", dpi=120)


def side_by_side():
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    labels = []
    llama = {"decode": [], "prefill": []}
    ours = {"decode": [], "prefill": []}
    for model, name in [("qwen2.5-coder-1.5b", "Qwen-1.5B"), ("smollm2-135m", "SmolLM2")]:
        path = HERE / f"side-by-side/{model}/side_by_side.json"
        if not path.exists():
            continue
        data = load(path.relative_to(HERE))
        for row in data["rows"]:
            labels.append(f"{name}\n{row['threads']} thr")
            for kind in ["decode", "prefill"]:
                llama[kind].append(row["llama.cpp"][f"{kind}_tokens_per_s"]["median"])
                ours[kind].append(row["selfspec"][f"{kind}_tokens_per_s"]["median"])
    for ax, kind in zip(axes, ["decode", "prefill"]):
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], llama[kind], width=0.4, label="llama.cpp")
        ax.bar([i + 0.2 for i in x], ours[kind], width=0.4, label="selfspec")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(f"{kind} tokens/s")
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(HERE / "plots/side_by_side.png", dpi=120)


if __name__ == "__main__":
    (HERE / "plots").mkdir(exist_ok=True)
    verify_cost()
    kernels()
    side_by_side()
    print("wrote", ", ".join(str(p.relative_to(HERE)) for p in sorted((HERE / "plots").glob("*.png"))))
