#!/usr/bin/env python3
"""The tables of docs/results/2026-11-29-anchors.md, from the JSON next to this script (run.sh
writes it): the calibration runs (cal-s-*, cal-l-*) and the evaluation rounds (e-s-*, e-l-*).

    python3 docs/results/2026-11-29-anchors/tables.py > /tmp/tables.md

Every figure is computed here from the JSON: selfspec's from its bench report (overall figures
of its one result; lookup statistics from the drafter's state after the last prompt, which
counts every prompt's rounds), llama.cpp's from
scripts/dev/llama_cpp_speculative.py's report (decode tokens / decode seconds over the prompts).
Evaluation figures are medians over the rounds, each round's ratio taken within the round.
"""
import glob
import json
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def selfspec_figures(report):
    """Plain and speculative tokens/s, speedup, α, M, c, v and lookup counts of a bench report."""
    result = report["results"][0]
    overall = result["overall"]
    # The drafter lives through the run's prompts: its state after the last one counts them all.
    state = (result.get("drafter_state_last_prompt") or {}).get("lookup") or {}
    lookup = {key: state.get(key, 0) for key in
              ("rounds", "drafted", "accepted", "tree_rounds", "sourced_nodes", "sourced_accepted")}
    return {
        "plain": overall["autoregressive_tokens_per_s"],
        "spec": overall["speculative_tokens_per_s"],
        "speedup": overall["speedup"],
        "alpha": overall["acceptance_rate"],
        "M": overall["mean_accepted_length"],
        "c": overall["cost_ratio_c"],
        "v": overall["verify_cost_ratio"],
        "lossless": f'{overall["lossless_prompts"]}/{overall["prompts"]}',
        "lookup": lookup,
    }


def llama_figures(report):
    overall = report["overall"]
    return {
        "tps": overall["decode_tokens_per_s"],
        "alpha": overall["acceptance_rate"],
        "drafted": overall["drafted"],
        "accepted": overall["accepted"],
        "args": " ".join(report["extra_args"]),
        "config": report["config"],
    }


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def calibration():
    lines = ["## Calibration: the 16 HumanEval calibration problems, 1 thread", ""]
    lines += ["| selfspec configuration | plain tok/s | tok/s | speedup | α | M | c | v | "
              "lookup rounds (grafted) | lookup tokens accepted / proposed | "
              "sourced nodes accepted / grafted | lossless |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    plain = None
    for path in sorted(glob.glob(os.path.join(HERE, "cal-s-*.json"))):
        name = os.path.basename(path)[len("cal-s-"):-len(".json")]
        f = selfspec_figures(load(os.path.basename(path)))
        lk = f["lookup"]
        if name == "best":
            plain = f["plain"]
        lines.append(
            f'| {name} | {fmt(f["plain"], 1)} | {fmt(f["spec"], 1)} | {fmt(f["speedup"])}x | '
            f'{fmt(f["alpha"], 3)} | {fmt(f["M"])} | {fmt(f["c"], 3)} | {fmt(f["v"])} | '
            f'{lk["rounds"]} ({lk["tree_rounds"]}) | {lk["accepted"]} / {lk["drafted"]} | '
            f'{lk["sourced_accepted"]} / {lk["sourced_nodes"]} | {f["lossless"]} |')
    lines += ["", "| llama.cpp configuration | options | tok/s | acceptance | accepted / drafted | "
              "vs llama.cpp plain | vs selfspec plain |", "|---|---|---|---|---|---|---|"]
    llama_plain = None
    paths = sorted(glob.glob(os.path.join(HERE, "cal-l-*.json")))
    for path in paths:
        if path.endswith("cal-l-plain.json"):
            llama_plain = llama_figures(load(os.path.basename(path)))["tps"]
    for path in paths:
        name = os.path.basename(path)[len("cal-l-"):-len(".json")]
        f = llama_figures(load(os.path.basename(path)))
        drafted = "—" if f["drafted"] is None else f'{f["accepted"]} / {f["drafted"]}'
        vs_llama = f["tps"] / llama_plain if llama_plain else None
        vs_self = f["tps"] / plain if plain else None
        lines.append(f'| {name} | {f["args"] or "defaults"} | {fmt(f["tps"], 1)} | '
                     f'{fmt(f["alpha"], 3)} | {drafted} | {fmt(vs_llama)}x | {fmt(vs_self)}x |')
    return lines


def evaluation():
    runs = {}
    for path in glob.glob(os.path.join(HERE, "e-*-t*-r*.json")):
        m = re.fullmatch(r"e-([sl])-(.+)-t(\d+)-r(\d+)\.json", os.path.basename(path))
        engine, name, threads, rnd = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        report = load(os.path.basename(path))
        figures = selfspec_figures(report) if engine == "s" else llama_figures(report)
        runs.setdefault(threads, {}).setdefault(rnd, {})[(engine, name)] = figures
    lines = ["## Evaluation: the 16 HumanEval evaluation problems, side by side", ""]
    for threads in sorted(runs):
        rounds = runs[threads]
        complete = {k: v for k, v in rounds.items() if ("s", "best") in v and ("l", "plain") in v}
        lines += [f"### {threads} thread(s), {len(complete)} round(s)", "",
                  "| engine | configuration | tok/s (median) | per round | α / acceptance | M | "
                  "vs own plain | vs llama.cpp plain | selfspec best over it |",
                  "|---|---|---|---|---|---|---|---|---|"]
        keys = sorted({key for r in complete.values() for key in r}, key=lambda k: (k[0] != "s", k[1]))
        # selfspec's plain decoding: measured inside every selfspec run; the best run's is used.
        self_plain = [r[("s", "best")]["plain"] for r in complete.values()]
        llama_plain = [r[("l", "plain")]["tps"] for r in complete.values()]
        lines.append(f'| selfspec | plain (in the best run) | {fmt(statistics.median(self_plain), 1)} | '
                     f'{", ".join(fmt(x, 1) for x in self_plain)} | — | — | 1.00x | '
                     f'{fmt(statistics.median([s / l for s, l in zip(self_plain, llama_plain)]))}x | — |')
        for engine, name in keys:
            per = [r[(engine, name)] for r in complete.values() if (engine, name) in r]
            tps = [f["spec"] if engine == "s" else f["tps"] for f in per]
            rs = [r for r in complete.values() if (engine, name) in r]
            if engine == "s":
                own = statistics.median([f["speedup"] for f in per])
                alpha = statistics.median([f["alpha"] for f in per])
                mean_m = fmt(statistics.median([f["M"] for f in per]))
            else:
                own = statistics.median([f["tps"] / r[("l", "plain")]["tps"] for f, r in zip(per, rs)])
                alphas = [f["alpha"] for f in per if f["alpha"] is not None]
                alpha = statistics.median(alphas) if alphas else None
                mean_m = "—"
            vs_llama = statistics.median([t / r[("l", "plain")]["tps"] for t, r in zip(tps, rs)])
            best_over = statistics.median([r[("s", "best")]["spec"] / t for t, r in zip(tps, rs)])
            lines.append(f'| {"selfspec" if engine == "s" else "llama.cpp"} | {name} | '
                         f'{fmt(statistics.median(tps), 1)} | {", ".join(fmt(x, 1) for x in tps)} | '
                         f'{fmt(alpha, 3)} | {mean_m} | {fmt(own)}x | {fmt(vs_llama)}x | '
                         f'{fmt(best_over)}x |')
        lines.append("")
    return lines


def order_check():
    """The order-check run: untrained, then best, at 2 threads (the reverse of the rounds)."""
    lines = ["## Order check: 2 threads, untrained first and best second", "",
             "| run | plain tok/s | tok/s | speedup |", "|---|---|---|---|"]
    for name in ("untrained", "best"):
        path = os.path.join(HERE, f"o-s-{name}-t2.json")
        if not os.path.exists(path):
            return []
        f = selfspec_figures(load(os.path.basename(path)))
        lines.append(f'| {name} | {fmt(f["plain"], 1)} | {fmt(f["spec"], 1)} | {fmt(f["speedup"])}x |')
    return lines


def main():
    print("\n".join(calibration() + [""] + evaluation() + order_check()))


if __name__ == "__main__":
    main()
