"""Tables and the α–c plot of docs/results/2026-11-27-quantized-and-lookup-drafts.md from the
bench JSON files beside this script (selfspec bench --out): one markdown row per (file,
controller), the overall medians, then frontier.png: each evaluation configuration's acceptance α
against its draft cost c, with eq. 6's iso-speedup curves for K = 1 at v = 1.05.
    python3 tables.py [DIR]      (default: this script's folder)"""
import json
import pathlib
import sys

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)


def rows(path):
    bench = json.loads(path.read_text())
    if not isinstance(bench, dict) or "results" not in bench:
        return  # llama-bench's records
    spec = bench.get("spec", {})
    for result in bench["results"]:
        o = result["overall"]
        yield {
            "name": path.stem,
            "split": bench.get("split"),
            "threads": bench.get("threads_per_rank"),
            "drafter": spec.get("drafter"),
            "controller": result["controller"],
            "ar": o["autoregressive_tokens_per_s"],
            "spec": o["speculative_tokens_per_s"],
            "speedup": o["speedup"],
            "alpha": o["acceptance_rate"],
            "m": o["mean_accepted_length"],
            "c": o["cost_ratio_c"],
            "v": o.get("verify_cost_ratio"),
            "lossless": f"{o['lossless_prompts']}/{o['prompts']}",
        }


def main():
    table = [r for p in sorted(here.glob("*.json")) for r in rows(p)]
    print("| run | split | threads | controller | plain tok/s | spec tok/s | speedup | α | M | c | v "
          "| lossless |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        v = f"{r['v']:.2f}" if r["v"] is not None else ""
        print(f"| {r['name']} | {r['split']} | {r['threads']} | {r['controller']} | {r['ar']:.2f} "
              f"| {r['spec']:.2f} | **{r['speedup']:.2f}x** | {r['alpha']:.3f} | {r['m']:.2f} "
              f"| {r['c']:.3f} | {v} | {r['lossless']} |")
    # One point per configuration: the headline's first round stands for its three.
    plot([r for r in table if r["split"] == "evaluation" and r["threads"] == 1
          and not r["name"].startswith(("best-q-headline-r2", "best-q-headline-r3"))])


def plot(points):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    c = np.linspace(0.0, 1.0, 200)
    for s in (1.0, 1.3, 1.5):
        alpha = s * (c + 1.05) - 1.0  # K = 1: speedup = (1 + α) / (c + v)
        ax.plot(c, alpha, "--", color="grey", lw=0.8)
        inside = np.nonzero(alpha <= 1.0)[0][-1]
        ax.annotate(f"{s}x at K 1", (c[inside], alpha[inside]), fontsize=7, color="grey",
                    xytext=(-40, -10), textcoords="offset points")
    for r in points:
        marker = "s" if r["name"].startswith(("s-", "best-s")) else "o"
        ax.scatter(r["c"], r["alpha"], marker=marker, s=30)
        ax.annotate(f"{r['name']} {r['controller']}: {r['speedup']:.2f}x", (r["c"], r["alpha"]),
                    fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(-0.02, 1.0)
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("c: draft forward cost / target forward cost (0: lookups, no draft forward)")
    ax.set_ylabel("α: accepted / drafted")
    ax.set_title("Evaluation prompts, 1 thread (circles Qwen2.5-Coder-1.5B, squares SmolLM2-135M;\n"
                 "dashed: eq. 6 at K 1, v 1.05; the K 5 runs sit above their line)", fontsize=9)
    fig.tight_layout()
    fig.savefig(here / "frontier.png", dpi=130)


if __name__ == "__main__":
    main()
