#!/usr/bin/env python3
"""Report and plots of a benchmark sweep (scripts/slurm/bench_sweep.sbatch).

    python3 scripts/plot_sweep.py RESULTS_DIR [--out DIR]

RESULTS_DIR is the sweep's results directory: summary.jsonl (one line per run: tp, nodes, method,
controller, status, ... and "result_file", the run's `selfspec bench --out` JSON, relative to the
directory; else the bench JSON embedded as "result") and, when there, job.json. Writes to --out
(default: RESULTS_DIR):

  report.md          the job, a table of every run (skipped, failed and interrupted ones with
                     their status and note) and the plots
  report.json        the same table as JSON: {"job": job.json or null, "runs": [...],
                     "plots": [...]}
  tokens_per_s.png   decode tokens/s against TP, one colour per method, one line style per node
                     count
  speedup.png        decode speedup of each self-speculative method over the autoregressive run
                     at the same TP and node count (its tokens/s over the autoregressive tokens/s)
  comm_per_token.png communication time per decoded token (ms) against TP, per method and node
                     count: bench's time in collectives over the decoded tokens (the
                     "autoregressive" comm_ms_per_token, or the speculative run's "phases_s"
                     comm)

Only runs with status "ok" are plotted. A missing or malformed input exits non-zero with a
message naming the file. Needs matplotlib (Debian: python3-matplotlib, installed by
scripts/setup.sh).
"""

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

AUTOREGRESSIVE = "autoregressive"
REQUIRED_FIELDS = ("run", "tp", "nodes", "method", "status")
LINE_STYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D"]
PLOTS = {"tokens_per_s": "tokens_per_s.png", "speedup": "speedup.png",
         "comm_per_token": "comm_per_token.png"}


class InputError(Exception):
    """A missing or malformed input file; the message names it."""


# ---- Reading ----

def read_json_file(path):
    """The JSON value in `path`, or InputError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not readable JSON ({error})") from None


def load_summary(path):
    """The records of summary.jsonl, one per non-empty line, each checked for REQUIRED_FIELDS."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise InputError(f"{path}: not found (is this a bench_sweep results directory?)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not readable ({error})") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not a JSON line ({error})") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number}: not a JSON object")
        missing = [field for field in REQUIRED_FIELDS if field not in record]
        if missing:
            raise InputError(f"{path}:{number}: missing {', '.join(missing)}")
        if not all(isinstance(record[f], int) and record[f] > 0 for f in ("tp", "nodes")):
            raise InputError(f"{path}:{number}: tp and nodes must be positive integers")
        records.append(record)
    if not records:
        raise InputError(f"{path}: no runs")
    return records


def load_result(results_dir, record):
    """The bench JSON of an "ok" run: its result_file, else the embedded "result"; None for runs
    that did not finish. InputError when an ok run's result is missing or not a bench result."""
    if record["status"] != "ok":
        return None
    result_file = record.get("result_file")
    path = os.path.join(results_dir, result_file) if result_file else None
    if path and os.path.exists(path):
        result = read_json_file(path)
        where = path
    elif isinstance(record.get("result"), dict):
        result, where = record["result"], f"summary.jsonl run {record['run']}"
    else:
        raise InputError(f"{path or os.path.join(results_dir, 'summary.jsonl')}: run "
                         f"{record['run']} is ok but its bench result is missing")
    if not isinstance(result, dict) or "decode_tokens_per_s" not in result:
        raise InputError(f"{where}: not a `selfspec bench` result (no decode_tokens_per_s)")
    if record["method"] != AUTOREGRESSIVE and not result.get("speculative"):
        raise InputError(f"{where}: run {record['run']} is {record['method']} but its bench "
                         "result has no \"speculative\" entries")
    return result


def load_job(results_dir):
    """job.json, or None when the sweep did not get to write it."""
    path = os.path.join(results_dir, "job.json")
    return read_json_file(path) if os.path.exists(path) else None


# ---- Figures of one run ----

def method_label(record):
    """"autoregressive", or the drafter and controller, e.g. "layer-skip + adaptive"."""
    if record["method"] == AUTOREGRESSIVE or not record.get("controller"):
        return record["method"]
    return f"{record['method']} + {record['controller']}"


def speculative_entry(result, controller):
    """The result's "speculative" entry of `controller` (else its first), or None."""
    entries = result.get("speculative") or []
    for entry in entries:
        if entry.get("controller") == controller:
            return entry
    return entries[0] if entries else None


def comm_ms_per_token(result, entry, record):
    """Communication ms per decoded token: for an autoregressive run bench's "autoregressive"
    comm_ms_per_token; for a speculative one its entry's "phases_s" comm over the "autoregressive"
    tokens (the same tokens; greedy decoding is lossless); else the summary's comm_ms_per_token;
    None where there is none."""
    autoregressive = result.get("autoregressive") or {}
    if entry is None and autoregressive.get("comm_ms_per_token") is not None:
        return autoregressive["comm_ms_per_token"]
    comm = (entry.get("phases_s") or {}).get("comm") if entry is not None else None
    tokens = autoregressive.get("tokens")
    if comm is not None and tokens:
        return 1e3 * comm / tokens
    return record.get("comm_ms_per_token")


def row_of(record, result):
    """One table row: the summary's fields and, for an ok run, its figures."""
    row = {"run": record["run"], "tp": record["tp"], "nodes": record["nodes"],
           "ranks_per_node": record.get("ranks_per_node",
                                        math.ceil(record["tp"] / record["nodes"])),
           "node_list": record.get("node_list"), "method": method_label(record),
           "status": record["status"], "exit_code": record.get("exit_code"),
           "seconds": record.get("seconds"), "note": record.get("note") or "",
           "decode_tokens_per_s": None, "speedup": None, "bench_speedup": None,
           "acceptance_rate": None, "comm_ms_per_token": None}
    if result is None:
        return row
    entry = None
    if record["method"] != AUTOREGRESSIVE:
        entry = speculative_entry(result, record.get("controller"))  # load_result checked it
    if entry is not None:
        row.update(decode_tokens_per_s=entry.get("decode_tokens_per_s"),
                   bench_speedup=entry.get("speedup"),
                   acceptance_rate=entry.get("acceptance_rate"))
    else:
        row["decode_tokens_per_s"] = result.get("decode_tokens_per_s")
    row["comm_ms_per_token"] = comm_ms_per_token(result, entry, record)
    return row


def add_speedups(rows):
    """speedup = a self-speculative run's tokens/s over the ok autoregressive run's at the same
    TP and node count (None without one)."""
    baseline = {(r["tp"], r["nodes"]): r["decode_tokens_per_s"] for r in rows
                if r["method"] == AUTOREGRESSIVE and r["status"] == "ok"}
    for row in rows:
        reference = baseline.get((row["tp"], row["nodes"]))
        if (row["method"] != AUTOREGRESSIVE and row["status"] == "ok" and reference
                and row["decode_tokens_per_s"] is not None):
            row["speedup"] = row["decode_tokens_per_s"] / reference


def build_rows(results_dir, records):
    rows = [row_of(record, load_result(results_dir, record)) for record in records]
    add_speedups(rows)
    return rows


# ---- Plots ----

def series(rows, key):
    """{(method, nodes): [(tp, value)] by TP} of the ok rows that have `key`."""
    out = {}
    for row in rows:
        if row["status"] == "ok" and row[key] is not None:
            out.setdefault((row["method"], row["nodes"]), []).append((row["tp"], row[key]))
    return {k: sorted(v) for k, v in sorted(out.items())}


def styles_of(rows):
    """{method: colour} and {nodes: (line style, marker)}, the same in every plot."""
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    methods = sorted({row["method"] for row in rows})
    node_counts = sorted({row["nodes"] for row in rows})
    return ({m: colours[i % len(colours)] for i, m in enumerate(methods)},
            {n: (LINE_STYLES[i % len(LINE_STYLES)], MARKERS[i % len(MARKERS)])
             for i, n in enumerate(node_counts)})


def plot_lines(path, rows, styles, key, ylabel, title, reference=None):
    """One line per (method, nodes): colour by method, line style and marker by node count."""
    data = series(rows, key)
    colours, node_styles = styles
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for (method, nodes), points in data.items():
        line_style, marker = node_styles[nodes]
        ax.plot([p[0] for p in points], [p[1] for p in points], color=colours[method],
                linestyle=line_style, marker=marker,
                label=f"{method}, {nodes} node{'s' if nodes > 1 else ''}")
    if reference is not None:
        ax.axhline(reference, color="black", linewidth=0.8, linestyle="--")
    if data:
        tps = sorted({p[0] for points in data.values() for p in points})
        values = [p[1] for points in data.values() for p in points if p[1] > 0]
        if values and max(values) > 100 * min(values):
            ax.set_yscale("log")  # e.g. communication from shared memory to slow links
        ax.set_xscale("log", base=2)
        ax.set_xticks(tps)
        ax.set_xticklabels([str(tp) for tp in tps])
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no finished run reports this", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("tensor-parallel degree (TP)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_plots(out_dir, rows):
    paths = {name: os.path.join(out_dir, file) for name, file in PLOTS.items()}
    styles = styles_of(rows)
    plot_lines(paths["tokens_per_s"], rows, styles, "decode_tokens_per_s", "decode tokens/s",
               "Decode speed against TP (line style: node count)")
    plot_lines(paths["speedup"], rows, styles, "speedup", "speedup over autoregressive",
               "Self-speculative speedup over autoregressive at the same TP and node count",
               reference=1.0)
    plot_lines(paths["comm_per_token"], rows, styles, "comm_ms_per_token",
               "communication ms / token",
               "Communication time per decoded token (line style: node count)")
    return paths


# ---- Report ----

def fmt(value, digits=2, suffix=""):
    return "–" if value is None else f"{value:.{digits}f}{suffix}"


def hosts_cell(node_list):
    return ", ".join(node_list) if node_list else "–"


TABLE_COLUMNS = ["run", "TP", "nodes", "ranks/node", "hosts", "method", "status",
                 "decode tok/s", "speedup vs AR", "paired speedup", "acceptance",
                 "comm ms/token", "seconds", "note"]


def table_line(row):
    cells = [row["run"], row["tp"], row["nodes"], row["ranks_per_node"],
             hosts_cell(row["node_list"]), row["method"], row["status"],
             fmt(row["decode_tokens_per_s"], 1), fmt(row["speedup"], 2, "x"),
             fmt(row["bench_speedup"], 2, "x"), fmt(row["acceptance_rate"], 3),
             fmt(row["comm_ms_per_token"], 4), "–" if row["seconds"] is None else row["seconds"],
             row["note"].replace("|", "\\|").replace("\n", " ")]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def job_lines(job):
    if not job:
        return ["No job.json: the sweep did not finish writing it (cut short?)."]
    return [f"Job {job.get('job_id')} ({job.get('job_name')}): {job.get('num_nodes')} node(s) x "
            f"{job.get('ranks_per_node')} ranks ({job.get('nodes')}), status "
            f"**{job.get('status')}**; model `{job.get('model')}`; {job.get('runs_ok')} ok, "
            f"{job.get('runs_failed')} failed, {job.get('runs_skipped')} skipped."]


def best_lines(rows):
    """The fastest ok run of each method."""
    best = {}
    for row in rows:
        if row["status"] == "ok" and row["decode_tokens_per_s"] is not None:
            if row["method"] not in best or (row["decode_tokens_per_s"]
                                             > best[row["method"]]["decode_tokens_per_s"]):
                best[row["method"]] = row
    return [f"- {method}: {fmt(row['decode_tokens_per_s'], 1)} tok/s at TP {row['tp']} on "
            f"{row['nodes']} node(s)" for method, row in sorted(best.items())]


def report_markdown(job, rows, plots):
    counts = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    lines = ["# selfspec benchmark sweep", ""] + job_lines(job) + [
        "", "Runs: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + ".",
        "", "Speedup vs AR: the run's decode tokens/s over the autoregressive run's at the same "
        "TP and node count. Paired speedup: bench's own, against the autoregressive decoding of "
        "the same prompts inside the run. Comm ms/token: time in collectives over decoded "
        "tokens.", "",
        "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    lines += [table_line(row) for row in rows]
    best = best_lines(rows)
    if best:
        lines += ["", "Fastest run of each method:", ""] + best
    lines += ["", "## Plots", ""]
    lines += [f"![{name}]({os.path.basename(path)})" for name, path in plots.items()]
    return "\n".join(lines) + "\n"


def write_report(out_dir, job, rows, plots):
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(report_markdown(job, rows, plots))
    with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as f:
        json.dump({"job": job, "runs": rows,
                   "plots": [os.path.basename(p) for p in plots.values()]}, f, indent=2)
        f.write("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", help="the sweep's results directory (summary.jsonl)")
    parser.add_argument("--out", help="directory for report.md, report.json and the plots "
                                      "(default: RESULTS_DIR)")
    args = parser.parse_args(argv)
    try:
        if not os.path.isdir(args.results_dir):
            raise InputError(f"{args.results_dir}: no such directory")
        records = load_summary(os.path.join(args.results_dir, "summary.jsonl"))
        rows = build_rows(args.results_dir, records)
        job = load_job(args.results_dir)
    except InputError as error:
        print(f"plot_sweep: error: {error}", file=sys.stderr)
        return 1
    out_dir = args.out or args.results_dir
    os.makedirs(out_dir, exist_ok=True)
    plots = write_plots(out_dir, rows)
    write_report(out_dir, job, rows, plots)
    for path in ["report.md", "report.json"] + list(PLOTS.values()):
        print(os.path.join(out_dir, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
