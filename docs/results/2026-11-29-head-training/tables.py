#!/usr/bin/env python3
"""The tables of 2026-11-29-head-training.md, from the JSON files beside this script.

  python3 docs/results/2026-11-29-head-training/tables.py

Prints markdown: the two collections (this page's collect.json and the baseline's, the
feature-head page's collect.json, which that page's run.sh made) by where their positions come
from; the heads' held-out agreements (the trainers' --json summaries: this page's eesd.json and
feature.json, the baseline's eesd-4ep.json and feature-4ep.json), each on its own collection's
held-out sequences (feature-bf16.json: the baseline's feature head trained again in bf16, on the
baseline's data and held-out positions), with each training's speed; then the heads in the
engine: `selfspec bench` on the 16 selection problems (dev-NAME.json) and on the 16 reported
HumanEval evaluation problems, per configuration the drafts accepted over all its prompts and rounds
(α pooled), and the mean over its rounds (e-NAME-rK.json) of the bench's overall figures (each the
median over the prompts): α, M, c, v, eq. 6's expected speedup, the tokens/s of plain decoding and of the configuration and
their ratio (each round's ratio listed too); and the new recipe's timings from a fresh clone
(recipe-timings.json; its trainer's summary is recipe-train.json). Missing files are skipped with
a note. Standard
library only.
"""
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = HERE.parent / "2026-11-29-feature-head"


def load(path):
    if not path.exists() or path.stat().st_size == 0:  # not run, or still running
        return None
    with path.open() as f:
        return json.load(f)


def fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def data_table():
    lines = ["| data | sequences | positions | prompts | generated (continuations) | open text "
             "(teacher-forced) | generated share | collection s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, path in (("baseline: open text teacher-forced (feature-head page)",
                         BASE / "collect.json"),
                        ("open text continued (--open-text-continue 128)", HERE / "collect.json")):
        c = load(path)
        if c is None:
            lines.append(f"| {label} | (no run) |||||||")
            continue
        by = c["new_positions_by_source"]
        lines.append(f"| {label} | {c['sequences']} | {c['positions']} | {by['prompts']} | "
                     f"{by['generated']} | {by['open_text']} | {by['generated_share']:.2f} | "
                     f"{c['seconds']:.0f} |")
    return lines + [""]


def head_table():
    lines = ["| head | data | precision | held-out agreement, depth 1 | depth 2 given depth 1 "
             "| train positions | held-out positions | epochs run | positions trained "
             "| training steps s | positions/s | evaluations | wall s |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, data, path in (
            ("EESD exit head after layer 4", "baseline", BASE / "eesd-4ep.json"),
            ("EESD exit head after layer 4", "open text continued", HERE / "eesd.json"),
            ("feature head", "baseline", BASE / "feature-4ep.json"),
            ("feature head", "baseline", HERE / "feature-bf16.json"),
            ("feature head", "open text continued", HERE / "feature.json"),
            ("feature head", "the new recipe (70,000 tokens of open text)",
             HERE / "recipe-train.json")):
        s = load(path)
        if s is None:
            lines.append(f"| {label} | {data} | (no run) |||||||||||")
            continue
        best = s["best"]
        precision = s["settings"].get("precision", "f32")
        lines.append(f"| {label} | {data} | {precision} | {fmt(best['heldout_agreement'])} | "
                     f"{fmt(best.get('depth2_agreement_given_depth1'))} | "
                     f"{s['train_positions']} | {s['heldout_positions']} | {s['epochs_run']} | "
                     f"{s['positions_trained']} | {s['train_seconds']:.0f} | "
                     f"{s['positions_per_s']:.0f} | {len(s['curve']) if 'curve' in s else '–'} | "
                     f"{s['seconds']:.0f} |")
    return lines + [""]


# The engine configurations (run.sh's BENCH), in the order of the table, with their labels.
ENGINE = (
    ("f-bf16", "feature head, baseline data, trained in bf16, K 1"),
    ("eesd-base", "EESD head, baseline data, K 1"),
    ("eesd-otc", "EESD head, open text continued, K 1"),
    ("f-base", "feature head, baseline data, K 1"),
    ("f-otc", "feature head, open text continued, K 1"),
    ("f-base-lookup", "feature head, baseline data, K 1 + lookups (the shipped best)"),
    ("f-otc-lookup", "feature head, open text continued, K 1 + lookups"),
    ("f-recipe", "feature head of the new recipe, K 1"),
    ("f-recipe-lookup", "feature head of the new recipe, K 1 + lookups (the new best)"),
    ("f-base-lookup-2t", "the shipped best, 2 threads"),
    ("f-recipe-lookup-2t", "the new best, 2 threads"),
)
FIELDS = ("acceptance_rate", "mean_accepted_length", "cost_ratio_c", "verify_cost_ratio",
          "expected_speedup_eq6", "autoregressive_tokens_per_s", "speculative_tokens_per_s",
          "speedup")


def engine_table(prefix, rounds):
    lines = ["| configuration | rounds | α pooled | α | M | c | v | eq. 6 | plain tok/s | tok/s "
             "| speedup | per round | lossless |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for name, label in ENGINE:
        pattern = re.compile(rf"{prefix}{re.escape(name)}" + (r"-r\d+" if rounds else "")
                             + r"\.json")
        runs, accepted, drafted = [], 0, 0
        for path in sorted(p for p in HERE.iterdir() if pattern.fullmatch(p.name)):
            data = load(path)
            runs += [r["overall"] for r in data["results"]]
            for prompt in data["per_prompt"]:
                accepted += sum(run["accepted"] for run in prompt["speculative"])
                drafted += sum(run["drafted"] for run in prompt["speculative"])
        if not runs:  # not run in this table
            continue
        mean = {k: sum(r[k] for r in runs) / len(runs) for k in FIELDS}
        lossless = f"{sum(r['lossless_prompts'] for r in runs)}/{sum(r['prompts'] for r in runs)}"
        each = ", ".join(f"{r['speedup']:.2f}x" for r in runs)
        lines.append(
            f"| {label} | {len(runs)} | {accepted / max(drafted, 1):.3f} | "
            f"{mean['acceptance_rate']:.3f} | "
            f"{mean['mean_accepted_length']:.3f} | {mean['cost_ratio_c']:.3f} | "
            f"{mean['verify_cost_ratio']:.3f} | {mean['expected_speedup_eq6']:.2f}x | "
            f"{mean['autoregressive_tokens_per_s']:.1f} | {mean['speculative_tokens_per_s']:.1f} | "
            f"**{mean['speedup']:.2f}x** | {each} | {lossless} |")
    return lines + [""]


def recipe_table(timings):
    """recipe-timings.json: scripts/build-best-draft.sh's timings.json of the run from a fresh
    clone (seconds per step and in all)."""
    if timings is None:
        return ["(no recipe run)", ""]
    total = timings["total"]
    return ["| collection s | vocabulary s | training s | total | machine | finished |",
            "|---:|---:|---:|---:|---|---|",
            f"| {timings['collect']} | {timings['vocab']} | {timings['train']} | "
            f"{total // 60} min {total % 60:02d} s | {timings['cpu']}, {timings['cores']} cores | "
            f"{timings['finished']} |", ""]


def main():
    lines = ["## Data", ""] + data_table()
    lines += ["## Heads (offline, each on its own data's held-out sequences)", ""] + head_table()
    lines += ["## In the engine: the selection problems (evaluation split, 17-32)", ""]
    lines += engine_table("dev-", False)
    lines += ["## In the engine: the reported evaluation problems (1-16)", ""]
    lines += engine_table("e-", True)
    lines += ["## The new recipe, from a fresh clone", ""]
    lines += recipe_table(load(HERE / "recipe-timings.json"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
