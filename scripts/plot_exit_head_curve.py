#!/usr/bin/python3
"""Plots exit-head learning curves (scripts/train_exit_head.py --curve, or its --json summary).

    scripts/plot_exit_head_curve.py CURVE.json [CURVE2.json ...] --out plot.png [--title T]

Draws held-out top-1 agreement against positions trained, one line per file, each labelled from
its settings (exit layer N of L, the data directory's name, and what differs between the files:
learning rate, batch, negatives, seed; the file name when the labels still clash), with the kept
(best) evaluation marked by a star. A lower panel shows each run's train loss since the previous
evaluation (train_loss_recent). A missing or malformed file exits 1 with a one-line message
naming it. Needs matplotlib (Debian: python3-matplotlib, installed by scripts/setup.sh).
"""

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

# Settings that tell runs apart in a label when they differ between the files plotted.
kDistinguishing = (("lr", "lr"), ("batch", "batch"), ("negatives", "negatives"),
                   ("max_len", "max-len"), ("eval_positions", "eval-positions"),
                   ("seed", "seed"))


class InputError(Exception):
    """A missing or malformed curve file; the message names it."""


def load_curve(path):
    """{"path", "settings", "points", "best"} of a curve file (or a --json summary with a curve),
    each point checked for positions_trained and heldout_agreement."""
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("curve"), list):
        raise InputError(f"{path}: not a learning curve (no \"curve\" list; write one with "
                         "train_exit_head.py --curve)")
    settings = document.get("settings")
    if not isinstance(settings, dict):
        raise InputError(f"{path}: missing the \"settings\" object")
    points = []
    for index, point in enumerate(document["curve"]):
        if not isinstance(point, dict):
            raise InputError(f"{path}: curve[{index}] is not an object")
        positions, agreement = point.get("positions_trained"), point.get("heldout_agreement")
        if not _is_number(positions) or positions < 0:
            raise InputError(f"{path}: curve[{index}]: positions_trained {positions!r} is not a "
                             "non-negative number")
        if agreement is not None and not (_is_number(agreement) and 0.0 <= agreement <= 1.0):
            raise InputError(f"{path}: curve[{index}]: heldout_agreement {agreement!r} is not a "
                             "number in [0, 1] or null")
        loss = point.get("train_loss_recent")
        if loss is not None and not _is_number(loss):
            raise InputError(f"{path}: curve[{index}]: train_loss_recent {loss!r} is not a number "
                             "or null")
        points.append(point)
    if not any(p["heldout_agreement"] is not None for p in points):
        raise InputError(f"{path}: no held-out agreement to plot (trained with --heldout 0?)")
    best = document.get("best")
    if best is not None and not (isinstance(best, dict) and
                                 _is_number(best.get("positions_trained")) and
                                 _is_number(best.get("heldout_agreement"))):
        raise InputError(f"{path}: \"best\" is not a point with positions_trained and "
                         "heldout_agreement")
    return {"path": path, "settings": settings, "points": points, "best": best}


def labels_of(curves):
    """One label per curve: exit layer and data name, the settings that differ, the file name
    when that is not enough."""
    labels = []
    for curve in curves:
        s = curve["settings"]
        layer = s.get("exit_layer", "?")
        text = f"N {layer}" + (f" of {s['num_layers']}" if "num_layers" in s else "")
        text += f", {s.get('data_name') or os.path.basename(str(s.get('data_dir', '?')))}"
        for key, name in kDistinguishing:
            if len({json.dumps(c["settings"].get(key)) for c in curves}) > 1:
                value = s.get(key)
                text += f", {name} {'all' if key == 'eval_positions' and value == 0 else value}"
        labels.append(text)
    for i, label in enumerate(labels):
        if labels.count(label) > 1:
            labels[i] = f"{label} ({os.path.basename(curves[i]['path'])})"
    return labels


def plot(curves, out, title):
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True,
                                         gridspec_kw={"height_ratios": [3, 1.4]})
    for curve, label in zip(curves, labels_of(curves)):
        points = [p for p in curve["points"] if p["heldout_agreement"] is not None]
        line, = top.plot([p["positions_trained"] for p in points],
                         [p["heldout_agreement"] for p in points], marker="o", markersize=3,
                         label=label)
        best = curve["best"]
        if best is not None:
            top.plot([best["positions_trained"]], [best["heldout_agreement"]], marker="*",
                     markersize=14, color=line.get_color(), markeredgecolor="black",
                     linestyle="none")
            top.annotate(f"{best['heldout_agreement']:.4f}",
                         (best["positions_trained"], best["heldout_agreement"]),
                         textcoords="offset points", xytext=(0, 9), ha="center", fontsize=8,
                         color=line.get_color())
        losses = [p for p in curve["points"] if p.get("train_loss_recent") is not None]
        bottom.plot([p["positions_trained"] for p in losses],
                    [p["train_loss_recent"] for p in losses], color=line.get_color(),
                    marker=".", markersize=3)
    top.plot([], [], marker="*", markersize=10, color="grey", markeredgecolor="black",
             linestyle="none", label="kept (best) evaluation")
    top.set_ylabel("held-out top-1 agreement")
    top.set_title(title)
    top.grid(True, alpha=0.3)
    top.legend(fontsize=8, loc="lower right")
    bottom.set_xlabel("positions trained")
    bottom.set_ylabel("train loss\n(since previous eval)")
    bottom.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Plot exit-head learning curves (train_exit_head.py --curve files).")
    parser.add_argument("curves", metavar="CURVE.json", nargs="+")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--title", default="Exit head: held-out top-1 agreement while training")
    args = parser.parse_args(argv)
    try:
        curves = [load_curve(path) for path in args.curves]
        plot(curves, args.out, args.title)
    except InputError as error:
        print(f"plot_exit_head_curve: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"plot_exit_head_curve: error: {args.out}: cannot write ({error})", file=sys.stderr)
        return 1
    print(args.out)
    return 0


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


if __name__ == "__main__":
    sys.exit(main())
