#!/usr/bin/env python3
"""Plots the results of `selfspec bench --prompts-file ... --json` (or --out FILE.json).

    python3 scripts/plot_bench.py [--out DIR] [--labels A,B,...] [--search-log LOG.jsonl ...]
                                  RESULT.json [RESULT.json ...]

Each input holds one bench run: one model, one drafter (skip set) and one or more configurations
(controller x logits mode). A "method" is one configuration of one file, named after the skip set
(or the file's --labels entry) and the controller. Per model it writes three PNG files to --out
(default: the current directory):

  <model>-speedup.png       measured speedup per task and overall, one bar per method
  <model>-acceptance.png    acceptance rate alpha per task and overall, one bar per method
  <model>-tokens-per-s.png  autoregressive vs speculative tokens/s per task, one panel per method
  <model>-frontier.png      acceptance alpha against draft cost c, one point per method (the
                            overall medians), with the expected-speedup contours of SWIFT eq. 6;
                            with --search-log (the JSONL log of `selfspec search-skips`), every
                            searched skip set's calibration matchness against its table cost in
                            grey and their upper (Pareto) frontier

Every figure is a median over the evaluated prompts, as bench reports it. Inputs may be the JSON
object bench writes with --out, or a captured stdout whose last line is the --json object.
Needs matplotlib (Debian: python3-matplotlib, installed by scripts/setup.sh).
"""

import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def load_result(path):
    """The bench JSON object in `path`: the whole file, or its last non-empty line."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        result = json.loads(text)
    except json.JSONDecodeError:
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            sys.exit(f"{path}: empty")
        try:
            result = json.loads(lines[-1])
        except json.JSONDecodeError as error:
            sys.exit(f"{path}: neither a JSON object nor output ending in one ({error})")
    if not isinstance(result, dict) or "results" not in result or "per_prompt" not in result:
        sys.exit(f"{path}: not the result of `selfspec bench --prompts-file` (no 'results')")
    return result


def model_name(result):
    """The model's file or directory name, without a .gguf extension."""
    name = os.path.basename(str(result.get("model", "model")).rstrip("/")) or "model"
    return re.sub(r"\.gguf$", "", name)


def methods_of(result, label):
    """(method name, results entry) for each configuration of one bench run."""
    skip_set = label or result.get("spec", {}).get("skip_set", {}).get("name", "drafter")
    several_logits = len({entry["logits"] for entry in result["results"]}) > 1
    methods = []
    for entry in result["results"]:
        name = f"{skip_set} / {entry['controller']}"
        if several_logits:
            name += f" / {entry['logits']}"
        methods.append((name, entry))
    return methods


# The order bench lists tasks in (launch/prompt_suite.cpp, known_prompt_tasks).
TASK_ORDER = ["chat", "summarisation", "qa", "maths", "code"]


def groups_of(methods):
    """The tasks any method reports, in bench's order, then "overall"."""
    tasks = {task for _, entry in methods for task in entry["per_task"]}
    ordered = sorted(tasks, key=lambda t: (TASK_ORDER.index(t) if t in TASK_ORDER else 99, t))
    return ordered + ["overall"]


def figure_of(entry, group, key):
    row = entry["overall"] if group == "overall" else entry["per_task"].get(group)
    return row[key] if row else 0.0


def grouped_bars(ax, groups, series, ylabel):
    """One cluster of bars per group, one bar per (name, values) series."""
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series):
        offsets = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(offsets, values, width, label=name)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")


def plot_per_task(path, model, methods, key, ylabel, title, reference=None, ylim=None):
    groups = groups_of(methods)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) + 2), 4.5))
    series = [(name, [figure_of(entry, g, key) for g in groups]) for name, entry in methods]
    grouped_bars(ax, groups, series, ylabel)
    if reference is not None:
        ax.axhline(reference, color="black", linewidth=0.8, linestyle="--")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(f"{title}: {model}\n{', '.join(name for name, _ in methods)}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_tokens_per_s(path, model, methods):
    groups = groups_of(methods)
    fig, axes = plt.subplots(len(methods), 1, figsize=(max(6, 1.6 * len(groups) + 2),
                                                       3.5 * len(methods)), squeeze=False)
    for ax, (name, entry) in zip(axes[:, 0], methods):
        series = [
            ("autoregressive", [figure_of(entry, g, "autoregressive_tokens_per_s") for g in groups]),
            ("self-speculative", [figure_of(entry, g, "speculative_tokens_per_s") for g in groups]),
        ]
        grouped_bars(ax, groups, series, "tokens/s (median)")
        ax.set_title(f"{model}: {name}", fontsize="medium")
    fig.suptitle(f"Decoding speed, autoregressive vs self-speculative: {model}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def method_name(result, entry, label):
    spec = result.get("spec", {})
    name = label or spec.get("skip_set", {}).get("name") or spec.get("drafter", "drafter")
    vocab = entry.get("draft_vocab")
    if vocab:
        name += f" V'{vocab}"
    return name


def load_search_log(path):
    """(cost, alpha) of every evaluation in a search-skips JSONL log."""
    points = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                points.append((float(record["cost"]), float(record["alpha"])))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
                sys.exit(f"{path}:{number}: not a search-skips log record ({error})")
    return points


def upper_frontier(points):
    """The points no other point beats on both lower cost and higher alpha, by cost."""
    front = []
    for cost, alpha in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or alpha > front[-1][1]:
            front.append((cost, alpha))
    return front


def plot_frontier(path, model, runs, search_points):
    """runs: (result, entry, label) per method; search_points: [(log name, [(c, alpha)])]."""
    fig, ax = plt.subplots(figsize=(7, 5))
    # SWIFT eq. 6 with a draft length chosen for each (c, alpha): contours of equal speedup.
    grid_c = [0.3 + 0.7 * i / 140 for i in range(141)]
    grid_a = [i / 140 for i in range(141)]

    def eq6(c, a):
        best = 0.0
        for g in range(1, 13):
            m = g + 1 if a >= 1 else (1 - a ** (g + 1)) / (1 - a)
            best = max(best, m / (g * c + 1))
        return best

    z = [[eq6(c, a) for c in grid_c] for a in grid_a]
    contours = ax.contour(grid_c, grid_a, z, levels=[0.8, 1.0, 1.2, 1.5, 2.0], colors="grey",
                          linewidths=0.6, linestyles="dotted")
    ax.clabel(contours, fmt="%.1fx", fontsize="x-small")
    for name, points in search_points:
        ax.scatter([p[0] for p in points], [p[1] for p in points], s=8, color="lightgrey",
                   label=f"{name}: searched sets (calibration)")
        front = upper_frontier(points)
        ax.plot([p[0] for p in front], [p[1] for p in front], color="grey", linewidth=1)
    for result, entry, label in runs:
        overall = entry["overall"]
        name = method_name(result, entry, label)
        ax.scatter([overall["cost_ratio_c"]], [overall["acceptance_rate"]], s=40, zorder=3,
                   label=f"{name} ({overall['speedup']:.2f}x)")
    ax.set_xlabel("draft cost c (draft forward / target forward)")
    ax.set_ylabel("acceptance rate α")
    ax.set_xlim(0.3, 1.02)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="lower right")
    ax.set_title(f"Acceptance α against draft cost c: {model}\n"
                 "(dotted: SWIFT eq. 6 speedup, v = 1)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="bench --prompts-file JSON results")
    parser.add_argument("--out", default=".", help="directory for the PNG files")
    parser.add_argument("--labels", default="",
                        help="comma-separated method names, one per result file (default: the "
                             "skip set's name)")
    parser.add_argument("--search-log", action="append", default=[],
                        help="a search-skips JSONL log to draw on the frontier plot (repeatable)")
    args = parser.parse_args()
    labels = args.labels.split(",") if args.labels else [None] * len(args.results)
    if len(labels) != len(args.results):
        sys.exit(f"--labels names {len(labels)} methods for {len(args.results)} files")

    by_model = {}
    runs_by_model = {}
    for path, label in zip(args.results, labels):
        result = load_result(path)
        by_model.setdefault(model_name(result), []).extend(methods_of(result, label))
        runs_by_model.setdefault(model_name(result), []).extend(
            (result, entry, label) for entry in result["results"])
    search_points = [(os.path.basename(p), load_search_log(p)) for p in args.search_log]

    os.makedirs(args.out, exist_ok=True)
    for model, methods in by_model.items():
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
        written = [os.path.join(args.out, f"{slug}-{kind}.png")
                   for kind in ("speedup", "acceptance", "tokens-per-s", "frontier")]
        plot_per_task(written[0], model, methods, "speedup", "speedup (median over prompts)",
                      "Self-speculative speedup per task", reference=1.0)
        plot_per_task(written[1], model, methods, "acceptance_rate",
                      "acceptance rate α (median)", "Acceptance rate per task", ylim=(0, 1))
        plot_tokens_per_s(written[2], model, methods)
        plot_frontier(written[3], model, runs_by_model[model], search_points)
        for path in written:
            print(path)


if __name__ == "__main__":
    main()
