#!/usr/bin/python3
"""Trains a feature-level draft head (EAGLE, arXiv 2401.15077 §3; EAGLE-3's training-time test
for depth 2) from `selfspec collect-exit-data --exit-layer L` with L = num_layers.

    scripts/train_feature_head.py DATA_DIR --out feature_head.safetensors [--epochs 3]
        [--lr 1e-4] [--lr-schedule constant|cosine] [--weight-decay 0.01] [--batch 64] [--heldout 0.1] [--negatives 512]
        [--kl-weight 1.0] [--ce-weight 1.0] [--feature-weight 1.0] [--depth2-weight 0.0]
        [--max-len 1024] [--loss-chunk 1024] [--eval-every N] [--eval-positions N] [--patience P]
        [--min-delta 0.002] [--curve CURVE.json] [--precision f32|bf16|auto] [--seed 0]
        [--threads N] [--allow-incomplete]
        [--json]

The data. With exit layer L = num_layers (anything else is refused, naming "exit_layer"), a row's
`hidden` is the model's final residual stream h_i at position i (after all L layers, before the
final norm), next_token[i] = x_{i+1} the token after it, topk_ids / topk_logprobs the full
model's top-k next-token distribution there; init_layer.safetensors holds layer L-1 (the last),
frozen.safetensors the final norm n and the LM head (not trained). The token embedding E is
frozen.safetensors' model.embed_tokens.weight when it has one (the collector writes it for an
untied model when it records exit layer L), else the LM head rows (a tied model's embedding, as
Qwen2.5's).

The head (exit_head/feature_head.py). EAGLE drafts at the feature level: from the final residual
and the token that was sampled after it, predict the next position's final residual, and read
the draft token from it with the model's own LM head. Row i's input is
u_i = fc(concat(n(h_i), E(x_{i+1}))) (fc: Linear 2H -> H with a bias, started as [I | small
random], see FeatureHead.initialise_fc); one transformer layer, started from layer L-1 and causal
over the window at the rows' positions, gives o_i, which estimates h_{i+1}; the draft
distribution is LM(n(o_i)). Loss at row i (rows whose successor i + 1 is in the window):
--feature-weight * SmoothL1(n(o_i), n(h_{i+1})) (mean over H; EAGLE §3.2's regression) + the
exit-head trainer's self-distillation loss on z = n(o_i) against row i + 1's teacher
(exit_head/losses.py: --kl-weight * KL(top-k renormalised || student) + --ce-weight * CE(next
token) over a sampled softmax of the batch's ids and --negatives random ids; EAGLE weights its
token CE 0.1 against the regression's 1.0, this follows the exit trainer's KL + CE defaults),
averaged over rows. Depth 2 (--depth2-weight w > 0; EAGLE-3's training-time test): drafting
feeds the head its own prediction, so at row p = i + 1 the drafted input
û_p = fc(concat(n(o_i), E(x_{p+1}))) attends to the TRUE inputs' keys/values at rows < p and to
its own key/value at p (the drafter's cache after its first draft was accepted; the gradient
flows back through o_i), and its output ô_p gets the same loss against row p + 1, weighted w and
added. w = 0 (the default) is EAGLE-1's training; depth 2 is evaluated either way.

Training follows scripts/train_exit_head.py: AdamW; --batch windows of at most --max-len rows per
step (longer sequences cut into windows overlapping by half; the row before a window's first loss
row predicts it, so every row of a sequence but its first is a target exactly once per epoch);
--loss-chunk rows' sampled-softmax logits at a time; whole sequences held out (--heldout > 0
needed: the kept weights and the agreements come from them). Evaluations on the held-out rows
(the --eval-positions subset, --eval-every, --patience and --min-delta as there; the subset's N
rows include the sequences' first rows, which have no target, so fewer are evaluated) give:
depth-1 agreement (the argmax over the FULL vocabulary of LM(n(o_i)) == topk_ids[i+1, 0]);
depth-2 agreement of the rows p against topk_ids[p+1, 0], unconditional and given that the depth-1
draft at p - 1 agreed; and chain_expected_tokens = 1 + a1 + a1 * a2|1, the expected tokens per
verification of a greedy 2-token draft chain. Depth 2 uses the data's next token x_{p+1} as the
draft's token, so "given depth 1" is exactly the drafter's acceptance where the collected sequence
followed the full model's greedy token. The kept weights are the evaluation's with the best
depth-1 agreement (the earliest on a tie; before training included): depth 1 is what every
drafted token depends on, it is what --patience watches, and it has the most rows to measure.
Progress (positions/s and the epoch's ETA) goes to stderr every
exit_head.training_loop.kProgressSeconds.

Output: --out, written atomically, F32 tensors "feature_head.fc.weight" [H, 2H],
"feature_head.fc.bias" [H] and "feature_head.layer.<HF layer suffix>" (the names of
ExitLayer's state_dict), metadata format "selfspec-feature-head", version "1", model_identity,
hidden_size, num_layers, vocab_size, embedding (its source), kept, the kept evaluation's
heldout_depth1_agreement, heldout_depth2_agreement, heldout_depth2_agreement_given_depth1,
heldout_chain_expected_tokens and their _before values, trained_on, loss, optimizer. --curve
FILE.json writes the learning curve (exit_head/learning_curve.py, format
"selfspec-feature-head-curve"; each point's heldout_agreement is the depth-1 agreement, plus
depth2_agreement, depth2_agreement_given_depth1, chain_expected_tokens and their row counts;
scripts/plot_exit_head_curve.py plots its depth-1 line). --json prints the summary on stdout: the
split, "settings", "train_loss" per epoch, "positions_trained", "seconds", "positions_per_s",
"curve", "best" (the kept point), "kept_evaluation", "best_depth1_agreement",
"best_depth2_agreement" (given depth 1) and "best_depth2_agreement_unconditional",
"chain_expected_tokens" (all of the kept evaluation), "agreement_before", "status". Bad data exits
1 with a one-line message naming the file and the field or tensor, bad arguments 2. Needs
Debian's python3-torch (torch 1.13) and python3-numpy (scripts/setup.sh), run with
/usr/bin/python3.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from exit_head import feature_head as fh  # noqa: E402
from exit_head import precision  # noqa: E402
from exit_head.dataset import (DataError, evaluation_windows, load_manifest,  # noqa: E402
                               load_positions, model_spec, sequence_spans, split_sequences,
                               windows_of)
from exit_head.learning_curve import LearningCurve  # noqa: E402
from exit_head.losses import distillation_loss  # noqa: E402
from exit_head.training_loop import run_epochs  # noqa: E402
from exit_head.safetensors_io import SafetensorsError, write_safetensors  # noqa: E402
from train_exit_head import load_frozen, load_init_layer  # noqa: E402

kCurveFormat = "selfspec-feature-head-curve"
# The evaluation fields added to each learning-curve point (heldout_agreement is depth 1's).
kDepth2Fields = ("depth2_agreement", "depth2_agreement_given_depth1", "chain_expected_tokens",
                 "depth1_positions", "depth2_positions", "depth2_conditioned_positions")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Train an EAGLE feature-level draft head on the final residual stream "
                    "(collect-exit-data with --exit-layer = num_layers).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("data_dir", metavar="DATA_DIR",
                        help="written by collect-exit-data with exit layer = num_layers")
    parser.add_argument("--out", required=True, help="the feature head .safetensors to write")
    parser.add_argument("--epochs", type=int, default=3, help="the most epochs to train")
    parser.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay")
    parser.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant",
                        help="the learning rate: constant, or decayed to 0 by a cosine over "
                             "--epochs (as train_exit_head.py)")
    parser.add_argument("--batch", type=int, default=64,
                        help="sequences (windows of --max-len rows) per optimiser step")
    parser.add_argument("--max-len", type=int, default=1024,
                        help="longer sequences are cut into windows overlapping by half")
    parser.add_argument("--heldout", type=float, default=0.1,
                        help="fraction of sequences held out (evaluations; must be > 0)")
    parser.add_argument("--negatives", type=int, default=512,
                        help="random vocabulary ids added to each sampled softmax (>= vocab "
                             "size: the exact full softmax)")
    parser.add_argument("--loss-chunk", type=int, default=1024,
                        help="rows whose sampled-softmax logits are held at once (memory)")
    parser.add_argument("--kl-weight", type=float, default=1.0, help="weight of the top-k KL")
    parser.add_argument("--ce-weight", type=float, default=1.0,
                        help="weight of the next-token cross-entropy")
    parser.add_argument("--feature-weight", type=float, default=1.0,
                        help="weight of SmoothL1(n(o_i), n(h_{i+1})), the feature regression")
    parser.add_argument("--depth2-weight", type=float, default=0.0,
                        help="weight of the same loss on the depth-2 drafts (0: EAGLE-1 "
                             "training; > 0: EAGLE-3's training-time test)")
    parser.add_argument("--eval-every", type=int, default=0, metavar="N",
                        help="also evaluate every N trained positions, at batch boundaries (0: "
                             "only before training and after each epoch)")
    parser.add_argument("--eval-positions", type=int, default=0, metavar="N",
                        help="evaluate on a fixed, --seed-chosen subset of at most N held-out "
                             "positions (whole windows; 0: all)")
    parser.add_argument("--patience", type=int, default=0, metavar="P",
                        help="stop after P evaluations in a row without a rise of more than "
                             "--min-delta in depth-1 agreement (0: never stop early)")
    parser.add_argument("--min-delta", type=float, default=0.002,
                        help="the rise in depth-1 agreement that counts for --patience")
    parser.add_argument("--curve", metavar="FILE.json",
                        help="write the learning curve as JSON, rewritten after each evaluation")
    precision.add_argument(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="train on a collection whose manifest says complete: false")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    args = parser.parse_args(argv)
    for name in ("epochs", "batch", "max_len", "loss_chunk", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0.0 < args.heldout < 1.0:
        parser.error("need 0 < --heldout < 1 (--heldout > 0: the kept weights and the "
                     "agreements come from the held-out sequences)")
    if args.negatives < 0 or args.lr <= 0:
        parser.error("need --negatives >= 0 and --lr > 0")
    if min(args.kl_weight, args.ce_weight, args.feature_weight, args.depth2_weight) < 0:
        parser.error("need --kl-weight, --ce-weight, --feature-weight and --depth2-weight >= 0")
    if min(args.eval_every, args.eval_positions, args.patience) < 0 or args.min_delta < 0:
        parser.error("need --eval-every, --eval-positions, --patience and --min-delta >= 0")
    return args


def log(message):
    print(f"train_feature_head: {message}", file=sys.stderr, flush=True)


class FeatureCurve(LearningCurve):
    """The exit-head learning curve (heldout_agreement: depth 1's, which picks the kept weights
    and drives --patience) with the depth-2 figures added to each point and its own format."""

    def __init__(self, model_data, settings, args):
        self._model_data = model_data  # (head, data, windows, batch size, embedding)
        self.last = None
        super().__init__(self._depth1, settings, args.patience, args.min_delta, args.eval_every,
                         log)

    def _depth1(self, model):
        head, data, windows, batch, embedding = self._model_data
        self.last = fh.evaluate(model, head, data, windows, batch, embedding)
        return self.last["depth1_agreement"]

    def evaluate(self, model, epoch, end_of_epoch):
        """LearningCurve.evaluate, then the depth-2 fields added to the point and logged."""
        point = super().evaluate(model, epoch, end_of_epoch)
        point.update({k: self.last[k] for k in kDepth2Fields})
        if point["evaluation"] > 0:  # (LearningCurve logs those only; the trainer the first)
            log(f"  {_depth2_text(point)}")
        return point

    def document(self, status):
        return dict(super().document(status), format=kCurveFormat)


def check_final_layer(manifest, spec, path):
    """DataError unless the data was collected at exit layer = num_layers."""
    if manifest["exit_layer"] != spec.num_layers:
        raise DataError(f"{path}: \"exit_layer\" {manifest['exit_layer']!r} is not num_layers "
                        f"{spec.num_layers}: a feature head trains on the final residual stream "
                        f"(collect-exit-data --exit-layer {spec.num_layers}); an exit head "
                        "trains on the others (scripts/train_exit_head.py)")


def backward_depth(z, targets, rows, weight, head, data, args, generator):
    """The gradient of weight * (mean loss over the rows) with respect to z [M, H] (normed
    predictions of data rows `rows` [M], normed targets `targets` [M, H]) and that loss. The
    distillation runs --loss-chunk rows at a time into a detached copy of z, each chunk with its
    own sampled candidate set, so that only one chunk's logits are held at once."""
    leaf = precision.loss_leaf(z)
    feature = fh.feature_loss(leaf, targets.detach().float())
    (weight * args.feature_weight * feature).backward()
    total = args.feature_weight * float(feature)
    for begin in range(0, len(rows), args.loss_chunk):
        chunk = rows[begin:begin + args.loss_chunk]
        loss, _, _ = distillation_loss(
            leaf[begin:begin + args.loss_chunk], head, torch.from_numpy(data.topk_ids[chunk]),
            torch.from_numpy(data.topk_logprobs[chunk]), torch.from_numpy(data.next_token[chunk]),
            args.negatives, generator, args.kl_weight, args.ce_weight)
        (weight * loss * (len(chunk) / len(rows))).backward()
        total += float(loss) * len(chunk) / len(rows)
    return precision.output_gradient(leaf, z), weight * total


def train_step(model, head, batch, data, args, generator):
    """Back-propagates the batch's loss (depth 1, plus --depth2-weight times depth 2); returns it
    (the mean over the depth-1 rows, 0.0 for a batch without any)."""
    depth1 = batch.depth1
    if not bool(depth1.any()):
        return 0.0
    with_depth2 = args.depth2_weight > 0 and bool(batch.depth2.any())
    with precision.autocast(args.precision):
        normed, z1, z2 = fh.forward(model, head, batch, with_depth2)
    targets = fh.next_rows(normed)
    outputs, gradients, loss = [z1[depth1]], [], 0.0
    grad, part = backward_depth(outputs[0], targets[depth1], batch.depth1_targets, 1.0, head,
                                data, args, generator)
    gradients.append(grad)
    loss += part
    if with_depth2:
        outputs.append(z2[batch.depth2])
        grad, part = backward_depth(outputs[1], targets[batch.depth2], batch.depth2_targets,
                                    args.depth2_weight, head, data, args, generator)
        gradients.append(grad)
        loss += part
    torch.autograd.backward(outputs, gradients)
    return loss


def train_steps(model, head, optimiser, data, windows, embedding, args, rng, generator):
    """One pass over the train windows in a random order: yields (summed loss, depth-1 rows,
    seconds) after each optimiser step, with the model in eval mode (the caller may evaluate)."""
    order = rng.permutation(len(windows))
    for begin in range(0, len(order), args.batch):
        start = time.monotonic()
        model.train()
        batch = fh.FeatureBatch(data, [windows[i] for i in order[begin:begin + args.batch]],
                                embedding)
        optimiser.zero_grad()
        loss = train_step(model, head, batch, data, args, generator)
        optimiser.step()
        model.eval()
        count = int(batch.depth1.sum())
        yield loss * count, count, time.monotonic() - start


def curve_settings(manifest, spec, args, summary, embedding):
    """The run's settings recorded in the curve file and the summary."""
    settings = {"head": "feature", "data_dir": os.path.abspath(args.data_dir),
                "data_name": os.path.basename(os.path.normpath(os.path.abspath(args.data_dir))),
                "model_identity": spec.identity, "exit_layer": manifest["exit_layer"],
                "num_layers": spec.num_layers, "hidden_size": spec.hidden_size,
                "vocab_size": spec.vocab_size, "embedding": embedding.source,
                "out": os.path.abspath(args.out)}
    settings.update({name: getattr(args, name) for name in (
        "epochs", "lr", "lr_schedule", "weight_decay", "batch", "max_len", "negatives", "loss_chunk",
        "kl_weight", "ce_weight", "feature_weight", "depth2_weight", "heldout", "seed", "threads",
        "precision", "precision_probe",
        "eval_every", "eval_positions", "patience", "min_delta")})
    settings.update({name: summary[name] for name in (
        "train_positions", "heldout_positions", "evaluated_positions")})
    return settings


def head_metadata(manifest, spec, args, summary, embedding):
    best = summary["best"]
    before = summary["curve"][0]
    loss = (f"{args.feature_weight} * SmoothL1(n(o_i), n(h_i+1)) + {args.kl_weight} * "
            f"KL(teacher top-{manifest['top_k']} renormalised || student) + {args.ce_weight} * "
            f"CE(next token) at depth 1, plus {args.depth2_weight} times the same at depth 2; "
            f"student softmax sampled over the batch's top-k and next-token ids plus "
            f"{args.negatives} uniform random vocabulary ids")
    metadata = {
        "format": fh.kFormat, "version": fh.kVersion, "model_identity": spec.identity,
        "hidden_size": str(spec.hidden_size), "num_layers": str(spec.num_layers),
        "vocab_size": str(spec.vocab_size), "embedding": embedding.source,
        "trained_on": (f"{os.path.abspath(args.data_dir)}, {summary['positions']} positions "
                       f"({summary['train_positions']} train targets / "
                       f"{summary['heldout_positions']} held out), {summary['epochs_run']} of "
                       f"at most {args.epochs} epochs ({summary['positions_trained']} positions "
                       f"trained, {summary['status']})"),
        "loss": loss,
        "optimizer": f"AdamW lr {args.lr} ({args.lr_schedule}) weight_decay "
                     f"{args.weight_decay}, batch {args.batch} "
                     f"sequences (windows of <= {args.max_len} positions), seed {args.seed}",
        "kept": (f"evaluation {best['evaluation']} of {len(summary['curve']) - 1} (epoch "
                 f"{best['epoch']}, {best['positions_trained']} positions trained): the best "
                 "held-out depth-1 agreement"),
        "heldout_evaluated_positions": str(summary["evaluated_positions"]),
    }
    for key, field in (("heldout_depth1_agreement", "heldout_agreement"),
                       ("heldout_depth2_agreement", "depth2_agreement"),
                       ("heldout_depth2_agreement_given_depth1", "depth2_agreement_given_depth1"),
                       ("heldout_chain_expected_tokens", "chain_expected_tokens")):
        metadata[key] = _fmt(best[field])
        metadata[key + "_before"] = _fmt(before[field])
    return metadata


def train(args):
    """Loads, trains, writes the head; returns the summary dict."""
    start = time.monotonic()
    manifest = load_manifest(args.data_dir, args.allow_incomplete)
    manifest_path = os.path.join(args.data_dir, "manifest.json")
    spec = model_spec(manifest, manifest_path, allow_final=True)
    check_final_layer(manifest, spec, manifest_path)
    data = load_positions(args.data_dir, manifest, spec)
    frozen_path = os.path.join(args.data_dir, manifest["frozen"])
    head = load_frozen(frozen_path, spec)
    embedding = fh.load_embedding(frozen_path, spec, head)
    model = fh.FeatureHead(spec)
    model.layer.load_state_dict(load_init_layer(
        os.path.join(args.data_dir, manifest["init_layer"]), spec, manifest))
    model.initialise_fc(torch.Generator().manual_seed(args.seed))
    model.eval()
    train_spans, heldout_spans = split_sequences(sequence_spans(data), args.heldout, args.seed)
    train_windows = windows_of(train_spans, args.max_len)
    eval_windows = evaluation_windows(windows_of(heldout_spans, args.max_len),
                                      args.eval_positions, args.seed)
    if not any(w.end > max(w.loss_from, w.start + 1) for w in eval_windows):
        raise DataError(f"{manifest_path}: no held-out position has a predecessor in its "
                        "sequence to predict it (raise --heldout or --eval-positions)")
    summary = {"epochs": args.epochs, "positions": len(data),
               "train_sequences": len(train_spans), "heldout_sequences": len(heldout_spans),
               "train_positions": sum(e - s - 1 for s, e in train_spans),
               "heldout_positions": sum(e - s - 1 for s, e in heldout_spans),
               "evaluated_positions": sum(
                   w.end - max(w.loss_from, w.start + 1) for w in eval_windows)}
    log(f"{len(data)} positions in {len(train_spans) + len(heldout_spans)} sequences: "
        f"{summary['train_positions']} train targets, {summary['heldout_positions']} held out "
        f"({summary['evaluated_positions']} evaluated); final residual of {spec.num_layers} "
        f"layers, vocab {spec.vocab_size}, embedding {embedding.source}")
    curve = FeatureCurve((head, data, eval_windows, args.batch, embedding),
                         curve_settings(manifest, spec, args, summary, embedding), args)
    run_training(model, head, data, train_windows, embedding, curve, summary, args)
    model.load_state_dict(curve.best_state)
    log(_kept_message(curve))
    write_safetensors(args.out, fh.head_tensors(model),
                      head_metadata(manifest, spec, args, summary, embedding))
    if args.curve:
        curve.write(args.curve, summary["status"])
    best = curve.best
    summary.update(kept_evaluation=best["evaluation"],
                   best_depth1_agreement=best["heldout_agreement"],
                   best_depth2_agreement=best["depth2_agreement_given_depth1"],
                   best_depth2_agreement_unconditional=best["depth2_agreement"],
                   chain_expected_tokens=best["chain_expected_tokens"],
                   out=os.path.abspath(args.out), seconds=round(time.monotonic() - start, 3))
    log(f"wrote {args.out} in {summary['seconds']:.1f} s ({summary['positions_per_s'] or 0:.0f} "
        "positions/s in training steps)")
    return summary


def run_training(model, head, data, train_windows, embedding, curve, summary, args):
    """Evaluates before training, trains up to --epochs epochs with the evaluations of --eval-every
    and each epoch's end, stops early on --patience; fills in the summary's training figures."""
    before = curve.evaluate(model, 0, False)
    log(f"before training: held-out depth-1 agreement {_fmt(before['heldout_agreement'])}; "
        f"{_depth2_text(before)}")
    if args.curve:
        curve.write(args.curve, "running")
    per_epoch = summary["train_positions"]

    def steps(optimiser, rng, generator):
        return train_steps(model, head, optimiser, data, train_windows, embedding, args, rng,
                           generator)

    def epoch_message(epoch, done, loss, count, seconds):
        last = curve.points[-1]
        return (f"epoch {epoch}/{args.epochs}{done}: train loss {loss:.4f}, held-out depth-1 "
                f"agreement {_fmt(last['heldout_agreement'])} (before "
                f"{_fmt(before['heldout_agreement'])}), chain "
                f"{_fmt(last['chain_expected_tokens'])} tokens per round, "
                f"{count / max(seconds, 1e-9):.0f} positions/s")

    def progress_message(epoch, count, seconds):
        return _progress(epoch, args.epochs, count, per_epoch, seconds)

    losses, epochs_run = run_epochs(model, curve, steps, len(train_windows), per_epoch, args, log,
                                    epoch_message, progress_message)
    status = "stopped early" if curve.stop else "finished"
    if curve.stop:
        log(f"stopping early: {args.patience} evaluations in a row without a rise of more than "
            f"{args.min_delta} in held-out depth-1 agreement")
    summary.update(agreement_before=before["heldout_agreement"],
                   agreement_after=curve.points[-1]["heldout_agreement"], train_loss=losses,
                   epochs_run=epochs_run, positions_trained=curve.positions,
                   train_seconds=round(curve.train_seconds, 6),
                   positions_per_s=curve.positions_per_s, curve=curve.points, best=curve.best,
                   settings=curve.settings, status=status)


def _depth2_text(point):
    return (f"depth 2: agreement {_fmt(point['depth2_agreement'])}, given depth 1 "
            f"{_fmt(point['depth2_agreement_given_depth1'])} "
            f"({point['depth2_conditioned_positions']} of {point['depth2_positions']} rows); "
            f"greedy 2-token chain {_fmt(point['chain_expected_tokens'])} tokens per round")


def _progress(epoch, epochs, count, per_epoch, seconds):
    rate = count / max(seconds, 1e-9)
    eta = (per_epoch - count) / rate if rate > 0 else float("inf")
    return (f"epoch {epoch}/{epochs}: {count}/{per_epoch} positions, {rate:.0f} positions/s, "
            f"ETA {eta:.0f} s for the epoch (training steps only)")


def _kept_message(curve):
    best, last = curve.best, curve.points[-1]
    if best["evaluation"] == 0:
        return (f"keeping the initial weights: no evaluation beat the held-out depth-1 agreement "
                f"before training, {best['heldout_agreement']:.4f} (the last: "
                f"{last['heldout_agreement']:.4f})")
    return (f"keeping evaluation {best['evaluation']} of {last['evaluation']} (epoch "
            f"{best['epoch']}, {best['positions_trained']} positions trained), the best held-out "
            f"depth-1 agreement {best['heldout_agreement']:.4f} (the last: "
            f"{last['heldout_agreement']:.4f}); depth 2 given depth 1 "
            f"{_fmt(best['depth2_agreement_given_depth1'])}, chain "
            f"{_fmt(best['chain_expected_tokens'])} tokens per round")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    precision.settle(args, log)
    try:
        summary = train(args)
    except (DataError, SafetensorsError, OSError) as error:
        log(f"error: {error}")
        return 1
    if args.json:
        print(json.dumps(summary))
    return 0


def _fmt(value):
    return "n/a" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    sys.exit(main())
