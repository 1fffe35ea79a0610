"""One step of the check: its commands, each bounded by the step's deadline, its log, figures and
notes, and the record of it in check.json."""

import os
import shlex
import subprocess
import time

from .logs import trim_file
from .programs import kill_group
from .repo import REPO


def unrun_record(name, title, status, note):
    """The record of a step that did not start ("skipped" or "not run")."""
    return {"name": name, "title": title, "status": status, "notes": [note]}


def start_process(cmd, env, cwd, capture, log):
    """cmd started in its own session (so that a timeout kills all of it), stderr (and stdout
    unless captured) to log; None when it cannot start."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    try:
        return subprocess.Popen([str(c) for c in cmd], cwd=cwd or REPO, env=full_env,
                                stdout=subprocess.PIPE if capture else log,
                                stderr=log, start_new_session=True,
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
        self.bound_s = bound_s
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

    def run(self, cmd, env=None, cwd=None, capture=False, timeout=None):
        """Runs cmd under the step's deadline (and timeout, if smaller). stdout is returned when
        capture is set (and also logged); stderr always goes to the log. Returns (rc, stdout);
        rc 124 after a timeout, 127 when the program could not be started."""
        limit = self.left() if timeout is None else min(timeout, self.left())
        self._log_command(cmd)
        if limit <= 0:
            self.timed_out = True
            self.log.write("# not started: the step's time is spent\n")
            return 124, ""
        proc = start_process(cmd, env, cwd, capture, self.log)
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
            "duration_s": round(getattr(self, "duration_s", time.monotonic() - self.start), 1),
            "timeout_s": round(self.timeout_s),
            "timed_out": self.timed_out,
            "commands": self.commands,
            "log": os.path.relpath(self.log_path, self.checker.outdir),
            "figures": self.figures,
            "notes": self.notes,
        }
