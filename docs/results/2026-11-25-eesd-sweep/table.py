#!/usr/bin/python3
"""Tables (table.md) and plots (plots/sweep.png, plots/sweep-qwen.png) of the EESD exit-layer
sweeps made by run.sh (SmolLM2-135M) and run-qwen.sh (Qwen2.5-Coder-1.5B).

Usage: table.py [DIR]   reads the runs' JSON in DIR and writes table.md and plots/ there (DIR:
this script's directory, the committed results; or run.sh's STUDY_OUT)."""
import glob
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:  # a log whose last line is the JSON summary
        return json.loads(text.splitlines()[-1])


def bench_rows(prefix, n):
    rows = []
    for k in (1, 3):
        bench = load(f"bench-{prefix}n{n}-k{k}.json")
        if bench is None:
            continue
        for result in bench["results"]:
            label = result["controller"] + (f" K {k}" if result["controller"] == "fixed" else "")
            rows.append((label, result["overall"]))
    return rows


def sweep(prefix, title, plot):
    # run names after "train-{prefix}n": N and an optional variant tag ("6", "6-e8").
    def key(name):
        n, _, tag = name.partition("-")
        return int(n), tag
    ns = sorted((p[len(f"train-{prefix}n"):-len(".json")] for p in glob.glob(f"train-{prefix}n*.json")),
                key=key)
    lines = [f"### {title}", "",
             "| N | collect (s) | train (s) | agreement before → after | Cali data rows (accepted) | "
             "predictor held-out acc. / base rate / σ_M | controller | speedup | α | M | c | v | "
             "eq. 6 (v = 1) | lossless |", "|" + "---|" * 14]
    curves = {}
    for n in ns:
        collect, train = load(f"collect-{prefix}n{n}.json"), load(f"train-{prefix}n{n}.json")
        cali = load(f"cali-collect-{prefix}n{n}.json")
        pred = load(f"cali-train-{prefix}n{n}.json")
        first = True
        for label, o in bench_rows(prefix, n):
            head = ["", "", "", "", "", ""]
            if first:
                head = [n.replace("-e", ", epochs ") if "-e" in n else n,
                        f"{collect['seconds']:.0f}" if collect else "",
                        f"{train['seconds']:.0f}" if train else "",
                        f"{train['agreement_before']:.3f} → {train['agreement_after']:.3f}" if train else "",
                        f"{cali['rows']} ({cali['accepted_rows']})" if cali else "",
                        (f"{pred['heldout_accuracy']:.3f} / {pred['base_rate']:.3f} / "
                         f"{pred['sigma_m']:.3f}") if pred else ""]
                first = False
            lines.append("| " + " | ".join(head + [
                label, f"{o['speedup']:.2f}x", f"{o['acceptance_rate']:.3f}",
                f"{o['mean_accepted_length']:.2f}", f"{o['cost_ratio_c']:.3f}",
                f"{o['verify_cost_ratio']:.2f}", f"{o['expected_speedup_eq6']:.2f}x",
                f"{o['lossless_prompts']}/{o['prompts']}"]) + " |")
            n_value, tag = key(n)
            curve = label + (f" ({tag})" if tag else "")
            curves.setdefault(curve, []).append((n_value, o["speedup"], o["acceptance_rate"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for label, points in sorted(curves.items()):
        xs = [p[0] for p in points]
        left.plot(xs, [p[1] for p in points], marker="o", label=label)
        right.plot(xs, [p[2] for p in points], marker="o", label=label)
    left.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    left.set(xlabel="exit layer N", ylabel="speedup vs plain decoding", title=f"{title}, EESD")
    right.set(xlabel="exit layer N", ylabel="acceptance rate α", title="draft acceptance")
    left.legend()
    fig.tight_layout()
    fig.savefig(plot, dpi=120)
    return lines


def main():
    os.chdir(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
    os.makedirs("plots", exist_ok=True)
    lines = sweep("", "SmolLM2-135M (run.sh)", "plots/sweep.png")
    lines += [""] + sweep("qwen-", "Qwen2.5-Coder-1.5B on HumanEval (run-qwen.sh)",
                          "plots/sweep-qwen.png")
    with open("table.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
