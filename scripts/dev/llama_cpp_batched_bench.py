#!/usr/bin/env python3
"""The parsing and JSON work of scripts/dev/llama_cpp_batched_bench.sh, which runs this file with
python3 (standard library only). Four commands:

    record RAW ROUND CONCURRENCY THREADS PROMPT GEN LOAD_BEFORE LOAD_AFTER STARTED WALL_S
        parses one run's output (llama-batched-bench --output-format jsonl, its stdout), checks
        that it holds exactly the row that was asked for (B = CONCURRENCY sequences of PROMPT
        prompt and GEN generated tokens each, THREADS threads, prompt not shared) and prints one
        JSON line describing the run (exit 1 with a message if it does not)
    summary RUN_JSON_LINE
        one line of progress for the log
    meta META_JSON BUILD_JSON GGUF THREADS CONCURRENCY ROUNDS PROMPT GEN BATCHED_BENCH CPU
         COMMAND DATE
        writes the run description (CONCURRENCY: comma-separated) that report reads
    report RUNS_JSONL OUT_DIR META_JSON
        writes OUT_DIR/batched_bench.json and OUT_DIR/batched_bench.md

The arguments are taken as they come (no option parsing: a CPU name may start with a dash); an
unknown command or a wrong number of arguments exits 1 with a message.
"""
import inspect
import json
import math
import os
import statistics
import sys

# The keys of a llama-batched-bench JSONL row that are read, and what they hold.
kRowKeys = ("n_kv_max", "n_batch", "n_ubatch", "flash_attn", "is_pp_shared", "n_threads",
            "n_threads_batch", "pp", "tg", "pl", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg",
            "t", "speed")
# The figures of a run, as this script names them, in the order of the table.
kFigures = ("prefill_s", "prefill_tokens_per_s", "gen_s", "gen_tokens_per_s",
            "gen_tokens_per_s_per_sequence", "gen_tokens_per_s_incl_prefill", "total_s",
            "total_tokens_per_s")
# llama-batched-bench prints its times with %f (microseconds) and computes its speeds in float:
# a speed is checked against the tokens and the time it claims within this relative tolerance.
kTolerance = 0.01


def fail(message):
    """Exits 1 with the message, prefixed with the script's name, on stderr."""
    sys.exit(f"llama_cpp_batched_bench: error: {message}")


def load_json(path, what):
    """The JSON in the file at path; fails naming what (and the error) if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{what}: cannot read {path} as JSON ({e})")


def positive_number(value, what):
    """value as a float; fails naming what unless it is a finite number (not a bool) above 0."""
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
            or not math.isfinite(value)):
        fail(f"{what} is {value!r}, expected a positive number")
    return float(value)


def parse_rows(text, what):
    """The rows of llama-batched-bench's JSONL output (text): every line that starts with "{",
    as a dict. Blank lines and lines of other text are skipped (the log goes to stderr, but a
    build may print more on stdout); a "{" line that is not a JSON object with the row's keys
    fails, naming what."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            fail(f"{what}: line {number} is not JSON ({e}): {line[:120]}")
        missing = [k for k in kRowKeys if k not in row]
        if missing:
            fail(f"{what}: line {number} lacks {', '.join(missing)}: {line[:120]}")
        rows.append(row)
    return rows


def figures(row, what):
    """The figures of one row, checked: positive times and speeds, and speeds that agree with
    the tokens and times (S_PP = B*PP/T_PP, S_TG = B*TG/T_TG, S = (B*PP + B*TG)/T with the prompt
    not shared). Adds the per-sequence generation speed and the generation speed over the whole
    run, prefill included (B*TG/T)."""
    b, pp, tg = row["pl"], row["pp"], row["tg"]
    out = {
        "prefill_s": positive_number(row["t_pp"], f"{what}: t_pp"),
        "prefill_tokens_per_s": positive_number(row["speed_pp"], f"{what}: speed_pp"),
        "gen_s": positive_number(row["t_tg"], f"{what}: t_tg"),
        "gen_tokens_per_s": positive_number(row["speed_tg"], f"{what}: speed_tg"),
        "total_s": positive_number(row["t"], f"{what}: t"),
        "total_tokens_per_s": positive_number(row["speed"], f"{what}: speed"),
    }
    for key, tokens, seconds in (("prefill_tokens_per_s", b * pp, "prefill_s"),
                                 ("gen_tokens_per_s", b * tg, "gen_s"),
                                 ("total_tokens_per_s", b * (pp + tg), "total_s")):
        expected = tokens / out[seconds]
        if abs(out[key] - expected) > kTolerance * expected:
            fail(f"{what}: {key} is {out[key]}, but {tokens} tokens in {out[seconds]} s make "
                 f"{expected:.3f}")
    out["gen_tokens_per_s_per_sequence"] = out["gen_tokens_per_s"] / b
    out["gen_tokens_per_s_incl_prefill"] = b * tg / out["total_s"]
    return out


def record(raw, round_, concurrency, threads, prompt, gen, load_before, load_after, started,
           wall_s):
    """Parses one run's output (the file raw) and prints the run's description as one JSON line
    (sorted keys)."""
    concurrency, threads, prompt, gen = int(concurrency), int(threads), int(prompt), int(gen)
    what = f"round {round_}, B={concurrency} ({raw})"
    try:
        with open(raw, encoding="utf-8") as f:
            text = f.read()
    except (OSError, ValueError) as e:
        fail(f"{what}: cannot read the output ({e})")
    rows = parse_rows(text, what)
    if len(rows) != 1:
        fail(f"{what}: expected one result row, found {len(rows)} (a row is skipped when the "
             f"context is too small for B*(PROMPT+GEN) tokens)")
    row = rows[0]
    asked = {"pl": concurrency, "pp": prompt, "tg": gen, "n_threads": threads,
             "n_threads_batch": threads, "is_pp_shared": 0}
    for key, value in asked.items():
        if row[key] != value:
            fail(f"{what}: the row has {key} = {row[key]!r}, asked {value}")
    run = {"round": int(round_), "concurrency": concurrency, "threads": threads,
           "prompt_tokens": prompt, "gen_tokens": gen, "n_kv": row["n_kv"],
           "started": started, "wall_s": float(wall_s), "loadavg_before": load_before,
           "loadavg_after": load_after, "raw_file": os.path.abspath(raw), "row": row}
    run.update(figures(row, what))
    print(json.dumps(run, sort_keys=True))


def summary(line):
    """Prints one line of progress for a run (a line that record printed)."""
    r = json.loads(line)
    print(f"round {r['round']} B={r['concurrency']}: prefill {r['prefill_tokens_per_s']:.1f} "
          f"tok/s, generation {r['gen_tokens_per_s']:.2f} tok/s aggregate "
          f"({r['gen_tokens_per_s_per_sequence']:.2f} per sequence) (load {r['loadavg_before']} "
          f"-> {r['loadavg_after']}, {r['wall_s']:.1f} s)")


def stats(values):
    """The median, min and max of values, with the values themselves."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "samples": values}


def fmt(x):
    """A tokens/s figure: one decimal from 100 up, else two."""
    return f"{x:.1f}" if x >= 100 else f"{x:.2f}"


def report(runs_jsonl, out_dir, meta_json):
    """Writes out_dir/batched_bench.json and out_dir/batched_bench.md from the runs (one record
    line each in runs_jsonl) and the run description (meta_json, written by meta)."""
    meta = load_json(meta_json, "run description")
    try:
        with open(runs_jsonl, encoding="utf-8") as f:
            runs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read the runs in {runs_jsonl} ({e})")
    rows = []
    for b in meta["concurrency"]:
        mine = [r for r in runs if r["concurrency"] == b]
        if len(mine) != meta["rounds"]:
            fail(f"B={b}: {len(mine)} runs, expected {meta['rounds']}")
        row = {"concurrency": b, "prompt_tokens": meta["prompt"], "gen_tokens": meta["gen"],
               "n_kv": mine[0]["n_kv"]}
        for key in kFigures:
            row[key] = stats([r[key] for r in mine])
        rows.append(row)
    base = next((r for r in rows if r["concurrency"] == 1), None)
    for row in rows:
        row["gen_tokens_per_s_over_b1"] = (
            row["gen_tokens_per_s"]["median"] / base["gen_tokens_per_s"]["median"]
            if base else None)

    first = runs[0]["row"]
    settings = {k: meta[k] for k in ("threads", "concurrency", "rounds", "prompt", "gen")}
    # -c was B x this; llama.cpp's n_kv_max, the context it made, is B x its per-sequence context.
    per_sequence = sorted({r["row"]["n_kv_max"] // r["concurrency"] for r in runs})
    settings.update({
        "n_kv_max": sorted({r["row"]["n_kv_max"] for r in runs}),
        "ctx_per_sequence": per_sequence[0] if len(per_sequence) == 1 else per_sequence,
        "n_batch": first["n_batch"], "n_ubatch": first["n_ubatch"],
        "flash_attn": first["flash_attn"], "is_pp_shared": first["is_pp_shared"],
        "kv_unified": False, "tg_separate": False,
    })
    # The 1-minute load average includes the run's own threads, so it exceeds the CPU count only
    # when something else was runnable too.
    loads = [float(r[k].split()[0]) for r in runs for k in ("loadavg_before", "loadavg_after")]
    build = meta["llama_cpp_build"]
    result = {
        "date": meta["date"],
        "command": meta["command"],
        "model": {"gguf": meta["gguf"], "file_name": os.path.basename(meta["gguf"]),
                  "file_bytes": meta["gguf_bytes"]},
        "llama_cpp": {"package": f"{build['package']}=={build['version']}",
                      "commit": build["llama_cpp_commit"], "bin": meta["batched_bench"]},
        "settings": settings,
        "machine": {"cpu": meta["cpu"], "nproc": meta["nproc"],
                    "loadavg_1min_min": min(loads), "loadavg_1min_max": max(loads),
                    "loaded": max(loads) > meta["nproc"]},
        "rows": rows,
        "runs": runs,
        "note": "per B the median over rounds of one llama-batched-bench run each; B sequences, "
                "each with its own prompt (not shared); gen_tokens_per_s is S_TG, the aggregate "
                "of all B sequences over the generation phase only; "
                "gen_tokens_per_s_incl_prefill = B*TG/(T_PP+T_TG)",
    }
    with open(os.path.join(out_dir, "batched_bench.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")

    lines = [
        "## llama.cpp batched decoding (llama-batched-bench)",
        "",
        f"- model: `{os.path.basename(meta['gguf'])}` ({meta['gguf_bytes'] / 2**20:.1f} MiB, "
        f"{meta['gguf_bytes']} bytes; `{meta['gguf']}`)",
        f"- llama.cpp: commit {build['llama_cpp_commit']} ({build['package']}=={build['version']}"
        f"), `llama-batched-bench -t {meta['threads']} -npp {meta['prompt']} -ntg {meta['gen']} "
        f"-npl B -c B*{settings['ctx_per_sequence']} --output-format jsonl`, prompt not shared, "
        f"flash_attn {settings['flash_attn']} (-1: auto), n_batch {settings['n_batch']}, "
        f"n_ubatch {settings['n_ubatch']}",
        f"- CPU: {meta['cpu']} ({meta['nproc']} CPUs), {meta['threads']} thread(s); 1-minute "
        f"load average {min(loads):.2f}-{max(loads):.2f} over the runs",
    ]
    if max(loads) > meta["nproc"]:
        lines.append(
            f"- **warning**: the 1-minute load average reached {max(loads):.2f} on "
            f"{meta['nproc']} CPUs: other work competed with the runs, and multi-threaded "
            f"figures are the first to suffer")
    lines += [
        f"- medians of {meta['rounds']} round(s); per sequence: {meta['prompt']} prompt tokens, "
        f"{meta['gen']} generated; S_TG = B*{meta['gen']} / gen s (all sequences, generation "
        f"only); incl. prefill = B*{meta['gen']} / total s",
        f"- command: `{meta['command']}`",
        f"- date: {meta['date']}",
        "",
        "| B | prefill s | prefill tok/s | gen s | S_TG gen tok/s (aggregate) "
        "| per sequence | S_TG / S_TG(B=1) | gen tok/s incl. prefill | total s | S tok/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        m = {k: row[k]["median"] for k in kFigures}
        ratio = row["gen_tokens_per_s_over_b1"]
        lines.append(
            f"| {row['concurrency']} | {m['prefill_s']:.3f} | {fmt(m['prefill_tokens_per_s'])} "
            f"| {m['gen_s']:.3f} | {fmt(m['gen_tokens_per_s'])} "
            f"| {fmt(m['gen_tokens_per_s_per_sequence'])} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} "
            f"| {fmt(m['gen_tokens_per_s_incl_prefill'])} | {m['total_s']:.3f} "
            f"| {fmt(m['total_tokens_per_s'])} |")
    with open(os.path.join(out_dir, "batched_bench.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def meta(meta_path, build_json, gguf, threads, concurrency, rounds, prompt, gen, batched_bench,
         cpu, command, date):
    """Writes the run description that report reads to meta_path: the settings, the model's
    size, the llama.cpp build record (build_json) and the machine."""
    build = load_json(build_json, "llama.cpp build record")
    description = {
        "gguf": gguf, "gguf_bytes": os.path.getsize(gguf), "threads": int(threads),
        "concurrency": [int(b) for b in concurrency.split(",")],
        "rounds": int(rounds), "prompt": int(prompt), "gen": int(gen),
        "batched_bench": batched_bench, "llama_cpp_build": build, "cpu": cpu,
        "nproc": os.cpu_count(), "command": command, "date": date,
    }
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(description, f, indent=2)


COMMANDS = {"record": record, "summary": summary, "meta": meta, "report": report}


def main(argv=None):
    """Runs the command that argv (default: sys.argv[1:]) names with the arguments after it."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        fail(f"no command (known: {', '.join(COMMANDS)})")
    command, args = argv[0], argv[1:]
    if command not in COMMANDS:
        fail(f"unknown command {command}")
    function = COMMANDS[command]
    try:
        inspect.signature(function).bind(*args)
    except TypeError:
        fail(f"{command} takes {len(inspect.signature(function).parameters)} arguments, "
             f"got {len(args)}")
    function(*args)


if __name__ == "__main__":
    main()
