#!/usr/bin/python3
"""Tables (table-MODEL.md) of run.sh's outputs: per exit layer N, the head's training (positions
trained, held-out top-1 agreement before and after, positions/s) and the benches (per controller
and draft vocabulary: speedup, α, M, c, v, eq. 6, lossless prompts).

Usage: table.py DIR MODEL   reads DIR/train-MODEL-n*.json and DIR/bench-MODEL-n*-k1-t*.json
(MODEL: qwen or smollm2) and writes DIR/table-MODEL.md."""
import glob
import json
import os
import re
import sys


def training_rows(directory, model):
    lines = ["| N | positions trained | epochs | agreement before → best | positions/s | status |",
             "|---|---|---|---|---|---|"]
    paths = glob.glob(os.path.join(directory, f"train-{model}-n*.json"))
    for path in sorted(paths, key=lambda p: int(re.search(r"-n(\d+)\.json$", p).group(1))):
        n = int(re.search(r"-n(\d+)\.json$", path).group(1))
        with open(path) as f:
            t = json.load(f)
        best = t["best"]
        lines.append(f"| {n} | {t['positions_trained']:,} | {t['epochs_run']} of {t['epochs']} | "
                     f"{t['agreement_before']:.3f} → **{best['heldout_agreement']:.3f}** "
                     f"(at {best['positions_trained']:,}) | {t['positions_per_s']:.0f} | "
                     f"{t['status']} |")
    return lines


def bench_rows(directory, model):
    lines = ["| N | threads | controller | V' | AR tok/s | spec tok/s | speedup | α | M | c | v | "
             "eq. 6 | lossless |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    pattern = re.compile(r"bench-" + model + r"-n(\d+)-k1-t(\d+)\.json$")
    found = [(pattern.search(p), p) for p in glob.glob(os.path.join(directory, "bench-*.json"))]
    found = sorted(((m, p) for m, p in found if m),
                   key=lambda mp: (int(mp[0].group(1)), int(mp[0].group(2))))
    for match, path in found:
        n, threads = int(match.group(1)), int(match.group(2))
        with open(path) as f:
            bench = json.load(f)
        ar = bench["autoregressive"]["decode_tokens_per_s"]
        for result in bench["results"]:
            o = result["overall"]
            lines.append(
                f"| {n} | {threads} | {result['controller']} | {result['draft_vocab'] or 'full'} | "
                f"{ar:.1f} | {o['speculative_tokens_per_s']:.1f} | **{o['speedup']:.2f}x** | "
                f"{o['acceptance_rate']:.3f} | {o['mean_accepted_length']:.2f} | "
                f"{o['cost_ratio_c']:.3f} | {o['verify_cost_ratio']:.2f} | "
                f"{o['expected_speedup_eq6']:.2f} | {o['lossless_prompts']}/{o['prompts']} |")
    return lines


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    directory, model = sys.argv[1], sys.argv[2]
    text = "\n".join(training_rows(directory, model) + [""] + bench_rows(directory, model)) + "\n"
    with open(os.path.join(directory, f"table-{model}.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
