"""OUTDIR/check.json and OUTDIR/check.md: the report of the run so far, rewritten (atomically)
after every step, so that whatever ends the run leaves one."""

import datetime
import json
import os
import shlex
import sys

from .markdown import render_markdown
from .repo import REPO
from .verdict import RESULTS

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
