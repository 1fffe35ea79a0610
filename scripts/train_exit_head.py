#!/usr/bin/python3
"""Trains an EESD exit head (issue 11) by self-distillation from `selfspec collect-exit-data`,
or, with --predictor, EESD's Cali-TS acceptance predictor from `selfspec collect-cali-data`.

    scripts/train_exit_head.py DATA_DIR --out exit_head.safetensors [--epochs 3] [--lr 1e-4]
        [--batch 64] [--heldout 0.1] [--negatives 512] [--kl-weight 1.0] [--ce-weight 1.0]
        [--max-len 1024] [--loss-chunk 1024] [--eval-every N] [--eval-positions N] [--patience P]
        [--min-delta 0.002] [--curve CURVE.json] [--precision f32|bf16|auto] [--seed 0]
        [--threads N] [--allow-incomplete]
        [--json]
    scripts/train_exit_head.py --predictor CALI_DIR --out predictor.safetensors [--epochs 20]
        [--lr 1e-3] [--batch 64] [--weight-decay 0.01] [--heldout 0.1] [--seed 0] [--threads N]
        [--allow-incomplete] [--json]

Exit head (DATA_DIR). The exit head is one transformer layer, initialised from layer N's weights
(DATA_DIR's init_layer.safetensors), that maps the residual stream after layer N-1 (the recorded
`hidden`) to a state whose final norm + LM head (frozen.safetensors, not trained) should predict
what the full model predicts. Loss (EESD §3.2): KL(full model's top-k distribution, renormalised
|| student) + cross-entropy on the full model's next token, with AdamW. The student's softmax runs
over a sampled candidate set (the batch's top-k ids and next tokens plus --negatives uniformly
random vocabulary ids), not the full vocabulary: a full LM head per position is too slow on a CPU.
A batch is --batch sequences (sequences longer than --max-len are cut into overlapping windows,
each position trained once). Sequences, never positions, are split into train and held-out.
Held-out top-1 agreement (argmax of the student's FULL-vocabulary logits against the full model's
most likely token, on held-out positions) is evaluated before training, at the end of each epoch
and, with --eval-every N, every N trained positions (at the first batch boundary at or past each
multiple of N). --eval-positions N evaluates a fixed subset of at most N held-out positions instead
of all (the full-vocabulary argmax dominates an evaluation's cost): whole held-out windows in a
--seed-ed random order, the last one cut to its first rows, the same subset every time. Every
evaluation logs (stderr) the train loss since the previous one and the agreement; every epoch its
train loss and positions/s (training steps only). --epochs is the maximum: with --patience P,
training stops after P consecutive evaluations that have not raised the agreement by more than
--min-delta over the last one that did (starting from the agreement before training). The
weights of the evaluation with the best agreement (the earliest on a tie; before training
included: then the initial layer N is written) are written, not the last ones; the log, the head's
metadata ("kept") and the summary ("best") say which. --curve FILE.json writes the learning curve
(exit_head/learning_curve.py: the settings and one point per evaluation: positions_trained, epoch,
seconds, train_loss_recent, heldout_agreement, ...), rewritten after every evaluation;
scripts/plot_exit_head_curve.py plots it. The head is written atomically in the exit-head format
(EESD formats, section 2) with F32 tensors.

Cali-TS predictor (--predictor CALI_DIR; EESD §3.3 eq. 5, App. B; exit_head/cali_predictor.py).
θ_M = sigmoid(w[:d] · (W^i h_T) + w[d:] · h_D + b), i = min(step, S = the manifest's "steps"),
predicts whether the draft's step-th token of a round is accepted from the target's final hidden
state h_T at the round's root and the draft's final hidden state h_D at the drafted token. W^i
start as the identity, w as zero, b as the logit of the training rows' acceptance rate. Binary
cross-entropy, AdamW, --batch rows per step; whole sequences are held out (--heldout > 0 needed).
Per epoch (stderr), and before training: train BCE, held-out BCE, accuracy, RMSE. The epoch with
the lowest held-out BCE is kept (S·d² parameters overfit small data) and written atomically in the
predictor format (Cali-TS formats, section 2: F32 cali.step_transforms [S, d, d], cali.weight
[2d], cali.bias [1]; sigma_m = the kept epoch's held-out RMSE of θ_M against the 0/1 label).

--json prints a summary object on stdout (exit head: the split, per-epoch train losses,
agreement_before / agreement_after (the last evaluation), "curve" (the points), "best" (the kept
point), "positions_per_s" (positions trained / seconds in training steps, evaluations excluded),
"settings" and "status"). Bad data exits 1 with a one-line message naming the file and the field
or tensor. Needs Debian's python3-torch (torch 1.13) and python3-numpy (scripts/setup.sh), run
with /usr/bin/python3.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from exit_head.cali_data import load_cali_data, split_by_sequence  # noqa: E402
from exit_head.cali_predictor import (FitOptions, fit, initial_predictor,  # noqa: E402
                                      parameter_count, predictor_metadata)
from exit_head.dataset import (DataError, evaluation_windows, load_manifest,  # noqa: E402
                               load_positions, model_spec, sequence_spans, split_sequences,
                               windows_of)
from exit_head.exit_layer import ExitLayer, FrozenHead  # noqa: E402
from exit_head import precision  # noqa: E402
from exit_head.learning_curve import LearningCurve  # noqa: E402
from exit_head.losses import distillation_loss  # noqa: E402
from exit_head.training_loop import run_epochs  # noqa: E402
from exit_head.safetensors_io import (SafetensorsError, bf16_to_f32, dtype_of,  # noqa: E402
                                      read_safetensors, write_safetensors)

kHeadFormat = "selfspec-exit-head"
kPrefix = "exit_layer."


# Options of the exit-head mode (DATA_DIR) only, and their defaults there.
kExitHeadOnly = {"negatives": 512, "max_len": 1024, "loss_chunk": 1024, "kl_weight": 1.0,
                 "ce_weight": 1.0, "eval_every": 0, "eval_positions": 0, "patience": 0,
                 "min_delta": 0.002, "curve": None, "lr_schedule": "constant", "init": None}
# Options whose defaults differ by mode: (exit head, Cali-TS predictor).
kModeDefaults = {"epochs": (3, 20), "lr": (1e-4, 1e-3)}


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except for the options whose default depends on the mode (None here)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Train an EESD exit head by self-distillation (sampled-softmax KL + CE), "
                    "or, with --predictor, EESD's Cali-TS acceptance predictor (eq. 5).",
        formatter_class=_HelpFormatter)
    parser.add_argument("data_dir", metavar="DATA_DIR", nargs="?",
                        help="written by collect-exit-data: train an exit head")
    parser.add_argument("--predictor", metavar="CALI_DIR",
                        help="written by collect-cali-data: train the Cali-TS predictor instead")
    parser.add_argument("--out", required=True,
                        help="the exit head (or predictor) .safetensors to write")
    parser.add_argument("--epochs", type=int, help="default 3; 20 with --predictor")
    # EESD trains at 1e-3; starting from a pretrained layer that is destructive here: on SmolLM2
    # with N = 29 (the head initialised to the model's own last layer, agreement 1.0) one epoch at
    # 1e-3 drops held-out agreement to 0.77, at 1e-4 it stays 1.0. The predictor starts from
    # scratch: EESD's 1e-3.
    parser.add_argument("--lr", type=float,
                        help="AdamW learning rate; default 1e-4 (EESD: 1e-3, too high from a "
                             "pretrained layer); 1e-3 with --predictor")
    parser.add_argument("--lr-schedule", choices=("constant", "cosine"),
                        help="constant, or cosine decay to 0 over the --epochs' optimiser steps "
                             "(exit head only)")
    parser.add_argument("--init", metavar="HEAD",
                        help="start from this trained head (same model and exit layer) instead of "
                             "DATA_DIR's init_layer.safetensors: training goes on (exit head only)")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay")
    parser.add_argument("--batch", type=int, default=64,
                        help="sequences (windows of --max-len positions) per optimiser step; "
                             "with --predictor, rows")
    parser.add_argument("--max-len", type=int,
                        help="longer sequences are cut into windows overlapping by half "
                             "(default 1024; exit head only)")
    parser.add_argument("--heldout", type=float, default=0.1,
                        help="fraction of sequences held out (agreement; predictor: the kept "
                             "epoch and sigma_m)")
    parser.add_argument("--negatives", type=int,
                        help="random vocabulary ids added to each batch's sampled softmax "
                             "(>= vocab size: the exact full softmax; default 512; exit head only)")
    parser.add_argument("--loss-chunk", type=int,
                        help="positions whose sampled-softmax logits are held at once (memory; "
                             "default 1024; exit head only)")
    parser.add_argument("--kl-weight", type=float, help="default 1.0; exit head only")
    parser.add_argument("--ce-weight", type=float, help="default 1.0; exit head only")
    parser.add_argument("--eval-every", type=int, metavar="N",
                        help="also evaluate held-out agreement every N trained positions, at "
                             "batch boundaries (default 0: only before training and after each "
                             "epoch; exit head only)")
    parser.add_argument("--eval-positions", type=int, metavar="N",
                        help="evaluate on a fixed, --seed-chosen subset of at most N held-out "
                             "positions (whole windows; default 0: all; exit head only)")
    parser.add_argument("--patience", type=int, metavar="P",
                        help="stop after P evaluations in a row without a rise of more than "
                             "--min-delta in held-out agreement (--epochs is the maximum; "
                             "default 0: never stop early; exit head only)")
    parser.add_argument("--min-delta", type=float,
                        help="the rise in held-out agreement that counts for --patience "
                             "(default 0.002; exit head only)")
    parser.add_argument("--curve", metavar="FILE.json",
                        help="write the learning curve (settings and every evaluation) as JSON, "
                             "rewritten after each evaluation (exit head only)")
    precision.add_argument(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="train on a collection whose manifest says complete: false")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    args = parser.parse_args(argv)
    _resolve_mode_options(parser, args)
    for name in ("epochs", "batch", "max_len", "loss_chunk", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0.0 <= args.heldout < 1.0 or args.negatives < 0 or args.lr <= 0:
        parser.error("need 0 <= --heldout < 1, --negatives >= 0 and --lr > 0")
    if min(args.eval_every, args.eval_positions, args.patience) < 0 or args.min_delta < 0:
        parser.error("need --eval-every, --eval-positions, --patience and --min-delta >= 0")
    if args.patience > 0 and args.heldout <= 0.0:
        parser.error("--patience needs --heldout > 0 (it watches the held-out agreement)")
    if args.predictor is not None and args.heldout <= 0.0:
        parser.error("--predictor needs --heldout > 0 (sigma_m and the kept epoch come from "
                     "the held-out sequences)")
    return args


def _resolve_mode_options(parser, args):
    """Checks that exactly one mode is given and fills in the mode-dependent defaults."""
    if (args.data_dir is None) == (args.predictor is None):
        parser.error("give exactly one of DATA_DIR (train an exit head) and --predictor "
                     "CALI_DIR (train the Cali-TS predictor)")
    predictor = args.predictor is not None
    for name, default in kExitHeadOnly.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif predictor:
            parser.error(f"--{name.replace('_', '-')} applies to the exit head (DATA_DIR), not "
                         "to --predictor")
    for name, defaults in kModeDefaults.items():
        if getattr(args, name) is None:
            setattr(args, name, defaults[1] if predictor else defaults[0])


def log(message):
    print(f"train_exit_head: {message}", file=sys.stderr, flush=True)


def load_init_layer(path, spec, manifest):
    """The state dict (names without the "exit_layer." prefix) of init_layer.safetensors."""
    tensors, metadata = read_safetensors(path)
    _check(metadata.get("model_identity") == spec.identity, path,
           f"model_identity {metadata.get('model_identity')!r} is not the manifest's "
           f"{spec.identity!r}")
    _check(metadata.get("exit_layer") == str(manifest["exit_layer"]), path,
           f"exit_layer {metadata.get('exit_layer')!r} is not the manifest's "
           f"{manifest['exit_layer']}")
    expected = ExitLayer(spec).state_dict()
    dtypes = dtype_of(path)
    state = {}
    for name, like in expected.items():
        key = kPrefix + name
        _check(key in tensors, path, f"missing tensor {key}")
        value = tensors[key]
        value = bf16_to_f32(value) if dtypes[key] == "BF16" else np.asarray(value, np.float32)
        _check(tuple(value.shape) == tuple(like.shape), path,
               f"tensor {key} is {list(value.shape)}, expected {list(like.shape)}")
        state[name] = torch.from_numpy(np.array(value, dtype=np.float32))
    extra = sorted(set(tensors) - {kPrefix + n for n in expected})
    _check(not extra, path, f"unexpected tensors {extra} (attention_bias / o_proj_bias?)")
    return state


def load_frozen(path, spec):
    tensors, _ = read_safetensors(path)
    dtypes = dtype_of(path)
    for name in ("model.norm.weight", "lm_head.weight"):
        _check(name in tensors, path, f"missing tensor {name}")
    norm, lm_head = tensors["model.norm.weight"], tensors["lm_head.weight"]
    _check(norm.shape == (spec.hidden_size,) and dtypes["model.norm.weight"] != "BF16", path,
           f"model.norm.weight is {dtypes['model.norm.weight']} {list(norm.shape)}, expected "
           f"F32 [{spec.hidden_size}]")
    _check(lm_head.shape == (spec.vocab_size, spec.hidden_size) and
           dtypes["lm_head.weight"] == "BF16", path,
           f"lm_head.weight is {dtypes['lm_head.weight']} {list(lm_head.shape)}, expected BF16 "
           f"[{spec.vocab_size}, {spec.hidden_size}]")
    return FrozenHead(norm, np.array(lm_head), spec.rms_norm_eps)


class Batch:
    """Windows padded to one length: x [B, T, H], positions/valid/loss [B, T], rows [M] (the data
    rows of the loss positions, in the order of x[loss])."""

    def __init__(self, data, windows):
        length = max(w.end - w.start for w in windows)
        hidden = data.hidden.shape[1]
        x = np.zeros((len(windows), length, hidden), dtype=np.float32)
        positions = np.zeros((len(windows), length), dtype=np.int64)
        valid = np.zeros((len(windows), length), dtype=bool)
        loss = np.zeros((len(windows), length), dtype=bool)
        for b, w in enumerate(windows):
            n = w.end - w.start
            x[b, :n] = bf16_to_f32(data.hidden[w.start:w.end])
            positions[b, :n] = data.position[w.start:w.end]
            valid[b, :n] = True
            loss[b, w.loss_from - w.start:n] = True
        self.rows = torch.from_numpy(np.concatenate(
            [np.arange(w.loss_from, w.end) for w in windows]))
        self.x, self.positions = torch.from_numpy(x), torch.from_numpy(positions)
        self.valid, self.loss = torch.from_numpy(valid), torch.from_numpy(loss)


def final_states(model, head, batch):
    """Normed final states [M, H] of the batch's loss positions."""
    return head.normed(model(batch.x, batch.positions, batch.valid)[batch.loss])


def heldout_agreement(model, head, data, windows, batch_size):
    """Fraction of held-out positions where the student's full-vocabulary argmax is the full
    model's most likely token (topk_ids[:, 0]); None without held-out positions."""
    if not windows:
        return None
    states, rows = [], []
    with torch.no_grad():
        for begin in range(0, len(windows), batch_size):
            batch = Batch(data, windows[begin:begin + batch_size])
            states.append(final_states(model, head, batch))
            rows.append(batch.rows)
    predicted = head.argmax(torch.cat(states))
    target = torch.from_numpy(data.topk_ids[torch.cat(rows).numpy(), 0])
    return float((predicted == target).double().mean())


def backward_in_chunks(z, rows, head, data, args, generator):
    """Back-propagates the mean loss over the batch's positions (final states z [M, H], data rows
    `rows`) and returns its sum. The loss runs over --loss-chunk positions at a time, each with
    its own sampled candidate set, into the gradient of a detached z, so that only one chunk's
    [positions, candidates] logits are held at once; then that gradient flows through the layer."""
    leaf = precision.loss_leaf(z)
    total = 0.0
    for begin in range(0, len(rows), args.loss_chunk):
        chunk = rows[begin:begin + args.loss_chunk]
        loss, _, _ = distillation_loss(
            leaf[begin:begin + args.loss_chunk], head, torch.from_numpy(data.topk_ids[chunk]),
            torch.from_numpy(data.topk_logprobs[chunk]), torch.from_numpy(data.next_token[chunk]),
            args.negatives, generator, args.kl_weight, args.ce_weight)
        (loss * (len(chunk) / len(rows))).backward()
        total += float(loss) * len(chunk)
    z.backward(precision.output_gradient(leaf, z))
    return total


def train_steps(model, head, optimiser, data, windows, args, rng, generator):
    """One pass over the train windows in a random order: yields (summed loss, positions,
    seconds) after each optimiser step, with the model in eval mode (the caller may evaluate)."""
    order = rng.permutation(len(windows))
    for begin in range(0, len(order), args.batch):
        start = time.monotonic()
        model.train()
        batch = Batch(data, [windows[i] for i in order[begin:begin + args.batch]])
        optimiser.zero_grad()
        with precision.autocast(args.precision):
            states = final_states(model, head, batch)
        total = backward_in_chunks(states, batch.rows.numpy(), head, data, args, generator)
        optimiser.step()
        model.eval()
        yield total, len(batch.rows), time.monotonic() - start


def curve_settings(manifest, spec, args, summary):
    """The run's settings recorded in the curve file (the plot labels its line from them)."""
    settings = {"data_dir": os.path.abspath(args.data_dir),
                "data_name": os.path.basename(os.path.normpath(os.path.abspath(args.data_dir))),
                "model_identity": spec.identity, "exit_layer": manifest["exit_layer"],
                "num_layers": spec.num_layers, "hidden_size": spec.hidden_size,
                "vocab_size": spec.vocab_size, "out": os.path.abspath(args.out)}
    settings.update({name: getattr(args, name) for name in (
        "epochs", "lr", "weight_decay", "batch", "max_len", "negatives", "kl_weight", "ce_weight",
        "heldout", "seed", "threads", "eval_every", "eval_positions", "patience", "min_delta",
        "lr_schedule", "precision", "precision_probe")})
    settings["init"] = os.path.abspath(args.init) if args.init else None
    settings.update({name: summary[name] for name in (
        "train_positions", "heldout_positions", "evaluated_positions")})
    return settings


def head_metadata(manifest, spec, args, summary):
    loss = (f"{args.kl_weight} * KL(teacher top-{manifest['top_k']} renormalised || student) + "
            f"{args.ce_weight} * CE(next token); student softmax sampled over the batch's top-k "
            f"and next-token ids plus {args.negatives} uniform random vocabulary ids")
    metadata = {
        "format": kHeadFormat, "model_identity": spec.identity,
        "exit_layer": str(manifest["exit_layer"]), "hidden_size": str(spec.hidden_size),
        "num_layers": str(spec.num_layers),
        "trained_on": (f"{os.path.abspath(args.data_dir)}, {summary['positions']} positions "
                       f"({summary['train_positions']} train / {summary['heldout_positions']} "
                       f"held out), {summary['epochs_run']} of at most {args.epochs} epochs "
                       f"({summary['positions_trained']} positions trained, {summary['status']})"),
        "loss": loss,
        "optimizer": f"AdamW lr {args.lr} ({args.lr_schedule}) weight_decay "
                     f"{args.weight_decay}, batch {args.batch} sequences (windows of <= "
                     f"{args.max_len} positions), seed {args.seed}",
    }
    if args.init:
        metadata["initialised_from"] = os.path.abspath(args.init)
    best = summary["best"]
    if best is not None:
        metadata["heldout_top1_agreement"] = f"{best['heldout_agreement']:.4f}"
        metadata["heldout_top1_agreement_before"] = f"{summary['agreement_before']:.4f}"
        metadata["heldout_evaluated_positions"] = str(summary["evaluated_positions"])
        metadata["kept"] = (f"evaluation {best['evaluation']} of {len(summary['curve']) - 1} "
                            f"(epoch {best['epoch']}, {best['positions_trained']} positions "
                            "trained): the best held-out top-1 agreement")
    return metadata


def train(args):
    """Loads, trains, writes the head; returns the summary dict."""
    start = time.monotonic()
    manifest = load_manifest(args.data_dir, args.allow_incomplete)
    spec = model_spec(manifest, os.path.join(args.data_dir, "manifest.json"))
    data = load_positions(args.data_dir, manifest, spec)
    head = load_frozen(os.path.join(args.data_dir, manifest["frozen"]), spec)
    model = ExitLayer(spec)
    model.load_state_dict(load_init_layer(
        args.init or os.path.join(args.data_dir, manifest["init_layer"]), spec, manifest))
    model.eval()
    train_spans, heldout_spans = split_sequences(sequence_spans(data), args.heldout, args.seed)
    train_windows = windows_of(train_spans, args.max_len)
    eval_windows = evaluation_windows(windows_of(heldout_spans, args.max_len),
                                      args.eval_positions, args.seed)
    summary = {"epochs": args.epochs, "positions": len(data),
               "train_sequences": len(train_spans), "heldout_sequences": len(heldout_spans),
               "train_positions": sum(e - s for s, e in train_spans),
               "heldout_positions": sum(e - s for s, e in heldout_spans),
               "evaluated_positions": sum(w.end - w.loss_from for w in eval_windows)}
    log(f"{len(data)} positions in {len(train_spans) + len(heldout_spans)} sequences: "
        f"{summary['train_positions']} train, {summary['heldout_positions']} held out "
        f"({summary['evaluated_positions']} evaluated); exit layer {manifest['exit_layer']} of "
        f"{spec.num_layers}, vocab {spec.vocab_size}")
    curve = LearningCurve(
        lambda m: heldout_agreement(m, head, data, eval_windows, args.batch),
        curve_settings(manifest, spec, args, summary), args.patience, args.min_delta,
        args.eval_every, log)
    run_training(model, head, data, train_windows, curve, summary, args)
    status = summary["status"]
    if curve.best is not None:
        model.load_state_dict(curve.best_state)
        log(_kept_message(curve))
    write_safetensors(args.out, {kPrefix + k: v.detach().contiguous().numpy()
                                 for k, v in model.state_dict().items()},
                      head_metadata(manifest, spec, args, summary))
    if args.curve:
        curve.write(args.curve, status)
    summary.update(out=os.path.abspath(args.out), seconds=round(time.monotonic() - start, 3))
    log(f"wrote {args.out} in {summary['seconds']:.1f} s ({summary['positions_per_s'] or 0:.0f} "
        "positions/s in training steps)")
    return summary


def run_training(model, head, data, train_windows, curve, summary, args):
    """Evaluates before training, trains up to --epochs epochs with the evaluations of --eval-every
    and each epoch's end, stops early on --patience; fills in the summary's training figures."""
    before = curve.evaluate(model, 0, False)["heldout_agreement"]
    log(f"before training: held-out top-1 agreement {_fmt(before)}")
    if args.curve:
        curve.write(args.curve, "running")
    per_epoch = summary["train_positions"]

    def steps(optimiser, rng, generator):
        return train_steps(model, head, optimiser, data, train_windows, args, rng, generator)

    def epoch_message(epoch, done, loss, count, seconds):
        return (f"epoch {epoch}/{args.epochs}{done}: train loss {loss:.4f}, held-out top-1 "
                f"agreement {_fmt(curve.points[-1]['heldout_agreement'])} (before "
                f"{_fmt(before)}), {count / max(seconds, 1e-9):.0f} positions/s")

    losses, epochs_run = run_epochs(model, curve, steps, len(train_windows), per_epoch, args, log,
                                    epoch_message)
    status = "stopped early" if curve.stop else "finished"
    if curve.stop:
        log(f"stopping early: {args.patience} evaluations in a row without a rise of more than "
            f"{args.min_delta} in held-out agreement")
    summary.update(agreement_before=before, agreement_after=curve.points[-1]["heldout_agreement"],
                   train_loss=losses, epochs_run=epochs_run, positions_trained=curve.positions,
                   train_seconds=round(curve.train_seconds, 6),
                   positions_per_s=curve.positions_per_s, curve=curve.points, best=curve.best,
                   settings=curve.settings, status=status)


def _kept_message(curve):
    best, last = curve.best, curve.points[-1]
    if best["evaluation"] == 0:
        return (f"keeping the initial weights: no evaluation beat the held-out top-1 agreement "
                f"before training, {best['heldout_agreement']:.4f} (the last: "
                f"{last['heldout_agreement']:.4f})")
    return (f"keeping evaluation {best['evaluation']} of {last['evaluation']} (epoch "
            f"{best['epoch']}, {best['positions_trained']} positions trained), the best held-out "
            f"top-1 agreement {best['heldout_agreement']:.4f} (the last: "
            f"{last['heldout_agreement']:.4f})")


def train_predictor(args):
    """Loads the calibration data, trains the Cali-TS predictor (EESD eq. 5), keeps the epoch
    with the lowest held-out BCE, writes it; returns the summary dict."""
    start = time.monotonic()
    manifest, rows = load_cali_data(args.predictor, args.allow_incomplete)
    split = split_by_sequence(rows, args.heldout, args.seed)
    hidden_size, steps = manifest["hidden_size"], manifest["steps"]
    log(f"{len(rows)} rows ({rows.accepted.mean():.4f} accepted) in "
        f"{split.train_sequences + split.heldout_sequences} sequences: {len(split.train)} train, "
        f"{len(split.heldout)} held out; hidden size {hidden_size}, S = {steps} step transforms, "
        f"{parameter_count(hidden_size, steps)} parameters")
    model = initial_predictor(rows, split.train, hidden_size, steps)
    options = FitOptions(epochs=args.epochs, lr=args.lr, weight_decay=args.weight_decay,
                         batch=args.batch, seed=args.seed)
    result = fit(model, rows, split, options, log)
    kept = result.kept
    log(f"keeping epoch {result.kept_epoch} of {args.epochs}, the one with the lowest held-out "
        f"BCE {kept.bce:.4f} (the predictor's S·d² parameters can overfit small data: the best "
        f"held-out epoch is kept, not the last): sigma_m {kept.rmse:.4f}, accuracy "
        f"{kept.accuracy:.4f} against a held-out base rate of {kept.base_rate:.4f} accepted")
    write_safetensors(args.out, model.tensors(),
                      predictor_metadata(manifest, result, len(split.train)))
    summary = {"mode": "predictor", "rows": len(rows), "train_rows": len(split.train),
               "heldout_rows": len(split.heldout), "train_sequences": split.train_sequences,
               "heldout_sequences": split.heldout_sequences,
               "train_base_rate": float(rows.accepted[split.train].mean()),
               "base_rate": kept.base_rate, "epochs": args.epochs,
               "kept_epoch": result.kept_epoch, "sigma_m": kept.rmse,
               "heldout_accuracy": kept.accuracy, "heldout_bce": kept.bce,
               "history": result.history, "out": os.path.abspath(args.out),
               "seconds": round(time.monotonic() - start, 3)}
    log(f"wrote {args.out} in {summary['seconds']:.1f} s")
    return summary


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.predictor is None:
        precision.settle(args, log)
    try:
        summary = train_predictor(args) if args.predictor is not None else train(args)
    except (DataError, SafetensorsError, OSError) as error:
        log(f"error: {error}")
        return 1
    if args.json:
        print(json.dumps(summary))
    return 0


def _check(condition, path, message):
    if not condition:
        raise DataError(f"{path}: {message}")


def _fmt(value):
    return "n/a (no held-out sequences)" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    sys.exit(main())
