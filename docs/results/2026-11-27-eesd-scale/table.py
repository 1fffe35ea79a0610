#!/usr/bin/python3
"""The table (table.md) of run.sh's benches: per thread count, K, controller and draft
vocabulary, the measured speedup, α, M, c, v (the verification's cost in decode steps), eq. 6's
expected speedup and how many prompts were token-identical to plain decoding.

Usage: table.py [DIR]   reads bench-n*-k*-t*.json in DIR (default: this script's directory) and
writes DIR/table.md."""
import glob
import json
import os
import re
import sys


def rows_of(path):
    match = re.search(r"bench-n(\d+)-k(\d+)-t(\d+)\.json$", path)
    n, k, threads = (int(g) for g in match.groups())
    with open(path) as f:
        bench = json.load(f)
    ar = bench["autoregressive"]["decode_tokens_per_s"]
    for result in bench["results"]:
        o = result["overall"]
        vocab = result["draft_vocab"] or "full"
        yield (threads, n, k, result["controller"], vocab, ar, o)


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    lines = ["| threads | N | K | controller | V' | AR tok/s | spec tok/s | speedup | α | M | c | v "
             "| eq. 6 | lossless |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for path in sorted(glob.glob(os.path.join(directory, "bench-n*-k*-t*.json"))):
        for threads, n, k, controller, vocab, ar, o in rows_of(path):
            lines.append(
                f"| {threads} | {n} | {k} | {controller} | {vocab} | {ar:.1f} | "
                f"{o['speculative_tokens_per_s']:.1f} | **{o['speedup']:.2f}x** | "
                f"{o['acceptance_rate']:.3f} | {o['mean_accepted_length']:.2f} | "
                f"{o['cost_ratio_c']:.3f} | {o['verify_cost_ratio']:.2f} | "
                f"{o['expected_speedup_eq6']:.2f} | {o['lossless_prompts']}/{o['prompts']} |")
    with open(os.path.join(directory, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
