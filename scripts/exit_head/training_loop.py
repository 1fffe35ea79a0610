"""The epoch loop both draft-head trainers share (scripts/train_exit_head.py,
scripts/train_feature_head.py): AdamW over the model's parameters, optionally decayed by a cosine
over every step of --epochs; the learning curve's evaluations (every --eval-every positions and at
each epoch's end, the --curve file rewritten after each) and its early stop (--patience).
"""

import time

import numpy as np
import torch

kProgressSeconds = 30.0  # seconds between progress lines (stderr) within an epoch


def run_epochs(model, curve, steps, windows, per_epoch, args, log, epoch_message,
               progress_message=None):
    """Trains up to args.epochs epochs; returns (mean train loss per epoch, epochs run).

    steps(optimiser, rng, generator): one pass over the train windows, yielding (summed loss,
    positions, seconds) after each optimiser step with the model in eval mode. windows: the
    number of train windows (batches of args.batch make an epoch's steps). per_epoch: the
    positions of an epoch. epoch_message(epoch, done, loss, count, seconds) -> the line logged
    at an epoch's end (done: "" or why it stopped short). progress_message(epoch, count,
    seconds), when given, is logged every kProgressSeconds within an epoch, followed by the time
    left for the remaining epochs at the rate so far (evaluations included; an early stop ends
    sooner)."""
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    total_steps = args.epochs * -(-windows // args.batch)
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, total_steps)
                if args.lr_schedule == "cosine" else None)
    rng, generator = np.random.default_rng(args.seed), torch.Generator().manual_seed(args.seed)
    losses, epochs_run = [], 0
    start = time.monotonic()
    for epoch in range(1, args.epochs + 1):
        epochs_run = epoch
        total, count, seconds = 0.0, 0, 0.0
        last_progress = time.monotonic()
        for step_loss, step_count, step_seconds in steps(optimiser, rng, generator):
            if schedule is not None:
                schedule.step()
            total, count, seconds = total + step_loss, count + step_count, seconds + step_seconds
            if progress_message and time.monotonic() - last_progress >= kProgressSeconds:
                last_progress = time.monotonic()
                done = (epoch - 1) * per_epoch + count
                log(progress_message(epoch, count, seconds) +
                    time_left(time.monotonic() - start, done, args.epochs * per_epoch))
            if curve.add_step(step_loss, step_count, step_seconds):
                _evaluate(curve, model, epoch, count == per_epoch, args)
                if curve.stop:
                    break
        if not curve.evaluated_now:
            _evaluate(curve, model, epoch, True, args)
        losses.append(total / max(count, 1))
        done = ("" if count == per_epoch else
                f" (stopped after {count} of its {per_epoch} positions)")
        log(epoch_message(epoch, done, losses[-1], count, seconds))
        if curve.stop:
            break
    return losses, epochs_run


def time_left(elapsed, done, total):
    """'; at most about 3 min 05 s left' at the rate so far ('' before any progress)."""
    if done <= 0 or total <= done:
        return ""
    left = int(elapsed * (total - done) / done + 0.5)
    text = (f"{left} s" if left < 60 else f"{left // 60} min {left % 60:02d} s" if left < 3600
            else f"{left // 3600} h {(left % 3600) // 60:02d} min")
    return f"; at most about {text} left"


def _evaluate(curve, model, epoch, end_of_epoch, args):
    curve.evaluate(model, epoch, end_of_epoch)
    if args.curve:
        curve.write(args.curve, "running")
