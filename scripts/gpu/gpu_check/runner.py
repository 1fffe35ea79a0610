"""The run: its options, folders, budget and findings (Checker), and the step runner that runs
each step (Step: its bounded commands, log, figures and notes) or records why it did not run,
judges it and rewrites the reports after it."""

import os
import shlex
import subprocess
import sys
import time

from .machine import REPO, kill_group
from .report import tail_lines, trim_file, utc_now, write_reports

# ---- the budget ----
# The time budget of the whole run (--budget), of which every step's bound is cut.

RESERVE_S = 5.0  # kept back from the budget for the final report
MIN_STEP_S = 5.0  # a step gets at least this much, or does not start


class Budget:
    def __init__(self, seconds):
        self.start = time.monotonic()
        self.seconds = seconds

    def elapsed(self):
        return time.monotonic() - self.start

    def left(self):
        return self.seconds - self.elapsed() - RESERVE_S


# ---- one step ----
# One step of the check: its commands, each bounded by the step's deadline, its log, figures and
# notes, and the record of it in check.json.

def unrun_record(name, title, status, note):
    """The record of a step that did not start ("skipped" or "not run")."""
    return {"name": name, "title": title, "status": status, "notes": [note]}


def start_process(cmd, capture, log, env=None):
    """cmd started in the repository, in its own session (so that a timeout kills all of it),
    stderr (and stdout unless captured) to log, with env's variables added to the environment;
    None when it cannot start."""
    environment = None
    if env:
        environment = dict(os.environ)
        environment.update(env)
    try:
        return subprocess.Popen([str(c) for c in cmd], cwd=REPO,
                                stdout=subprocess.PIPE if capture else log,
                                stderr=log, start_new_session=True, env=environment,
                                text=capture, errors="replace" if capture else None)
    except OSError as e:
        log.write(f"# cannot run: {e}\n")
        log.flush()
        return None


class Step:
    def __init__(self, checker, name, title, bound_s):
        self.checker = checker
        self.name = name
        self.title = title
        self.timeout_s = max(0.0, min(bound_s, checker.budget.left()))
        self.deadline = time.monotonic() + self.timeout_s
        self.log_path = os.path.join(checker.outdir, "logs", f"{name}.log")
        self.log = open(self.log_path, "w", errors="replace")
        self.status = None
        self.figures = {}
        self.notes = []
        self.commands = []
        self.timed_out = False
        self.start = time.monotonic()

    def left(self):
        return self.deadline - time.monotonic()

    def note(self, text):
        self.notes.append(text)
        self.log.write(f"# note: {text}\n")
        self.log.flush()

    def fail(self, text):
        self.status = "failed"
        self.note(text)

    def run(self, cmd, capture=False, timeout=None, env=None):
        """Runs cmd under the step's deadline (and timeout, if smaller), with env's variables
        added. stdout is returned when capture is set (and also logged); stderr always goes to
        the log. Returns (rc, stdout); rc 124 after a timeout, 127 when the program could not be
        started."""
        limit = self.left() if timeout is None else min(timeout, self.left())
        if env:
            self.log.write("# environment: " + " ".join(f"{k}={v}" for k, v in env.items()) + "\n")
        self._log_command(cmd)
        if limit <= 0:
            self.timed_out = True
            self.log.write("# not started: the step's time is spent\n")
            return 124, ""
        proc = start_process(cmd, capture, self.log, env)
        if proc is None:
            return 127, ""
        rc, out = self._wait(proc, limit)
        if capture:
            self.log.write(out)
        self.log.write(f"# exit status {rc}\n")
        self.log.flush()
        return rc, out

    def _log_command(self, cmd):
        printable = shlex.join(str(c) for c in cmd)
        self.commands.append(printable)
        self.log.write(f"$ {printable}\n")
        self.log.flush()

    def _wait(self, proc, limit):
        """(rc, stdout) of proc once it ends, or once limit seconds are spent (killed, rc 124)."""
        self.checker.current = proc
        out = ""
        try:
            out, _ = proc.communicate(timeout=limit)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            self.timed_out = True
            kill_group(proc)
            out, _ = proc.communicate()
            rc = 124
            self.log.write(f"\n# timed out after {limit:.0f} s: killed\n")
        finally:
            self.checker.current = None
        return rc, out or ""

    def close(self):
        self.duration_s = time.monotonic() - self.start
        self.log.close()
        trim_file(self.log_path)

    def record(self):
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "duration_s": round(self.duration_s, 1),
            "timeout_s": round(self.timeout_s),
            "timed_out": self.timed_out,
            "commands": self.commands,
            "log": os.path.relpath(self.log_path, self.checker.outdir),
            "figures": self.figures,
            "notes": self.notes,
        }


# ---- the run and its step runner ----

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
        """Runs fn(step) as a step and records it, or why it did not run. fatal: a failure marks
        the build failed. info: the step informs and cannot fail. needs_device: it runs only on a
        GPU after a good build."""
        if not self.wanted(name):
            self.steps.append(unrun_record(name, title, "skipped", "not selected (--steps)"))
            self.write_reports()
            return
        blocker = self._blocker(needs_device)
        if blocker:
            self.steps.append(unrun_record(name, title, "not run", blocker))
            return
        if self.budget.left() < MIN_STEP_S:
            self.steps.append(unrun_record(name, title, "not run",
                                           f"the time budget ({self.args.budget} s) is spent"))
            self.write_reports()
            progress(f"{name}: not run (time budget spent)")
            return
        s = self._begin(name, title, bound_s)
        run_guarded(s, fn)
        judge(s, info)
        self._end(s, fatal)

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
