"""The exit-head trainer's learning curve: its evaluations, the best one and early stopping.

The trainer reports each optimiser step (add_step) and evaluates the held-out top-1 agreement
before training, every --eval-every trained positions (at the first batch boundary at or past each
multiple) and at the end of each epoch. Each evaluation becomes a point of the curve:

    {"evaluation": i (0: before training), "positions_trained", "epoch" (0 before training, else
     the epoch it was made in), "end_of_epoch", "seconds" (wall clock since the first evaluation
     began, evaluations included), "train_seconds" (in training steps only), "eval_seconds",
     "train_loss_recent" (mean loss over the positions trained since the previous evaluation;
     null before training), "heldout_agreement" (null without held-out positions)}

The best point is the one with the highest agreement (the earliest on a tie); its weights are
kept (a copy of the state dict) to be written instead of the last ones. Early stopping (--patience
P > 0): an evaluation counts as a rise when its agreement beats the reference by more than
--min-delta, and the reference becomes its agreement; the reference starts at the agreement
before training. Training stops after P consecutive evaluations without a rise, so slow rises of
less than --min-delta per evaluation still add up. The curve file (--curve) is
{"format": kCurveFormat, "version", "settings", "curve": [points], "best": point or null,
"positions_per_s", "status": "running" | "stopped early" | "finished"}, rewritten atomically
after every evaluation, so that a long run can be plotted (scripts/plot_exit_head_curve.py)
while it trains.
"""

import json
import os
import tempfile
import time

kCurveFormat = "selfspec-exit-head-curve"
kCurveVersion = 1


class LearningCurve:
    """evaluate(model) -> agreement or None runs one held-out evaluation; log(message) prints."""

    def __init__(self, evaluate, settings, patience, min_delta, eval_every, log):
        self.settings = settings
        self.points = []
        self.best, self.best_state = None, None
        self.positions, self.train_seconds = 0, 0.0
        self._evaluate, self._log = evaluate, log
        self._patience, self._min_delta, self._eval_every = patience, min_delta, eval_every
        self._next_eval = eval_every
        self._recent_loss, self._recent_count = 0.0, 0
        self._reference, self._stale = None, 0
        self._start = None

    def add_step(self, loss_sum, count, seconds):
        """Counts one optimiser step (its summed loss over `count` positions, its seconds);
        True when an --eval-every evaluation is due after it."""
        self.positions += count
        self.train_seconds += seconds
        self._recent_loss += loss_sum
        self._recent_count += count
        if not self._eval_every or self.positions < self._next_eval:
            return False
        while self._next_eval <= self.positions:
            self._next_eval += self._eval_every
        return True

    @property
    def evaluated_now(self):
        """Whether the last evaluation saw every position trained so far."""
        return bool(self.points) and self.points[-1]["positions_trained"] == self.positions

    @property
    def stop(self):
        """Whether --patience evaluations in a row have not risen by more than --min-delta."""
        return self._patience > 0 and self._stale >= self._patience

    @property
    def positions_per_s(self):
        return self.positions / self.train_seconds if self.train_seconds > 0 else None

    def evaluate(self, model, epoch, end_of_epoch):
        """Evaluates `model`, appends the point, keeps its weights when it is the best so far,
        updates the patience count and logs it; returns the point."""
        if self._start is None:
            self._start = time.monotonic()
        began = time.monotonic()
        agreement = self._evaluate(model)
        now = time.monotonic()
        point = {"evaluation": len(self.points), "positions_trained": self.positions,
                 "epoch": epoch, "end_of_epoch": end_of_epoch,
                 "seconds": round(now - self._start, 3),
                 "train_seconds": round(self.train_seconds, 6),
                 "eval_seconds": round(now - began, 3),
                 "train_loss_recent": (self._recent_loss / self._recent_count
                                       if self._recent_count else None),
                 "heldout_agreement": agreement}
        self._recent_loss, self._recent_count = 0.0, 0
        self.points.append(point)
        if agreement is not None and (self.best is None or
                                      agreement > self.best["heldout_agreement"]):
            self.best = point
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if agreement is not None and point["evaluation"] > 0:
            if agreement > self._reference + self._min_delta:
                self._reference, self._stale = agreement, 0
            else:
                self._stale += 1
        elif agreement is not None:
            self._reference = agreement
        if point["evaluation"] > 0:
            self._log(self._describe(point))
        return point

    def document(self, status):
        """The curve file's JSON object."""
        return {"format": kCurveFormat, "version": kCurveVersion, "settings": self.settings,
                "curve": self.points, "best": self.best,
                "positions_per_s": self.positions_per_s, "status": status}

    def write(self, path, status):
        """Writes document(status) to `path` atomically (a temporary file, then a rename)."""
        directory = os.path.dirname(os.path.abspath(path))
        fd, temp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
        umask = os.umask(0)
        os.umask(umask)
        try:
            os.chmod(temp, 0o666 & ~umask)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.document(status), f, indent=1)
                f.write("\n")
            os.replace(temp, path)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise

    def _describe(self, point):
        agreement = point["heldout_agreement"]
        text = (f"eval {point['evaluation']} (epoch {point['epoch']}, "
                f"{point['positions_trained']} positions trained): recent train loss "
                f"{point['train_loss_recent']:.4f}, held-out top-1 agreement ")
        if agreement is None:
            text += "n/a (no held-out sequences)"
        else:
            text += f"{agreement:.4f}"
            text += (" (best so far)" if self.best is point else
                     f" (best {self.best['heldout_agreement']:.4f} at eval "
                     f"{self.best['evaluation']})")
            if self._patience > 0:
                text += (f", {self._stale}/{self._patience} evaluations without a rise > "
                         f"{self._min_delta}")
        return text + f"; {point['eval_seconds']:.2f} s to evaluate"
