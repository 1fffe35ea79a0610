#!/usr/bin/env python3
"""The JSON work of scripts/dev/llama_cpp_side_by_side.sh, which runs this file with python3
(standard library only). Four commands:

    record ENGINE RAW_JSON ROUND THREADS POSITION LOAD_BEFORE LOAD_AFTER STARTED WALL_S PROMPT GEN
        checks and parses one run's JSON and prints one JSON line describing the run (exit 1 with
        a message if the output is not what was expected)
    summary RUN_JSON_LINE
        one line of progress for the log
    meta META_JSON BUILD_JSON LABEL GGUF THREADS ROUNDS PROMPT GEN SELFSPEC SELFSPEC_VERSION
         SELFSPEC_GIT LLAMA_BENCH CPU COMMAND DATE
        writes the run description (THREADS: comma-separated) that report reads
    report RUNS_JSONL OUT_DIR META_JSON
        writes OUT_DIR/side_by_side.json and OUT_DIR/side_by_side.md

The arguments are taken as they come (no option parsing: a label or a CPU name may start with a
dash); an unknown command or a wrong number of arguments exits 1 with a message.
"""
import inspect
import json
import os
import statistics
import sys


def fail(message):
    """Exits 1 with the message, prefixed with the script's name, on stderr."""
    sys.exit(f"llama_cpp_side_by_side: error: {message}")


def load_json(path, what):
    """The JSON in the file at path; fails naming what (and the error) if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{what}: cannot read {path} as JSON ({e})")


def positive_number(value, what):
    """value as a float; fails naming what unless it is a number (not a bool) above 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        fail(f"{what} is {value!r}, expected a positive number")
    return float(value)


def record(engine, raw, round_, threads, position, load_before, load_after, started, wall_s,
           prompt, gen):
    """Checks and parses one run's raw JSON (llama-bench's list of tests or selfspec bench's
    report) and prints the run's description as one JSON line (sorted keys)."""
    threads, prompt, gen = int(threads), int(prompt), int(gen)
    what = f"{engine} round {round_}, {threads} thread(s) ({raw})"
    report = load_json(raw, what)
    run = {"engine": engine, "round": int(round_), "threads": threads,
           "position_in_round": int(position), "started": started, "wall_s": float(wall_s),
           "loadavg_before": load_before, "loadavg_after": load_after,
           "raw_file": os.path.abspath(raw)}
    if engine == "llama.cpp":
        if not isinstance(report, list):
            fail(f"{what}: expected llama-bench's JSON list of tests")
        pp = [t for t in report if t.get("n_prompt") == prompt and t.get("n_gen") == 0]
        tg = [t for t in report if t.get("n_prompt") == 0 and t.get("n_gen") == gen]
        if len(pp) != 1 or len(tg) != 1:
            fail(f"{what}: expected one pp{prompt} and one tg{gen} test, found "
                 f"{len(pp)} and {len(tg)}")
        for test in (pp[0], tg[0]):
            if test.get("n_threads") != threads:
                fail(f"{what}: llama-bench ran {test.get('n_threads')} threads, asked {threads}")
        run["prefill_tokens_per_s"] = positive_number(pp[0].get("avg_ts"), f"{what}: pp avg_ts")
        run["decode_tokens_per_s"] = positive_number(tg[0].get("avg_ts"), f"{what}: tg avg_ts")
    elif engine == "selfspec":
        if not isinstance(report, dict):
            fail(f"{what}: expected selfspec bench's JSON object")
        if report.get("interrupted"):
            fail(f"{what}: selfspec bench reports an interrupted run")
        if report.get("threads_per_rank") != threads:
            fail(f"{what}: selfspec ran {report.get('threads_per_rank')} threads, asked {threads}")
        run["prefill_tokens_per_s"] = positive_number(
            report.get("prefill_tokens_per_s"), f"{what}: prefill_tokens_per_s")
        run["decode_tokens_per_s"] = positive_number(
            report.get("decode_tokens_per_s"), f"{what}: decode_tokens_per_s")
        run["decode_fraction_of_measured_read_bandwidth"] = positive_number(
            report.get("decode_fraction_of_measured_read_bandwidth"),
            f"{what}: decode_fraction_of_measured_read_bandwidth")
        bandwidth = report.get("measured_bandwidth_gbps") or {}
        run["measured_read_bandwidth_gbps"] = positive_number(
            bandwidth.get("read_all_ranks"), f"{what}: measured_bandwidth_gbps.read_all_ranks")
    else:
        fail(f"unknown engine {engine}")
    run["report"] = report
    print(json.dumps(run, sort_keys=True))


def summary(line):
    """Prints one line of progress for a run (a line that record printed)."""
    r = json.loads(line)
    extra = ""
    if "decode_fraction_of_measured_read_bandwidth" in r:
        extra = (f", {100 * r['decode_fraction_of_measured_read_bandwidth']:.0f}% of "
                 f"{r['measured_read_bandwidth_gbps']:.1f} GB/s")
    print(f"round {r['round']} {r['engine']:9} T={r['threads']}: prefill "
          f"{r['prefill_tokens_per_s']:.1f} tok/s, decode {r['decode_tokens_per_s']:.2f} tok/s"
          f"{extra} (load {r['loadavg_before']} -> {r['loadavg_after']}, {r['wall_s']:.1f} s)")


def stats(values):
    """The median, min and max of values, with the values themselves."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "samples": values}


def report(runs_jsonl, out_dir, meta_json):
    """Writes out_dir/side_by_side.json and out_dir/side_by_side.md from the runs (one record
    line each in runs_jsonl) and the run description (meta_json, written by meta)."""
    meta = load_json(meta_json, "run description")
    with open(runs_jsonl, encoding="utf-8") as f:
        runs = [json.loads(line) for line in f if line.strip()]
    engines = ("llama.cpp", "selfspec")
    rows = []
    for t in meta["threads"]:
        row = {"threads": t}
        for engine in engines:
            mine = [r for r in runs if r["engine"] == engine and r["threads"] == t]
            if len(mine) != meta["rounds"]:
                fail(f"{engine} at {t} thread(s): {len(mine)} runs, expected {meta['rounds']}")
            row[engine] = {
                "prefill_tokens_per_s": stats([r["prefill_tokens_per_s"] for r in mine]),
                "decode_tokens_per_s": stats([r["decode_tokens_per_s"] for r in mine]),
            }
            if engine == "selfspec":
                row[engine]["decode_fraction_of_measured_read_bandwidth"] = stats(
                    [r["decode_fraction_of_measured_read_bandwidth"] for r in mine])
                row[engine]["measured_read_bandwidth_gbps"] = stats(
                    [r["measured_read_bandwidth_gbps"] for r in mine])
        for kind in ("prefill", "decode"):
            key = f"{kind}_tokens_per_s"
            row[f"{kind}_ratio_selfspec_over_llama_cpp"] = (
                row["selfspec"][key]["median"] / row["llama.cpp"][key]["median"])
        rows.append(row)

    # What the reports say about the model and the builds (from the first run of each engine).
    first_llama = next(r["report"] for r in runs if r["engine"] == "llama.cpp")
    first_selfspec = next(r["report"] for r in runs if r["engine"] == "selfspec")
    pp = next(t for t in first_llama if t.get("n_gen") == 0)
    selfspec_info = {
        "binary": meta["selfspec_binary"],
        "version": meta["selfspec_version"],
        "git": meta["selfspec_git"],
        "isa": first_selfspec.get("isa"),
        "backend": first_selfspec.get("backend"),
        "weight_dtype": first_selfspec.get("weight_dtype"),
        "weight_bytes_by_format": first_selfspec.get("weight_bytes_by_format"),
        "bytes_per_decode_token": first_selfspec.get("bytes_per_decode_token"),
        "parameters": first_selfspec.get("parameters"),
    }
    llama_info = {
        "package": f"{meta['llama_cpp_build']['package']}=={meta['llama_cpp_build']['version']}",
        "commit": meta["llama_cpp_build"]["llama_cpp_commit"],
        "build_commit": pp.get("build_commit"),
        "backends": pp.get("backends"),
        "model_type": pp.get("model_type"),
        "model_size_bytes": pp.get("model_size"),
        "model_n_params": pp.get("model_n_params"),
        "bin": meta["llama_bench"],
    }
    # The 1-minute load average includes the runs' own threads (up to T), so it exceeds the CPU
    # count only when something else was runnable too.
    loads = [float(r[k].split()[0]) for r in runs for k in ("loadavg_before", "loadavg_after")]
    result = {
        "label": meta["label"],
        "date": meta["date"],
        "command": meta["command"],
        "model": {"gguf": meta["gguf"], "file_bytes": meta["gguf_bytes"]},
        "settings": {k: meta[k] for k in ("threads", "rounds", "prompt", "gen")},
        "machine": {"cpu": meta["cpu"], "nproc": meta["nproc"],
                    "loadavg_1min_min": min(loads), "loadavg_1min_max": max(loads),
                    "loaded": max(loads) > meta["nproc"]},
        "llama_cpp": llama_info,
        "selfspec": selfspec_info,
        "rows": rows,
        "runs": runs,
        "note": "medians over rounds of one repetition each; llama.cpp's tg decodes from an empty "
                "context, selfspec's decode follows its prompt",
    }
    with open(os.path.join(out_dir, "side_by_side.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")

    def fmt(x):
        """A tokens/s figure: one decimal from 100 up, else two."""
        return f"{x:.1f}" if x >= 100 else f"{x:.2f}"

    formats = selfspec_info["weight_bytes_by_format"] or {}
    formats_text = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in
                             sorted(formats.items(), key=lambda kv: -kv[1]))
    title = "llama.cpp vs selfspec" + (f": {meta['label']}" if meta["label"] else "")
    lines = [
        f"## {title}",
        "",
        f"- model: `{meta['gguf']}` ({meta['gguf_bytes'] / 2**20:.1f} MiB, "
        f"{meta['gguf_bytes']} bytes; llama.cpp: {llama_info['model_type']})",
        f"- llama.cpp: commit {llama_info['commit']} ({llama_info['package']}, "
        f"{llama_info['backends']} backend), `llama-bench -p {meta['prompt']} -n {meta['gen']} "
        f"-r 1`",
        f"- selfspec: {meta['selfspec_version']}, checkout {meta['selfspec_git']}, ISA "
        f"{selfspec_info['isa']}, weights {selfspec_info['weight_dtype']} ({formats_text}), "
        f"`selfspec bench --prompt-len {meta['prompt']} --gen {meta['gen']} --reps 1`",
        f"- CPU: {meta['cpu']} ({meta['nproc']} CPUs); 1-minute load average "
        f"{min(loads):.2f}-{max(loads):.2f} over the runs",
    ]
    if max(loads) > meta["nproc"]:
        lines.append(
            f"- **warning**: the 1-minute load average reached {max(loads):.2f} on "
            f"{meta['nproc']} CPUs: other work competed with the runs, and multi-threaded "
            f"figures are the first to suffer")
    lines += [
        f"- medians of {meta['rounds']} interleaved rounds (engine order alternating); ratio = "
        f"selfspec / llama.cpp",
        f"- command: `{meta['command']}`",
        f"- date: {meta['date']}",
        "",
        "| threads | llama.cpp prefill tok/s | selfspec prefill tok/s | ratio "
        "| llama.cpp decode tok/s | selfspec decode tok/s | ratio "
        "| selfspec decode / stream bandwidth |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ll, ss = row["llama.cpp"], row["selfspec"]
        fraction = ss["decode_fraction_of_measured_read_bandwidth"]["median"]
        bandwidth = ss["measured_read_bandwidth_gbps"]["median"]
        lines.append(
            f"| {row['threads']} "
            f"| {fmt(ll['prefill_tokens_per_s']['median'])} "
            f"| {fmt(ss['prefill_tokens_per_s']['median'])} "
            f"| {row['prefill_ratio_selfspec_over_llama_cpp']:.2f} "
            f"| {fmt(ll['decode_tokens_per_s']['median'])} "
            f"| {fmt(ss['decode_tokens_per_s']['median'])} "
            f"| {row['decode_ratio_selfspec_over_llama_cpp']:.2f} "
            f"| {100 * fraction:.0f}% of {bandwidth:.1f} GB/s |")
    with open(os.path.join(out_dir, "side_by_side.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def meta(meta_path, build_json, label, gguf, threads, rounds, prompt, gen, selfspec,
         selfspec_version, selfspec_git, llama_bench, cpu, command, date):
    """Writes the run description that report reads to meta_path: the settings, the model's
    size, the llama.cpp build record (build_json), the selfspec binary and the machine."""
    with open(build_json, encoding="utf-8") as f:
        build = json.load(f)
    description = {
        "label": label, "gguf": gguf, "gguf_bytes": os.path.getsize(gguf),
        "threads": [int(t) for t in threads.split(",")],
        "rounds": int(rounds), "prompt": int(prompt), "gen": int(gen),
        "selfspec_binary": selfspec, "selfspec_version": selfspec_version,
        "selfspec_git": selfspec_git, "llama_bench": llama_bench, "llama_cpp_build": build,
        "cpu": cpu, "nproc": os.cpu_count(), "command": command, "date": date,
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
