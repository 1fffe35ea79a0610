#!/usr/bin/env python3
"""The tables of 2026-11-29-feature-head.md, from the JSON files beside this script.

  python3 docs/results/2026-11-29-feature-head/tables.py

Prints markdown: the collected data (collect.json), then per head (eesd.json, feature.json,
feature-d2.json, eesd-4ep.json, feature-4ep.json: the trainers' --json summaries) its held-out agreements before and after
training, the 2-token chain's expected tokens (feature heads), the training cost, and the draft's
cost c in multiply-adds relative to a full forward (model.json: the model's shape; both heads read
the best configuration's 16,384-id draft vocabulary), with the speedups these imply for one
sequence when verification costs a full forward whatever its rows (v = 1): (1 + a1) / (1 + c) for
one draft token, (1 + a1 + a1 * a2|1) / (1 + 2c) for a chain of two. Missing files are skipped
with a note. Then the heads in the engine: `selfspec bench` of each configuration on the 16
HumanEval calibration problems (cal-*.json, which chose the shapes) and, per round, on the 16
evaluation problems (e-NAME-rK.json): α, M, c, v, eq. 6's expected speedup, the tokens/s of plain
decoding and of the configuration, and their ratio, per configuration the mean over its rounds
(each round's ratio listed too); and the best configuration's recipe timed from a fresh clone
(recipe-timings.json); SmolLM2-135M's feature head: its data (s-collect.json, s-feature.json) and
its calibration benches (s-cal-*.json). Standard library only.
"""
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DRAFT_VOCAB = 16384


def load(name):
    path = HERE / f"{name}.json"
    if not path.exists() or path.stat().st_size == 0:  # not run, or still running
        return None
    with path.open() as f:
        return json.load(f)


def layer_macs(m):
    """Multiply-adds of one token through one transformer layer of the model."""
    h, kv = m["hidden_size"], m["num_kv_heads"] * m["head_dim"]
    q = m["num_heads"] * m["head_dim"]
    return h * (q + 2 * kv) + q * h + 3 * h * m["intermediate_size"]


def costs(model, eesd_layer):
    """c of each head: its multiply-adds over a full forward's (every layer + the full LM head)."""
    full = model["num_layers"] * layer_macs(model) + model["vocab_size"] * model["hidden_size"]
    head = DRAFT_VOCAB * model["hidden_size"]
    eesd = (eesd_layer + 1) * layer_macs(model) + head
    feature = layer_macs(model) + 2 * model["hidden_size"] ** 2 + head
    return {"eesd": eesd / full, "feature": feature / full, "full_gmac": full / 1e9}


def fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def data_table(collect, summary):
    """The collection (collect.json) and the split every head trained on (a trainer summary:
    the same sequences are held out for every head, whole)."""
    if collect is None:
        return ["(no collect run)", ""]
    lines = ["| sequences | positions | forwards | collection s | positions/s | train positions "
             "| held-out positions | evaluated at each evaluation |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    split = ("–", "–", "–") if summary is None else (
        summary["train_positions"], summary["heldout_positions"], summary["evaluated_positions"])
    lines.append(f"| {collect['sequences']} | {collect['positions']} | {collect['forwards']} | "
                 f"{collect['seconds']:.0f} | {collect['positions_per_s']:.0f} | {split[0]} | "
                 f"{split[1]} | {split[2]} |")
    return lines + [""]


def head_rows(model):
    c = costs(model, 4) if model else None
    lines = ["| head | held-out agreement before | depth 1 (a1) | depth 2 given depth 1 (a2\\|1) "
             "| chain of 2: tokens a round | c | K = 1: (1 + a1) / (1 + c) "
             "| K = 2: chain / (1 + 2c) | positions trained | training s | positions/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, label, kind in (("eesd", "EESD exit head after layer 4", "eesd"),
                              ("feature", "feature head (EAGLE-1 training)", "feature"),
                              ("feature-d2", "feature head + depth-2 loss", "feature"),
                              ("eesd-4ep", "EESD exit head, 4 epochs", "eesd"),
                              ("feature-4ep", "feature head, 4 epochs", "feature")):
        s = load(name)
        if s is None:
            lines.append(f"| {label} | (no run) |||||||||| ")
            continue
        best = s["best"]
        a1 = best["heldout_agreement"]
        a2 = best.get("depth2_agreement_given_depth1")
        chain = best.get("chain_expected_tokens")
        ck = c[kind] if c else None
        k1 = (1 + a1) / (1 + ck) if ck is not None else None
        k2 = chain / (1 + 2 * ck) if ck is not None and chain is not None else None
        lines.append(
            f"| {label} | {fmt(s['agreement_before'])} | {fmt(a1)} | {fmt(a2)} | {fmt(chain)} | "
            f"{fmt(ck)} | {fmt(k1, 2)}x | {fmt(k2, 2)}{'x' if k2 else ''} | "
            f"{s['positions_trained']} | {s['seconds']:.0f} | {s['positions_per_s'] or 0:.0f} |")
    lines.append("")
    if c:
        lines.append(f"A full forward: {c['full_gmac']:.2f} GMAC a token.")
        lines.append("")
    return lines


# The engine configurations (run.sh's BENCH), in the order of the tables, with their labels.
ENGINE = (
    ("f-k1", "feature head (q8_0), K 1"),
    ("f-k1-q4k", "feature head (q4_k), K 1"),
    ("f-k1-t2", "feature head (q8_0), K 1, tree 1:2"),
    ("f-k1-t4", "feature head (q8_0), K 1, tree 1:4"),
    ("f-q4k-t2", "feature head (q4_k), K 1, tree 1:2"),
    ("f-q4k-t4", "feature head (q4_k), K 1, tree 1:4"),
    ("f-k2", "feature head (q8_0), K 2"),
    ("eesd-k1", "EESD head, 4 epochs (q4_k), K 1"),
    ("shipped-k1", "shipped EESD head (238k positions), K 1"),
    ("f-q4k-lookup", "feature head (q4_k), K 1 + lookups"),
    ("shipped-lookup", "shipped best configuration: EESD + lookups"),
    ("f-q4k-lookup-2t", "feature head (q4_k), K 1 + lookups, 2 threads"),
    ("shipped-lookup-2t", "shipped best configuration, 2 threads"),
    ("untrained", "no training: lookups alone (3/2/4)"),
    ("untrained-2t", "no training: lookups alone, 2 threads"),
)
# SmolLM2-135M's configurations (run.sh's SBENCH).
SMOL = (
    ("f-k1", "feature head (q8_0), K 1"),
    ("f-k1-q4_0", "feature head (q4_0), K 1"),
    ("f-lookup", "feature head (q8_0), K 1 + lookups"),
    ("f-thompson-lookup", "feature head (q8_0), Thompson K ≤ 3 + lookups"),
    ("lookup", "lookups alone (its best configuration)"),
)
FIELDS = ("acceptance_rate", "mean_accepted_length", "cost_ratio_c", "verify_cost_ratio",
          "expected_speedup_eq6", "autoregressive_tokens_per_s", "speculative_tokens_per_s",
          "speedup")


def bench_rows(path):
    """{controller: overall fields} of one bench JSON, with its lossless count."""
    with path.open() as f:
        data = json.load(f)
    return {r["controller"]: r["overall"] for r in data["results"]}


def engine_table(prefix, rounds, configurations=ENGINE):
    """One row per configuration and controller: the mean over the files prefix-NAME(-rK).json."""
    lines = ["| configuration | controller | rounds | α | M | c | v | eq. 6 | plain tok/s | tok/s "
             "| speedup | per round | lossless |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for name, label in configurations:
        pattern = re.compile(rf"{re.escape(prefix)}{re.escape(name)}" + (r"-r\d+" if rounds else "")
                             + r"\.json")
        files = sorted(p for p in HERE.iterdir() if pattern.fullmatch(p.name))
        per = {}
        for path in files:
            for controller, overall in bench_rows(path).items():
                per.setdefault(controller, []).append(overall)
        for controller, runs in per.items():
            mean = {k: sum(r[k] for r in runs) / len(runs) for k in FIELDS}
            lossless = f"{sum(r['lossless_prompts'] for r in runs)}/{sum(r['prompts'] for r in runs)}"
            each = ", ".join(f"{r['speedup']:.2f}x" for r in runs)
            lines.append(
                f"| {label} | {controller} | {len(runs)} | {mean['acceptance_rate']:.3f} | "
                f"{mean['mean_accepted_length']:.3f} | {mean['cost_ratio_c']:.3f} | "
                f"{mean['verify_cost_ratio']:.3f} | {mean['expected_speedup_eq6']:.2f}x | "
                f"{mean['autoregressive_tokens_per_s']:.1f} | "
                f"{mean['speculative_tokens_per_s']:.1f} | **{mean['speedup']:.2f}x** | {each} | "
                f"{lossless} |")
    return lines + [""]


def recipe_table(timings):
    """recipe-timings.json: scripts/build-best-draft.sh's timings.json of the rebuild from a fresh
    clone (seconds per step and in all)."""
    if timings is None:
        return ["(no recipe timing)", ""]
    lines = ["| collection s | vocabulary s | training s | total | machine | finished |",
             "|---:|---:|---:|---:|---|---|"]
    total = timings["total"]
    lines.append(f"| {timings['collect']} | {timings['vocab']} | {timings['train']} | "
                 f"{total // 60} min {total % 60:02d} s | {timings['cpu']}, {timings['cores']} "
                 f"cores | {timings['finished']} |")
    return lines + [""]


def main():
    model = load("model")
    lines = ["## Data", ""] + data_table(load("collect"), load("eesd"))
    lines += ["## Heads", ""] + head_rows(model)
    lines += ["## In the engine: calibration problems (choosing the shapes)", ""]
    lines += engine_table("cal-", False)
    lines += ["## In the engine: evaluation problems", ""] + engine_table("e-", True)
    lines += ["## SmolLM2-135M in the engine: calibration prompts", ""]
    lines += data_table(load("s-collect"), load("s-feature"))
    lines += engine_table("s-cal-", False, SMOL)
    lines += ["## The best configuration's recipe, from a fresh clone", ""]
    lines += recipe_table(load("recipe-timings"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
