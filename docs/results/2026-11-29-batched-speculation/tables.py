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


def interleaved_single():
    """The q-single rounds: per round, medians over the 16 prompts of decode tokens/s from bench
    (plain, speculative) and from bench-serving at concurrency 1 (plain, fixed), run back to back.
    None when there is no such run."""
    rounds = []
    for r in range(1, 10):
        bench, serving = load(f"q-single-bench-{r}"), load(f"q-single-serving-{r}")
        if bench is None or serving is None:
            break
        prompts = bench["per_prompt"]
        rounds.append({
            "round": r,
            "bench_plain": statistics.median(p["autoregressive"]["decode_tokens_per_s"]
                                             for p in prompts),
            "bench_spec": statistics.median(p["speculative"][0]["decode_tokens_per_s"]
                                            for p in prompts),
            "serving_plain": statistics.median(per_request(serving, 1, "plain")),
            "serving_fixed": statistics.median(per_request(serving, 1, "fixed")),
        })
    return rounds or None


def interleaved_single_table(rounds):
    if rounds is None:
        return ["(no q-single run)", ""]
    lines = ["Qwen, 16 prompts, 64 tokens; per round the medians over the prompts of decode "
             "tokens/s (after the first token), the two commands back to back (bench first in "
             "odd rounds).", "",
             "| round | bench plain | bench speculative | bench-serving B = 1 plain "
             "| bench-serving B = 1 fixed | B = 1 fixed / bench speculative |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rounds:
        lines.append(f"| {r['round']} | {r['bench_plain']:.1f} | {r['bench_spec']:.1f} | "
                     f"{r['serving_plain']:.1f} | {r['serving_fixed']:.1f} | "
                     f"{r['serving_fixed'] / r['bench_spec']:.3f} |")
    ratio = statistics.median(r["serving_fixed"] / r["bench_spec"] for r in rounds)
    lines += ["", f"Median over rounds of B = 1 fixed / bench speculative: {ratio:.3f}.", ""]
    return lines


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


# Multiply-adds of one Qwen2.5-Coder-1.5B token through every weight matrix (its GGUF's shape:
# 28 layers, width 1536, K/V width 256, FFN 8960, vocabulary 151,936 in the LM head).
QWEN_MACS = 28 * (1536 * (1536 + 256 + 256 + 1536) + 3 * 1536 * 8960) + 151936 * 1536


def cpu_peak(peak):
    """Clock (GHz) and vpdpbusd zmm per cycle from the probe's lines, or None."""
    if peak is None:
        return None
    clock = per_cycle = None
    for line in peak["lines"]:
        if line.startswith("core clock ~") and clock is None:
            clock = float(line.split("~")[1].split()[0])
        if line.startswith("vpdpbusd zmm"):
            per_cycle = float(line.rsplit("=", 1)[1].split()[0])
    return (clock, per_cycle) if clock and per_cycle else None


def ceiling_table(vt, serving, bench, peak):
    """What 1.3x over plain continuous batching at concurrency B takes, from v(T) (q-vt), the
    per-token acceptance α of fixed-length speculation at B (q-serving) and the draft forward's
    cost c (q-bench, relative to a full forward): with one draft per sequence a step costs
    c·v(B) + v(2B) forwards of one token and emits (1 + α) tokens per sequence, against v(B) for
    plain decoding's one. The bound leaves out everything else (lookups, queueing, prefill)."""
    if vt is None or serving is None or bench is None:
        return ["(needs q-vt, q-serving and q-bench)", ""]
    v = vt["verify_cost"]["v"]
    ms = vt["verify_cost"]["forward_ms"]
    c = statistics.median(p["speculative"][0]["cost_ratio_c"] for p in bench["per_prompt"])
    peak_gmacs = None
    found = cpu_peak(peak)
    if found:
        clock, per_cycle = found
        peak_gmacs = clock * per_cycle * 64 * vt["threads_per_rank"]
    lines = [f"Draft cost c = {c:.3f} (median over q-bench's prompts); "
             f"{QWEN_MACS / 1e9:.2f} GMAC a token.", "",
             "| B | v(B) | v(2B) | α (fixed, at B) | bound with 1 draft each | α that 1.3x needs "
             "| T = 2B rate measured GMAC/s | rate 1.3x needs at measured α |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for b in serving["concurrency"]:
        if 2 * b > len(v):
            continue
        summary = [x for x in serving["summary"] if x["concurrency"] == b and x["mode"] == "fixed"]
        if not summary:
            continue
        alpha = summary[0]["mean_acceptance_rate"]
        step = c * v[b - 1] + v[2 * b - 1]
        bound = (1 + alpha) * v[b - 1] / step
        need_alpha = 1.3 * step / v[b - 1] - 1
        measured = 2 * b * QWEN_MACS / (ms[2 * b - 1] * 1e-3) / 1e9
        verify_budget = (1 + alpha) * v[b - 1] / 1.3 - c * v[b - 1]  # in one-token forwards
        needed = (2 * b * QWEN_MACS / (verify_budget * ms[0] * 1e-3) / 1e9
                  if verify_budget > 0 else None)
        need_text = "–" if needed is None else f"{needed:.0f}"
        if needed is not None and peak_gmacs:
            need_text += f" ({needed / peak_gmacs:.2f} of peak)"
        lines.append(f"| {b} | {v[b - 1]:.2f} | {v[2 * b - 1]:.2f} | {alpha:.3f} | {bound:.2f}x | "
                     f"{need_alpha:.2f}{' (impossible)' if need_alpha > 1 else ''} | "
                     f"{measured:.0f} | {need_text} |")
    lines.append("")
    if found:
        lines.append(f"CPU peak (cpu-peak, ../shared/probes/peak.c): {clock:.2f} GHz, vpdpbusd zmm "
                     f"{per_cycle:.2f} a cycle = {peak_gmacs:.0f} GMAC/s on "
                     f"{vt['threads_per_rank']} cores, before any scale arithmetic.")
    else:
        lines.append("(no cpu-peak run)")
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

    rounds = interleaved_single()
    single = single_sequence(q_serving, q_bench)
    if rounds:
        ratio = statistics.median(r["serving_fixed"] / r["bench_spec"] for r in rounds)
        say(ratio >= 0.97, f"concurrency 1 within 3 % of bench's single-sequence speculative "
            f"tokens/s (Qwen), interleaved rounds (q-single): {ratio:.3f} of it, median over "
            f"{len(rounds)} rounds")
    elif single:
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
            rounds = ratios(serving, b, "goodput")
            g = statistics.median(rounds)
            f = statistics.median(ratios(serving, b, "fixed"))
            plain = [r["tokens_per_s"] for r in serving["runs"]
                     if r["concurrency"] == b and r["mode"] == "plain"]
            spread = max(plain) / min(plain) - 1
            say(g >= 1.0 and g >= 0.95 * max(1.0, f),
                f"{name} B = {b}: goodput {g:.3f}x plain (rounds "
                f"{', '.join(f'{x:.3f}' for x in rounds)}; fixed {f:.2f}x; plain's own spread "
                f"over the rounds {100 * spread:.1f} %): never below plain, within 5 % of the "
                f"better")
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
              "Medians over the prompts of decode tokens/s (after the first token); bench (q-bench, "
              "s-bench) ran apart from the load runs (hours apart since they were remade), so "
              "compare the speedups, not the absolute rates; the interleaved check is the next "
              "table.", "",
              "| model | bench plain | bench speculative | bench speedup | bench-serving B = 1 plain "
              "| bench-serving B = 1 fixed | bench-serving speedup |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, serving, bench in (("Qwen", q_serving, q_bench), ("SmolLM2", s_serving, s_bench)):
        single = single_sequence(serving, bench)
        if single:
            b_spec, b_plain, b_speedup, s_spec, s_plain = single
            lines.append(f"| {name} | {b_plain:.1f} | {b_spec:.1f} | {b_speedup:.2f}x | "
                         f"{s_plain:.1f} | {s_spec:.1f} | {s_spec / s_plain:.2f}x |")
    lines += ["", "### Concurrency 1 against bench, interleaved", ""]
    lines += interleaved_single_table(interleaved_single())
    lines += ["## Poisson arrivals (Qwen)", ""] + poisson_table(load("q-poisson"))
    lines += ["## v(T) (Qwen, CPU)", ""] + verify_cost_table(load("q-vt"))
    lines += ["## What 1.3x over plain batching would take (Qwen)", ""]
    lines += ceiling_table(load("q-vt"), q_serving, q_bench, load("cpu-peak"))
    lines += ["## Token identity", ""] + identity_table()
    if "--check" in sys.argv:
        lines += checks(q_serving, q_llama, s_serving, q_bench)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
