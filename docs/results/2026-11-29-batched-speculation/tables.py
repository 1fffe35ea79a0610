#!/usr/bin/env python3
"""The tables of 2026-11-29-batched-speculation.md, from the JSON files beside this script.

  python3 docs/results/2026-11-29-batched-speculation/tables.py [--check]

Prints markdown: per model, the load runs (aggregate tokens/s of plain, fixed-length and
goodput-sized speculation at each concurrency, medians over rounds, with llama.cpp's batched
decoding of the same file beside them), latencies, the single-sequence reference, the Poisson run,
v(T), and per-request token identity across modes, concurrencies and TP degrees. With --check it
also states each of issue 34's targets as met or not. Missing files are skipped with a note.
Standard library only.
"""
import gzip
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(name):
    """NAME.json, or NAME.json.gz (the runs with every request's token times)."""
    path = HERE / f"{name}.json"
    if path.exists():
        with path.open() as f:
            return json.load(f)
    packed = HERE / f"{name}.json.gz"
    if packed.exists():
        with gzip.open(packed, "rt") as f:
            return json.load(f)
    return None


def median_runs(serving, concurrency, mode, key):
    values = [r[key] for r in serving["runs"]
              if r["concurrency"] == concurrency and r["mode"] == mode]
    return statistics.median(values) if values else None


def ratios(serving, concurrency, mode):
    """Per round: mode's aggregate tokens/s over plain's at the same concurrency."""
    by_round = {}
    for r in serving["runs"]:
        if r["concurrency"] == concurrency:
            by_round.setdefault(r["round"], {})[r["mode"]] = r["tokens_per_s"]
    return [m[mode] / m["plain"] for m in by_round.values() if mode in m and "plain" in m]


def llama_rows(llama):
    if llama is None:
        return {}
    return {row["concurrency"]: row for row in llama["rows"]}


def fmt(value, digits=1):
    return "–" if value is None else f"{value:.{digits}f}"


def load_table(title, serving, llama):
    lines = [f"### {title}", ""]
    if serving is None:
        return lines + ["(no run)", ""]
    rows = llama_rows(llama)
    lines.append("| B | plain tok/s | fixed tok/s | fixed / plain | goodput tok/s | goodput / plain "
                 "| llama.cpp tok/s (gen incl. prefill / S_TG) | best / llama.cpp |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in serving["concurrency"]:
        plain = median_runs(serving, b, "plain", "tokens_per_s")
        fixed = median_runs(serving, b, "fixed", "tokens_per_s")
        good = median_runs(serving, b, "goodput", "tokens_per_s")
        rf, rg = ratios(serving, b, "fixed"), ratios(serving, b, "goodput")
        row = rows.get(b)
        ll = row["gen_tokens_per_s_incl_prefill"]["median"] if row else None
        stg = row["gen_tokens_per_s"]["median"] if row else None
        best = max(v for v in (plain, fixed, good) if v is not None)
        lines.append(
            f"| {b} | {fmt(plain)} | {fmt(fixed)} | "
            f"{fmt(statistics.median(rf) if rf else None, 2)}x | {fmt(good)} | "
            f"{fmt(statistics.median(rg) if rg else None, 2)}x | {fmt(ll)} / {fmt(stg)} | "
            f"{fmt(best / ll if ll else None, 2)}x |")
    lines.append("")
    lines.append("| B | mode | TTFT p50 / p99 ms | ITL p50 / p99 ms | e2e p50 / p99 s | request tok/s "
                 "| α | M | passes (draft) | most sequences in a pass |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in serving["summary"]:
        lines.append(
            f"| {s['concurrency']} | {s['mode']} | {1e3 * s['ttft_s']['p50']:.0f} / "
            f"{1e3 * s['ttft_s']['p99']:.0f} | {1e3 * s['itl_s']['p50']:.1f} / "
            f"{1e3 * s['itl_s']['p99']:.1f} | {s['e2e_s']['p50']:.2f} / {s['e2e_s']['p99']:.2f} | "
            f"{s['mean_request_tokens_per_s']:.1f} | {s['mean_acceptance_rate']:.3f} | "
            f"{s['mean_accepted_length']:.2f} | {s['batch']['passes']} ({s['batch']['draft_passes']}) "
            f"| {s['batch']['max_sequences']} |")
    lines.append("")
    return lines


def per_request(serving, concurrency, mode):
    return [q["tokens_per_s"] for r in serving["runs"]
            if r["concurrency"] == concurrency and r["mode"] == mode for q in r["requests"]]


def single_sequence(serving, bench):
    """Concurrency 1 against bench's one-sequence run of the same prompts: medians over the
    prompts (requests) of decode tokens/s, plain and speculative, and of the speedup."""
    if serving is None or bench is None:
        return None
    prompts = bench["per_prompt"]
    bench_spec = statistics.median(p["speculative"][0]["decode_tokens_per_s"] for p in prompts)
    bench_plain = statistics.median(p["autoregressive"]["decode_tokens_per_s"] for p in prompts)
    bench_speedup = statistics.median(p["speculative"][0]["speedup"] for p in prompts)
    serving_spec = statistics.median(per_request(serving, 1, "fixed"))
    serving_plain = statistics.median(per_request(serving, 1, "plain"))
    return bench_spec, bench_plain, bench_speedup, serving_spec, serving_plain


def verify_cost_table(vt):
    if vt is None:
        return ["(no v(T) run)", ""]
    cost = vt["verify_cost"]
    v = cost["v"]
    ms = cost.get("forward_ms", [])
    shown = [t for t in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64) if t <= len(v)]
    lines = ["| T | " + " | ".join(str(t) for t in shown) + " |",
             "|---|" + "---:|" * len(shown),
             "| v(T) | " + " | ".join(f"{v[t - 1]:.2f}" for t in shown) + " |"]
    if ms:
        lines.append("| ms | " + " | ".join(f"{ms[t - 1]:.1f}" for t in shown) + " |")
    lines.append("")
    lines.append(f"Context {cost['context']} tokens; ISA {vt.get('isa')}; "
                 f"{vt.get('threads_per_rank')} threads.")
    return lines + [""]


def tokens_of(serving):
    out = {}
    for r in serving["runs"]:
        for q in r["requests"]:
            out[(r["concurrency"], r["mode"], q["request"])] = q["tokens"]
    return out


def identity_table():
    lines = ["| run | requests × (B, mode) | equal to plain B = 1 of the same run | "
             "equal to TP 1's plain B = 1 |", "|---|---:|---:|---:|"]
    reference = {}
    for name in ("z-tp1", "z-tp2", "z-tp1-inv", "z-tp2-inv"):
        data = load(name)
        if data is None:
            continue
        tokens = tokens_of(data)
        base = {k[2]: v for k, v in tokens.items() if k[0] == 1 and k[1] == "plain"}
        if name.startswith("z-tp1"):
            reference[name.replace("tp1", "")] = base
        ref = reference.get(name.replace("tp2", "").replace("tp1", ""), {})
        same = sum(v == base[k[2]] for k, v in tokens.items())
        cross = sum(v == ref.get(k[2]) for k, v in tokens.items()) if ref else None
        lines.append(f"| {name} | {len(tokens)} | {same} | {'–' if cross is None else cross} |")
    return lines + [""]


def poisson_table(poisson):
    if poisson is None:
        return ["(no Poisson run)", ""]
    lines = [f"Rate {poisson['rate']} requests/s, {poisson['requests']} requests, concurrency "
             f"{poisson['concurrency']}.", "",
             "| mode | tok/s | vs plain | TTFT p50 / p99 ms | ITL p99 ms | e2e p50 / p99 s | α | M |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in poisson["summary"]:
        lines.append(
            f"| {s['mode']} | {s['tokens_per_s']:.1f} | {s['speedup_vs_plain']:.2f}x | "
            f"{1e3 * s['ttft_s']['p50']:.0f} / {1e3 * s['ttft_s']['p99']:.0f} | "
            f"{1e3 * s['itl_s']['p99']:.1f} | {s['e2e_s']['p50']:.2f} / {s['e2e_s']['p99']:.2f} | "
            f"{s['mean_acceptance_rate']:.3f} | {s['mean_accepted_length']:.2f} |")
    return lines + [""]


def checks(q_serving, q_llama, s_serving, q_bench):
    out = ["### Issue 34's targets", ""]

    def say(ok, text):
        out.append(f"* {'met' if ok else 'NOT met'}: {text}")

    single = single_sequence(q_serving, q_bench)
    if single:
        b_spec, b_plain, b_speedup, s_spec, s_plain = single
        ratio = (s_spec / s_plain) / b_speedup
        say(ratio >= 0.97, f"concurrency 1 within 3 % of bench's single-sequence speculative "
            f"decoding (Qwen), as speedups over plain decoding of the same run (the machine's "
            f"speed drifted between the runs): {s_spec / s_plain:.2f}x vs {b_speedup:.2f}x "
            f"({ratio:.3f})")
    if q_serving:
        for b in (4, 8):
            best = max(statistics.median(ratios(q_serving, b, m)) for m in ("fixed", "goodput"))
            say(best >= 1.3, f"B = {b}: speculation ≥ 1.3x plain continuous batching (Qwen): "
                f"{best:.2f}x")
    for name, serving in (("Qwen", q_serving), ("SmolLM2", s_serving)):
        if serving is None:
            continue
        for b in serving["concurrency"]:
            g = statistics.median(ratios(serving, b, "goodput"))
            f = statistics.median(ratios(serving, b, "fixed"))
            say(g >= 1.0 and g >= 0.95 * max(1.0, f),
                f"{name} B = {b}: goodput {g:.2f}x plain (fixed {f:.2f}x): never below plain, "
                f"within 5 % of the better")
    rows = llama_rows(q_llama)
    if q_serving and 8 in rows:
        best = max(median_runs(q_serving, 8, m, "tokens_per_s") for m in ("plain", "fixed",
                                                                            "goodput"))
        ll = rows[8]["gen_tokens_per_s_incl_prefill"]["median"]
        say(best >= 1.5 * ll, f"B = 8 aggregate ≥ 1.5x llama.cpp's batched decoding (Qwen): "
            f"{best:.1f} vs {ll:.1f} tok/s ({best / ll:.2f}x)")
    return out + [""]


def main():
    q_serving, s_serving = load("q-serving"), load("s-serving")
    q_llama, s_llama = load("q-llama"), load("s-llama")
    q_bench, s_bench = load("q-bench"), load("s-bench")
    lines = ["## Load runs", ""]
    lines += load_table("Qwen2.5-Coder-1.5B (Q4_K_M), best configuration", q_serving, q_llama)
    lines += load_table("SmolLM2-135M (Q4_1), best configuration", s_serving, s_llama)
    lines += ["## One sequence at a time", "",
              "Medians over the prompts of decode tokens/s (after the first token); the two "
              "commands ran minutes apart, so compare the speedups, not the absolute rates.", "",
              "| model | bench plain | bench speculative | bench speedup | bench-serving B = 1 plain "
              "| bench-serving B = 1 fixed | bench-serving speedup |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, serving, bench in (("Qwen", q_serving, q_bench), ("SmolLM2", s_serving, s_bench)):
        single = single_sequence(serving, bench)
        if single:
            b_spec, b_plain, b_speedup, s_spec, s_plain = single
            lines.append(f"| {name} | {b_plain:.1f} | {b_spec:.1f} | {b_speedup:.2f}x | "
                         f"{s_plain:.1f} | {s_spec:.1f} | {s_spec / s_plain:.2f}x |")
    lines += ["", "## Poisson arrivals (Qwen)", ""] + poisson_table(load("q-poisson"))
    lines += ["## v(T) (Qwen, CPU)", ""] + verify_cost_table(load("q-vt"))
    lines += ["## Token identity", ""] + identity_table()
    if "--check" in sys.argv:
        lines += checks(q_serving, q_llama, s_serving, q_bench)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
