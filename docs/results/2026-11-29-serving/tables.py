#!/usr/bin/env python3
"""The tables (markdown, stdout) and the memory plot of the serving study, from the JSON files
run.sh wrote next to this script (serve_load.py's records; .json or .json.gz).

    python3 docs/results/2026-11-29-serving/tables.py [--plot rss.png]
"""

import argparse
import glob
import gzip
import json
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    for path in (os.path.join(HERE, name + ".json"), os.path.join(HERE, name + ".json.gz")):
        if os.path.exists(path):
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                return json.load(f)
    return None


def names(prefix):
    found = set()
    for path in glob.glob(os.path.join(HERE, prefix + "*.json*")):
        found.add(re.sub(r"\.json(\.gz)?$", "", os.path.basename(path)))
    return sorted(found)


def ms(value):
    return "–" if value is None else f"{1e3 * value:.0f}"


def outcomes(record):
    o = record["outcomes"]
    return f"{o['ok']} / {o['overload']} / {o['error']} / {o['timeout']}"


def tune_table():
    rows = ["| server | concurrency | prompts | tok/s | per-request tok/s (p50) | TTFT p50 ms |",
            "|---|---|---|---|---|---|"]
    for name in names("tune-"):
        r = load(name)
        rows.append(f"| {name[len('tune-'):]} | {r['concurrency']} | calibration | "
                    f"{r['tokens_per_s']:.2f} | {r['request_tokens_per_s']['p50']:.2f} | "
                    f"{ms(r['ttft_s']['p50'])} |")
    return "\n".join(rows)


def load_runs():
    """{(concurrency, server): [record per round]} and the rounds' pairing."""
    runs = {}
    for name in names("load-"):
        _, round_, concurrency, server = name.split("-", 3)
        runs.setdefault((int(concurrency), server), {})[int(round_)] = load(name)
    return runs


def load_table(runs):
    servers = sorted({s for _, s in runs}, key=lambda s: (not s.startswith("selfspec"), s))
    selfspec = next(s for s in servers if s.startswith("selfspec"))
    rows = ["| concurrency | server | tok/s (rounds) | vs " + " | vs ".join(
        s for s in servers if s != selfspec) + " | per-request tok/s p50 | TTFT p50 / p99 ms | "
            "ITL p50 / p99 ms | TPOT p50 ms | e2e p50 ms | ok / 503 / error / timeout |",
            "|---|---|---|" + "---|" * (len(servers) - 1) + "---|---|---|---|---|---|"]
    for concurrency in sorted({c for c, _ in runs}):
        for server in servers:
            rounds = runs.get((concurrency, server), {})
            if not rounds:
                continue
            tps = [rounds[r]["tokens_per_s"] for r in sorted(rounds)]
            ratios = []
            for other in servers:
                if other == selfspec:
                    continue
                if server != selfspec:
                    ratios.append("")
                    continue
                theirs = runs.get((concurrency, other), {})
                per_round = [rounds[r]["tokens_per_s"] / theirs[r]["tokens_per_s"]
                             for r in sorted(rounds) if r in theirs]
                ratios.append(" ".join(f"{x:.2f}x" for x in per_round))
            ttft = statistics.mean(rounds[r]["ttft_s"]["p50"] for r in rounds)
            ttft99 = statistics.mean(rounds[r]["ttft_s"]["p99"] for r in rounds)
            itl = statistics.mean(rounds[r]["itl_s"]["p50"] for r in rounds)
            itl99 = statistics.mean(rounds[r]["itl_s"]["p99"] for r in rounds)
            tpot = statistics.mean(rounds[r]["tpot_s"]["p50"] for r in rounds)
            e2e = statistics.mean(rounds[r]["e2e_s"]["p50"] for r in rounds)
            rq = statistics.mean(rounds[r]["request_tokens_per_s"]["p50"] for r in rounds)
            oks = sum(rounds[r]["outcomes"]["ok"] for r in rounds)
            bad = {k: sum(rounds[r]["outcomes"][k] for r in rounds)
                   for k in ("overload", "error", "timeout")}
            rows.append(
                f"| {concurrency} | {server} | {statistics.mean(tps):.2f} "
                f"({', '.join(f'{t:.2f}' for t in tps)}) | " + " | ".join(ratios) +
                f" | {rq:.2f} | {ms(ttft)} / {ms(ttft99)} | {ms(itl)} / {ms(itl99)} | "
                f"{ms(tpot)} | {ms(e2e)} | {oks} / {bad['overload']} / {bad['error']} / "
                f"{bad['timeout']} |")
    return "\n".join(rows)


def overload_table():
    rows = ["| server | rate req/s | duration s | requests | ok / 503 / error / timeout | tok/s | "
            "TTFT p50 / p99 ms | e2e p50 / p99 ms | RSS MiB first / max / last |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in names("overload-"):
        r = load(name)
        rss = r.get("rss_mib", {})
        rows.append(
            f"| {name[len('overload-'):]} | {r['rate']:.2f} | {r['duration']:.0f} | "
            f"{r['requests']} | {outcomes(r)} | {r['tokens_per_s']:.2f} | "
            f"{ms(r['ttft_s']['p50'])} / {ms(r['ttft_s']['p99'])} | "
            f"{ms(r['e2e_s']['p50'])} / {ms(r['e2e_s']['p99'])} | "
            f"{rss.get('first', 0):.0f} / {rss.get('max', 0):.0f} / {rss.get('last', 0):.0f} |")
    return "\n".join(rows)


def identity_table():
    record = load("identity")
    rows = ["| load run | responses equal to `generate` alone |", "|---|---|"]
    for run in record["runs"]:
        rows.append(f"| {run['run']} | {run['identical']} / {run['requests']} |")
    total = sum(r["identical"] for r in record["runs"])
    count = sum(r["requests"] for r in record["runs"])
    rows.append(f"| all ({record['prompts_generated_alone']} prompts) | {total} / {count} |")
    return "\n".join(rows)


def plot_rss(path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name in names("overload-"):
        samples = load(name).get("rss_mib", {}).get("samples", [])
        if samples:
            ax.plot([s[0] for s in samples], [s[1] for s in samples],
                    label=name[len("overload-"):])
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident memory, MiB")
    ax.set_title("10 minutes at twice the sustained rate")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", help="also draw the overload runs' memory to this PNG")
    args = parser.parse_args()
    print("### llama-server's speculation and selfspec's sizing, tuned on calibration prompts\n")
    print(tune_table())
    runs = load_runs()
    if runs:
        print("\n### Load: evaluation prompts, closed loop\n")
        print(load_table(runs))
    if load("identity"):
        print("\n### Lossless under load: selfspec's responses against `generate`\n")
        print(identity_table())
    if names("overload-"):
        print("\n### Overload: 10 minutes at twice the sustained rate\n")
        print(overload_table())
        if args.plot:
            plot_rss(args.plot)


if __name__ == "__main__":
    main()
