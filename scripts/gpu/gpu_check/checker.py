"""The run: its options, folders, budget and findings, and the step runner that runs each step (or
records why it did not run), judges it and rewrites the reports after it."""

import os
import sys

from .budget import MIN_STEP_S, Budget
from .logs import tail_lines
from .report import utc_now, write_reports
from .step import Step, unrun_record


def progress(text):
    sys.stderr.write(f"[check] {text}\n")
    sys.stderr.flush()


def run_guarded(s, fn):
    """fn(s); an exception in it fails the step, with why."""
    try:
        fn(s)
    except Exception as e:  # a bug or surprise in the check itself: a failure, with why
        s.fail(f"check.py error: {type(e).__name__}: {e}")


def judge(s, info):
    """The step's status: passed unless it failed or timed out; an info step never fails."""
    if s.status is None:
        s.status = "info" if info else "passed"
    if s.timed_out and s.status == "passed":
        s.status = "failed"
        s.notes.append("timed out")
    if info and s.status == "failed":
        s.status = "info"


class Checker:
    def __init__(self, args):
        self.args = args
        self.outdir = os.path.abspath(args.outdir)
        self.build = os.path.abspath(args.build_dir)
        self.kit = os.path.abspath(args.kit)
        self.kit_root = os.path.join(self.build, "kit-root")
        self.work = os.path.join(self.build, "gpu-check")
        self.budget = Budget(args.budget)
        self.steps = []
        self.current = None  # the process a step runs now (a signal stops it)
        self.running_step = None
        self.build_failed = False
        self.device = {"present": False, "how": "not probed yet"}
        self.environment = {}
        self.kit_info = {}
        self.build_info = {}
        self.nccl = {}
        self.started = utc_now()
        self.final = None
        self.gen_cache = {}
        self.tools = {}
        self.selected = None
        if args.steps:
            self.selected = [s.strip() for s in args.steps.split(",") if s.strip()]
        os.makedirs(os.path.join(self.outdir, "logs"), exist_ok=True)
        os.makedirs(os.path.join(self.outdir, "raw"), exist_ok=True)

    def program(self, name):
        """A built program: <build>/bin/<name>."""
        return os.path.join(self.build, "bin", name)

    def wanted(self, name):
        if self.selected is None:
            return True
        return any(name == s or name.startswith(s) for s in self.selected)

    def write_reports(self):
        write_reports(self)

    def step(self, name, title, bound_s, fn, fatal=False, info=False, needs_device=False):
        """Runs fn(step) as a step; records it. fatal: a failure marks the build failed. info: the
        step informs and cannot fail. needs_device: it runs only on a GPU after a good build."""
        if not self.wanted(name):
            self.steps.append(unrun_record(name, title, "skipped", "not selected (--steps)"))
            self.write_reports()
            return None
        blocker = self._blocker(needs_device)
        if blocker:
            self.steps.append(unrun_record(name, title, "not run", blocker))
            return None
        if self.budget.left() < MIN_STEP_S:
            self.steps.append(unrun_record(name, title, "not run",
                                           f"the time budget ({self.args.budget} s) is spent"))
            self.write_reports()
            progress(f"{name}: not run (time budget spent)")
            return None
        s = self._begin(name, title, bound_s)
        run_guarded(s, fn)
        judge(s, info)
        self._end(s, fatal)
        return s

    def _blocker(self, needs_device):
        """Why a step that needs the device cannot run, or None."""
        if needs_device and not self.device["present"]:
            return "no device"
        if self.build_failed and needs_device:
            return "the build failed"
        return None

    def _begin(self, name, title, bound_s):
        s = Step(self, name, title, bound_s)
        self.running_step = name
        self.write_reports()
        progress(f"{name}: {title} (at most {s.timeout_s:.0f} s)")
        return s

    def _end(self, s, fatal):
        s.close()
        self.running_step = None
        self.steps.append(s.record())
        if fatal and s.status == "failed":
            self.build_failed = True
        self.write_reports()
        line = f"{s.name}: {s.status} ({s.duration_s:.1f} s)"
        if s.notes:
            line += " - " + "; ".join(s.notes[:3])
        progress(line)
        if s.status == "failed":
            sys.stderr.write(f"---- last lines of {s.log_path} ----\n{tail_lines(s.log_path)}"
                             "----\n")
