"""The report: check.sh's exit codes and the verdict from the steps, OUTDIR/check.json and
OUTDIR/check.md (rewritten, atomically, after every step, so that whatever ends the run leaves
one) and the step logs in OUTDIR/logs/."""

import datetime
import json
import os
import shlex
import sys

from .machine import REPO

# ---- the verdict ----
# The run's outcome: check.sh's exit codes (scripts/gpu/check.py says what each means), the result
# word the reports give each, and the verdict that picks one from the steps so far.

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_NO_DEVICE, EXIT_BUILD, EXIT_INCOMPLETE = 0, 1, 2, 3, 4, 5
RESULTS = {
    EXIT_PASSED: "passed",
    EXIT_FAILED: "failed",
    EXIT_NO_DEVICE: "no device",
    EXIT_BUILD: "build failed",
    EXIT_INCOMPLETE: "incomplete",
}


def verdict(c):
    """(exit code, summary) from the steps of the Checker c so far."""
    failed = [s["name"] for s in c.steps if s["status"] == "failed"]
    not_run = [s["name"] for s in c.steps if s["status"] == "not run"]
    if c.build_failed:
        return EXIT_BUILD, "the kit, configuration or build failed: " + ", ".join(failed)
    if not c.device["present"]:
        return EXIT_NO_DEVICE, ("no device: " + c.device.get("how", "")
                                + "; the GPU checks did not run")
    if failed:
        return EXIT_FAILED, "failed: " + ", ".join(failed)
    if not_run:
        return EXIT_INCOMPLETE, "incomplete, not run: " + ", ".join(not_run)
    return EXIT_PASSED, "every check passed"


# ---- step logs ----
# The step logs in OUTDIR/logs/: trimmed to their beginning and end, their last lines shown.

LOG_LIMIT = 160 * 1024  # bytes of a step log kept: its first quarter and its end


def trim_file(path):
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size <= LOG_LIMIT:
        return
    with open(path, "rb") as f:
        head = f.read(LOG_LIMIT // 4)
        f.seek(size - (LOG_LIMIT - LOG_LIMIT // 4))
        tail = f.read()
    with open(path, "wb") as f:
        f.write(head)
        f.write(f"\n\n[... {size - len(head) - len(tail)} bytes cut by check.py ...]\n\n".encode())
        f.write(tail)


def tail_lines(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---- check.json ----
# OUTDIR/check.json and OUTDIR/check.md: the report of the run so far, rewritten (atomically)
# after every step, so that whatever ends the run leaves one.

SCHEMA = "selfspec-gpu-check/1"


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def outcome(c):
    """(result, exit code, summary): the final verdict, or how far a run that has none came."""
    if c.final is not None:
        code, summary = c.final
        return RESULTS[code], code, summary
    if c.running_step:
        return "interrupted", None, (f"interrupted or still running during step "
                                     f"'{c.running_step}' (a report the run rewrote last)")
    return "running", None, "running"


def build_report(c):
    result, code, summary = outcome(c)
    return {
        "schema": SCHEMA,
        "result": result,
        "exit_code": code,
        "summary": summary,
        "started_utc": c.started,
        "updated_utc": utc_now(),
        "elapsed_s": round(c.budget.elapsed(), 1),
        "budget_s": c.args.budget,
        "command": shlex.join(sys.argv),
        "repo": REPO,
        "build_dir": c.build,
        "kit": c.kit_info,
        "device": c.device,
        "environment": c.environment,
        "build": c.build_info,
        "exit_codes": {str(k): v for k, v in RESULTS.items()},
        "steps": c.steps,
    }


def write_reports(c):
    report = build_report(c)
    replace_file(c.outdir, "check.json", json.dumps(report, indent=2) + "\n")
    replace_file(c.outdir, "check.md", render_markdown(report))


def replace_file(outdir, name, text):
    """Writes OUTDIR/name through a hidden temporary file, so that a reader never sees half."""
    tmp = os.path.join(outdir, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(outdir, name))


# ---- check.md ----
# check.md: the report of check.json for a reader - a headline, the steps, then tables of the
# dependencies, the benches and the generate comparisons, and the failures.

FOOTER = ("Exit codes: 0 passed, 1 a check failed, 2 bad arguments, 3 no device, "
          "4 kit/configure/build failed, 5 incomplete (time budget).\n")

DECODE_COLUMNS = ["step", "graphs", "pdl", "gemv", "fused", "decode_tok_s", "decode_ms_per_token",
                  "effective_gbps", "device_copy_gbps", "device_peak_gbps",
                  "fraction_of_device_copy_bandwidth", "fraction_of_device_peak_bandwidth",
                  "graphs_speedup", "pdl_speedup", "fusion_speedup", "prefill_tok_s", "load_s"]
NCU_COLUMNS = ["kernel", "grid", "block", "launches_per_forward", "mean_us", "us_per_forward"]
GENERATE_COLUMNS = (
    ("cli_graph_replay", ["model", "mode", "tokens", "identical", "decode_tok_s_graphs_on",
                          "decode_tok_s_graphs_off"]),
    ("cli_speculative", ["model", "drafter", "tokens", "lossless", "drafted", "acceptance_rate",
                         "mean_accepted_length"]),
    ("cli_cpu_vs_gpu", ["model", "tokens", "agree", "first_difference"]),
    ("planted_demo", ["controller", "speedup", "acceptance_rate", "mean_accepted_length",
                      "autoregressive_tok_s", "speculative_tok_s", "lossless_prompts", "prompts"]),
)
KERNEL_COLUMNS = ["name", "time_us", "GB/s", "fraction_of_peak", "TFLOP/s"]
NCCL_COLUMNS = ["hidden", "dtype", "tokens", "bytes", "stream_us", "graph_us"]


def render_markdown(report):
    by_name = {st["name"]: st for st in report["steps"]}
    lines = (headline(report) + [""] + steps_table(report["steps"]) + [""]
             + dependencies_section(report.get("build") or {})
             + decode_bench_section(by_name) + verify_cost_section(by_name)
             + generate_sections(by_name) + kernel_bench_section(by_name)
             + ncu_section(by_name) + sanitizer_section(by_name) + nccl_bench_section(by_name)
             + failures_section(report["steps"]) + [FOOTER])
    return "\n".join(lines) + "\n"


def short_figures(figures):
    parts = []
    for k, v in figures.items():
        if isinstance(v, (list, dict)):
            continue
        if v is None:
            continue
        parts.append(f"{k} {v}")
    return ", ".join(parts)


def md_table(rows, columns):
    if not rows:
        return ""
    out = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    for r in rows:
        out += "| " + " | ".join("" if r.get(col) is None else str(r.get(col))
                                 for col in columns) + " |\n"
    return out


def headline(report):
    """The result, the device, the machine, PyTorch, NCCL, the commit and the kit."""
    lines = [f"# selfspec GPU check: {report['result'].upper()}\n",
             f"- exit code: {report['exit_code']} ({report['summary']})",
             device_line(report["device"])]
    env = report["environment"]
    v = env.get("versions", {})
    lines.append(f"- machine: {env.get('os')}, {env.get('cpus')} CPUs, "
                 f"{env.get('memory_gib')} GiB; {v.get('c++') or v.get('g++')}; "
                 f"{v.get('cmake')}; nvcc {v.get('nvcc')}")
    torch = env.get("torch")
    if isinstance(torch, dict):
        lines.append(f"- PyTorch {torch.get('torch')} (CUDA {torch.get('cuda')}, NCCL "
                     f"{torch.get('nccl')}) at {torch.get('python')}")
    nccl = env.get("nccl") or {}
    lines.append(f"- NCCL for the build: {nccl.get('version')} from {nccl.get('source')} "
                 f"{nccl.get('library') or nccl.get('found') or ''}"
                 + (f" ({nccl['note']})" if nccl.get("note") else ""))
    lines.append(f"- commit: {env.get('git_commit')}; started {report['started_utc']}, "
                 f"{report['elapsed_s']} s of a {report['budget_s']} s budget")
    kit = report.get("kit") or {}
    if kit:
        lines.append(f"- kit: {kit.get('dir')} ({len(kit.get('packages', {}))} packages from "
                     f"{(kit.get('made_on') or {}).get('os')}, models: "
                     f"{', '.join(kit.get('models', [])) or 'none'})")
    return lines


def device_line(dev):
    gpus = ", ".join(f"{g.get('name')} (sm {g.get('compute_cap')}, driver "
                     f"{g.get('driver_version')}, {g.get('memory.total')})"
                     for g in dev.get("gpus", [])) or "none"
    return (f"- device: {'present' if dev.get('present') else 'NONE'}: {dev.get('how')}; "
            f"GPUs: {gpus}")


def steps_table(steps):
    lines = ["## Steps\n",
             "| step | status | time (s) | bound (s) | figures and notes |",
             "|---|---|---|---|---|"]
    for st in steps:
        text = short_figures(st.get("figures", {}))
        notes = "; ".join(st.get("notes", []))
        if notes:
            text = (text + "; " if text else "") + notes
        text = text.replace("|", "/").replace("\n", " ")
        if len(text) > 400:
            text = text[:400] + "..."
        lines.append(f"| {st['name']} | {st['status']} | {st.get('duration_s', '')} | "
                     f"{st.get('timeout_s', '')} | {text} |")
    return lines


def dependencies_section(build):
    if not build.get("kit_dependencies"):
        return []
    rows = [{"dependency": k, "in kit": "yes" if d["in_kit"] else "NO", "path": d["value"]}
            for k, d in build["kit_dependencies"].items()]
    rows += [{"dependency": k, "in kit": "(machine)", "path": val}
             for k, val in (build.get("machine_dependencies") or {}).items()]
    return ["## Where the build's dependencies came from\n",
            md_table(rows, ["dependency", "in kit", "path"])]


def decode_steps(by_name):
    return [st for name, st in by_name.items()
            if name.startswith("bench_") and st.get("figures", {}).get("decode_tok_s")]


def decode_bench_section(by_name):
    rows = []
    for st in decode_steps(by_name):
        row = dict(st["figures"])
        row["step"] = st["name"]
        row["graphs"] = "on" if row.get("cuda_graphs") else "off"
        rows.append(row)
    if not rows:
        return []
    return ["## Decode, synthetic weights (LLaMA-2-7B geometry, bf16, unless the step says)\n",
            md_table(rows, DECODE_COLUMNS)]


def verify_cost_section(by_name):
    """v(gamma): a verification of gamma drafts (gamma + 1 tokens) against one decode step."""
    rows = [st for st in decode_steps(by_name) if st["figures"].get("v_gamma")]
    if not rows:
        return []
    width = max(len(st["figures"]["v_gamma"]) for st in rows)
    columns = ["step"] + [f"v({g})" for g in range(1, width)]
    table = []
    for st in rows:
        v = st["figures"]["v_gamma"]
        row = {"step": st["name"]}
        row.update({f"v({g})": v[g] for g in range(1, len(v))})
        table.append(row)
    return ["## Verification cost v(gamma) (forwards of gamma + 1 tokens over one decode step)\n",
            md_table(table, columns)]


def ncu_section(by_name):
    out = []
    for name, what in (("ncu_decode", "bf16"), ("ncu_decode_q4k", "Q4_K as stored")):
        st = by_name.get(name)
        if not (st and st.get("figures", {}).get("kernels")):
            continue
        f = st["figures"]
        out += [f"## Time per kernel of a decode forward, {what} (ncu --cache-control none; "
                f"{f.get('forwards')} one-token forwards; {f.get('us_per_forward')} us per forward, "
                f"kernels one by one)\n",
                md_table(f["kernels"], NCU_COLUMNS)]
    return out


def sanitizer_section(by_name):
    st = by_name.get("sanitizer")
    if not (st and st.get("figures", {}).get("sanitizer")):
        return []
    rows = [{"tool": k, "exit": v.get("exit"), "errors": v.get("errors")}
            for k, v in st["figures"]["sanitizer"].items()]
    return ["## compute-sanitizer over cuda_kernels_test\n",
            md_table(rows, ["tool", "exit", "errors"])]


def generate_sections(by_name):
    lines = []
    for name, columns in GENERATE_COLUMNS:
        st = by_name.get(name)
        if st and st.get("figures", {}).get("runs"):
            lines += [f"## {st['title']}\n", md_table(st["figures"]["runs"], columns)]
    return lines


def kernel_bench_section(by_name):
    st = by_name.get("kernel_bench")
    if not (st and st.get("figures", {}).get("benchmarks")):
        return []
    return [f"## CUDA kernels ({st['figures'].get('device')}, peak "
            f"{st['figures'].get('peak_gbps')} GB/s)\n",
            md_table(st["figures"]["benchmarks"], KERNEL_COLUMNS)]


def nccl_bench_section(by_name):
    st = by_name.get("nccl_bench")
    if not (st and st.get("figures", {}).get("results")):
        return []
    return [f"## NCCL all-reduce (NCCL {st['figures'].get('nccl_version')}, "
            f"{st['figures'].get('ranks')} rank)\n",
            md_table(st["figures"]["results"], NCCL_COLUMNS)]


def failures_section(steps):
    failed = [st for st in steps if st["status"] == "failed"]
    if not failed:
        return []
    lines = ["## Failures\n"]
    for st in failed:
        lines.append(f"### {st['name']}: {st['title']}\n")
        lines += [f"- {n}" for n in st.get("notes", [])]
        for key in ("failed_tests", "skipped_tests"):
            if st.get("figures", {}).get(key):
                lines.append(f"- {key}: {', '.join(st['figures'][key])}")
        lines += [f"  - {detail}" for detail in st.get("figures", {}).get("details", [])]
        if st.get("log"):
            lines.append(f"- log: `{st['log']}`")
        lines.append("")
    return lines
