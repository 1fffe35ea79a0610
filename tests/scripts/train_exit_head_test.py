"""Tests scripts/train_exit_head.py on a tiny synthetic training-data directory.

The data is made here with numpy: a random model (hidden 32, 4 query heads of 8 over 2 kv heads,
vocab 300) whose "full model" is a known random exit layer (the teacher), evaluated by an
independent numpy implementation of the layer (EESD formats, section 3; RoPE in the engine's
rotate-half convention). So an exit head initialised to the teacher must agree with the recorded
top-1 everywhere (the trainer's forward matches), and one initialised to a perturbed teacher must
get closer to it by training. CurveTest covers --eval-every, --eval-positions, --patience and
--curve (the learning curve's points, early stopping, the best evaluation's weights being the ones
written) and scripts/plot_exit_head_curve.py (skipped without matplotlib). Exits 77 (ctest:
skipped) when torch is not importable.

    /usr/bin/python3 tests/scripts/train_exit_head_test.py
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import torch  # (the trainer's dependency; skipped without it)
except ImportError as missing:
    print(f"SKIP: {missing} (install python3-torch with scripts/setup.sh; run /usr/bin/python3)")
    sys.exit(77)

kScripts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
sys.path.insert(0, kScripts)

import train_exit_head  # noqa: E402
from exit_head.dataset import (Window, evaluation_windows, load_manifest,  # noqa: E402
                               load_positions, model_spec, sequence_spans, split_sequences,
                               windows_of)
from exit_head.exit_layer import ExitLayer  # noqa: E402
from exit_head.safetensors_io import (Bf16, bf16_to_f32, dtype_of, f32_to_bf16,  # noqa: E402
                                      read_safetensors, write_safetensors)

kSpec = dict(hidden_size=32, intermediate_size=64, num_layers=4, num_heads=4, num_kv_heads=2,
             head_dim=8, vocab_size=300, rope_theta=10000.0, rms_norm_eps=1e-6,
             attention_bias=True, o_proj_bias=False)
kExitLayer, kTopK, kIdentity = 2, 4, "0123456789abcdef"


def random_layer(rng, h=32, i=64, q=4 * 8, kv=2 * 8):
    """{HF name (no prefix): f32 array} of a random layer of kSpec's shape (or of hidden size h,
    intermediate size i, query width q and key/value width kv)."""
    shapes = {"input_layernorm.weight": (h,), "post_attention_layernorm.weight": (h,),
              "self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (kv, h),
              "self_attn.v_proj.weight": (kv, h), "self_attn.o_proj.weight": (h, q),
              "self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,),
              "self_attn.v_proj.bias": (kv,), "mlp.gate_proj.weight": (i, h),
              "mlp.up_proj.weight": (i, h), "mlp.down_proj.weight": (h, i)}
    layer = {}
    for name, shape in shapes.items():
        if name.endswith("layernorm.weight"):
            layer[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            layer[name] = rng.standard_normal(shape) / np.sqrt(shape[-1])
    return {k: v.astype(np.float32) for k, v in layer.items()}


def rms(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def reference_layer(w, x, pos):
    """The exit layer on one sequence x [T, H] at positions pos [T], in numpy float64."""
    t, d, half = x.shape[0], 8, 4
    inv_freq = (1.0 / 10000.0 ** (np.arange(half) * 2 / d)).astype(np.float32).astype(np.float64)
    angle = pos[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angle), np.sin(angle)

    def rope(v):  # v [T, heads * d]: rotate-half per head
        v = v.reshape(t, -1, d)
        a, b = v[..., :half], v[..., half:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([a * c - b * s, b * c + a * s], -1)

    h = rms(x, w["input_layernorm.weight"])
    q = rope(h @ w["self_attn.q_proj.weight"].T + w["self_attn.q_proj.bias"])
    k = rope(h @ w["self_attn.k_proj.weight"].T + w["self_attn.k_proj.bias"])
    v = (h @ w["self_attn.v_proj.weight"].T + w["self_attn.v_proj.bias"]).reshape(t, -1, d)
    out = np.zeros((t, 4, d))
    for head in range(4):  # query heads 0, 1 read kv head 0; 2, 3 read kv head 1
        scores = q[:, head] @ k[:, head // 2].T / np.sqrt(d) + np.triu(np.full((t, t), -np.inf), 1)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        out[:, head] = (p / p.sum(-1, keepdims=True)) @ v[:, head // 2]
    x = x + out.reshape(t, -1) @ w["self_attn.o_proj.weight"].T
    h = rms(x, w["post_attention_layernorm.weight"])
    gate = h @ w["mlp.gate_proj.weight"].T
    return x + (gate / (1 + np.exp(-gate)) * (h @ w["mlp.up_proj.weight"].T)) @ \
        w["mlp.down_proj.weight"].T


def make_data_dir(root, init_layer, teacher, rng, sequences=48, complete=True):
    """Writes a collect-exit-data directory whose full model is `teacher`; returns its path."""
    norm = (1.0 + 0.1 * rng.standard_normal(32)).astype(np.float32)
    lm_head = f32_to_bf16(rng.standard_normal((300, 32)).astype(np.float32))
    lm_head_f32 = bf16_to_f32(lm_head).astype(np.float64)
    embed = rng.standard_normal((300, 32))
    columns = {n: [] for n in ("hidden", "sequence", "position", "token", "next_token",
                               "topk_ids", "topk_logprobs")}
    for s in range(sequences):
        length = int(rng.integers(8, 25))
        tokens = rng.integers(0, 300, length)
        hidden = bf16_to_f32(f32_to_bf16(embed[tokens] + 0.5 * rng.standard_normal((length, 32))))
        out = reference_layer(teacher, hidden.astype(np.float64), np.arange(length, dtype=float))
        logits = rms(out, norm) @ lm_head_f32.T
        logprobs = logits - logits.max(-1, keepdims=True)
        logprobs -= np.log(np.exp(logprobs).sum(-1, keepdims=True))
        top = np.argsort(-logits, -1)[:, :kTopK]
        for name, value in (("hidden", hidden), ("sequence", np.full(length, s)),
                            ("position", np.arange(length)), ("token", tokens),
                            ("next_token", top[:, 0]), ("topk_ids", top),
                            ("topk_logprobs", np.take_along_axis(logprobs, top, -1))):
            columns[name].append(value)
    path = os.path.join(root, "data")
    os.makedirs(path)
    arrays = {n: np.concatenate(v).astype(np.float32) for n, v in columns.items()}
    arrays["hidden"] = Bf16(f32_to_bf16(arrays["hidden"]))
    positions = len(arrays["sequence"])
    write_safetensors(os.path.join(path, "shard-00000.safetensors"), arrays, {})
    head_meta = {"format": "selfspec-exit-head", "model_identity": kIdentity,
                 "exit_layer": str(kExitLayer), "hidden_size": "32", "num_layers": "4",
                 "trained_on": "none (layer 2's weights)"}
    write_safetensors(os.path.join(path, "init_layer.safetensors"),
                      {"exit_layer." + k: v for k, v in init_layer.items()}, head_meta)
    write_safetensors(os.path.join(path, "frozen.safetensors"),
                      {"model.norm.weight": norm, "lm_head.weight": Bf16(lm_head)}, {})
    manifest = {"format": "selfspec-exit-data", "version": 1,
                "model": dict(kSpec, path="synthetic", identity=kIdentity, model_type="llama",
                              tie_word_embeddings=False),
                "exit_layer": kExitLayer, "top_k": kTopK, "prompts_file": "none",
                "prompts_sha256": "", "split": "calibration", "mix": {}, "tp": 1,
                "sequences": sequences, "positions": positions,
                "shards": [{"file": "shard-00000.safetensors", "sequences": sequences,
                            "positions": positions}],
                "init_layer": "init_layer.safetensors", "frozen": "frozen.safetensors",
                "complete": complete}
    with open(os.path.join(path, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return path


def run_trainer(argv):
    """(exit code, the --json summary or None, stderr text) of the trainer run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = train_exit_head.main(argv)
    summary = json.loads(out.getvalue()) if out.getvalue().strip() else None
    return code, summary, err.getvalue()


class TrainExitHeadTest(unittest.TestCase):
    def setUp(self):
        self.temp = tempfile.TemporaryDirectory()
        self.rng = np.random.default_rng(7)
        self.teacher = random_layer(self.rng)

    def tearDown(self):
        self.temp.cleanup()

    def test_teacher_initialised_head_agrees_everywhere_before_training(self):
        data = make_data_dir(self.temp.name, self.teacher, self.teacher, self.rng)
        out = os.path.join(self.temp.name, "head.safetensors")
        code, summary, err = run_trainer([data, "--out", out, "--epochs", "1", "--lr", "1e-6",
                                          "--heldout", "0.5", "--json", "--threads", "1"])
        self.assertEqual(code, 0, err)
        self.assertEqual(summary["agreement_before"], 1.0, err)

    def test_training_improves_heldout_agreement_and_writes_the_head(self):
        noisy = {k: v + 0.6 * self.rng.standard_normal(v.shape).astype(np.float32) *
                 np.float32(np.std(v) if "layernorm" not in k else 0.0)
                 for k, v in self.teacher.items()}
        data = make_data_dir(self.temp.name, noisy, self.teacher, self.rng)
        out = os.path.join(self.temp.name, "head.safetensors")
        code, summary, err = run_trainer([data, "--out", out, "--epochs", "8", "--lr", "1e-2",
                                          "--batch", "4", "--negatives", "64", "--heldout", "0.25",
                                          "--json", "--threads", "1"])
        self.assertEqual(code, 0, err)
        before, after = summary["agreement_before"], summary["agreement_after"]
        self.assertGreater(after, before + 0.1, err)
        self.assertGreater(after, 10.0 / 300, err)  # far above chance
        self.assertEqual(summary["train_sequences"] + summary["heldout_sequences"], 48)
        self.assertEqual(summary["heldout_sequences"], 12)
        self.check_head_file(out, summary)

    def test_bf16_training_learns_like_f32_and_writes_an_f32_head(self):
        # --precision bf16: the forward under bf16 autocast, the weights, the loss and the
        # evaluations in f32. It learns (its agreement rises as f32's does) yet is not f32's run.
        data = make_data_dir(self.temp.name, noisy_teacher(self.teacher, self.rng),
                             self.teacher, self.rng)
        runs = {}
        for precision in ("f32", "bf16"):
            out = os.path.join(self.temp.name, f"{precision}.safetensors")
            code, summary, err = run_trainer(
                [data, "--out", out, "--epochs", "6", "--lr", "1e-2", "--batch", "4",
                 "--negatives", "64", "--heldout", "0.25", "--precision", precision, "--json",
                 "--threads", "1"])
            self.assertEqual(code, 0, err)
            self.assertEqual(summary["settings"]["precision"], precision)
            self.check_head_file(out, summary)
            runs[precision] = summary
        f32, bf16 = runs["f32"], runs["bf16"]
        self.assertEqual(bf16["agreement_before"], f32["agreement_before"])  # f32 evaluations
        self.assertGreater(bf16["agreement_after"], bf16["agreement_before"] + 0.1)
        self.assertGreater(bf16["agreement_after"], f32["agreement_after"] - 0.1)
        self.assertNotEqual(bf16["train_loss"], f32["train_loss"])
        np.testing.assert_allclose(bf16["train_loss"][0], f32["train_loss"][0], rtol=0.05)

    def check_head_file(self, out, summary):
        tensors, metadata = read_safetensors(out)
        self.assertEqual({k: list(v.shape) for k, v in tensors.items()},
                         {"exit_layer." + k: list(v.shape) for k, v in self.teacher.items()})
        self.assertEqual(set(dtype_of(out).values()), {"F32"})
        self.assertEqual(metadata["format"], "selfspec-exit-head")
        self.assertEqual(metadata["model_identity"], kIdentity)
        self.assertEqual(metadata["exit_layer"], "2")
        self.assertEqual((metadata["hidden_size"], metadata["num_layers"]), ("32", "4"))
        self.assertIn(f"{summary['positions']} positions", metadata["trained_on"])
        self.assertEqual(float(metadata["heldout_top1_agreement"]),  # the kept evaluation's
                         round(summary["best"]["heldout_agreement"], 4))
        self.assertIn(f"evaluation {summary['best']['evaluation']} of ", metadata["kept"])
        self.assertIn("sampled", metadata["loss"])

    def test_init_continues_from_a_trained_head_with_a_cosine_schedule(self):
        data = make_data_dir(self.temp.name, noisy_teacher(self.teacher, self.rng),
                             self.teacher, self.rng)
        first = os.path.join(self.temp.name, "first.safetensors")
        common = ["--lr", "1e-2", "--batch", "4", "--negatives", "64", "--heldout", "0.25",
                  "--json", "--threads", "1"]
        code, one, err = run_trainer([data, "--out", first, "--epochs", "2"] + common)
        self.assertEqual(code, 0, err)
        second = os.path.join(self.temp.name, "second.safetensors")
        code, two, err = run_trainer([data, "--out", second, "--epochs", "2", "--init", first,
                                      "--lr-schedule", "cosine"] + common)
        self.assertEqual(code, 0, err)
        # The second run starts where the first one's kept head is.
        self.assertEqual(two["agreement_before"], one["best"]["heldout_agreement"], err)
        self.assertGreaterEqual(two["best"]["heldout_agreement"], two["agreement_before"])
        _, metadata = read_safetensors(second)
        self.assertEqual(metadata["initialised_from"], os.path.abspath(first))
        self.assertIn("(cosine)", metadata["optimizer"])
        self.assertEqual(two["settings"]["lr_schedule"], "cosine")
        # A head of another exit layer is refused, naming the file.
        tensors, meta = read_safetensors(first)
        other = os.path.join(self.temp.name, "other.safetensors")
        write_safetensors(other, tensors, dict(meta, exit_layer="3"))
        code, _, err = run_trainer([data, "--out", second, "--init", other] + common)
        self.assertEqual(code, 1)
        self.assertIn("other.safetensors", err)

    def test_loss_chunks_do_not_change_an_exact_softmax_step(self):
        noisy = {k: v * 1.2 for k, v in self.teacher.items()}
        data = make_data_dir(self.temp.name, noisy, self.teacher, self.rng, sequences=12)
        losses = []
        for chunk in ("7", "4096"):  # --negatives >= vocab: the softmax is over all 300 ids
            code, summary, err = run_trainer(
                [data, "--out", os.path.join(self.temp.name, f"h{chunk}.safetensors"), "--epochs",
                 "2", "--lr", "1e-2", "--batch", "3", "--negatives", "300", "--loss-chunk", chunk,
                 "--json", "--threads", "1"])
            self.assertEqual(code, 0, err)
            losses.append(summary["train_loss"])
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)

    def test_incomplete_collection_is_refused_unless_allowed(self):
        data = make_data_dir(self.temp.name, self.teacher, self.teacher, self.rng, sequences=6,
                             complete=False)
        out = os.path.join(self.temp.name, "head.safetensors")
        code, _, err = run_trainer([data, "--out", out, "--epochs", "1"])
        self.assertEqual(code, 1)
        self.assertIn("manifest.json", err)
        self.assertIn("--allow-incomplete", err)
        self.assertFalse(os.path.exists(out))
        code, _, err = run_trainer([data, "--out", out, "--epochs", "1", "--allow-incomplete"])
        self.assertEqual(code, 0, err)
        self.assertTrue(os.path.exists(out))


def noisy_teacher(teacher, rng, scale=0.6):
    """The teacher's layer with Gaussian noise of `scale` times each weight's spread added."""
    return {k: v + scale * rng.standard_normal(v.shape).astype(np.float32) *
            np.float32(np.std(v) if "layernorm" not in k else 0.0) for k, v in teacher.items()}


def run_quiet(argv):
    """(exit code, stderr) of train_exit_head.main(argv) where argparse may exit."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = train_exit_head.main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, err.getvalue()


class CurveTest(unittest.TestCase):
    """--eval-every, --eval-positions, --patience, --curve and plot_exit_head_curve.py."""

    def setUp(self):
        self.temp = tempfile.TemporaryDirectory()
        self.rng = np.random.default_rng(11)
        self.teacher = random_layer(self.rng)

    def tearDown(self):
        self.temp.cleanup()

    def path(self, name):
        return os.path.join(self.temp.name, name)

    def train_noisy(self, extra, sequences=48):
        """(summary, stderr, data dir) of a run from a perturbed teacher (lr 1e-2, batch 4)."""
        data = make_data_dir(self.temp.name, noisy_teacher(self.teacher, self.rng), self.teacher,
                             self.rng, sequences=sequences)
        return self.train(data, extra) + (data,)

    def train(self, data, extra):
        code, summary, err = run_trainer(
            [data, "--lr", "1e-2", "--batch", "4", "--negatives", "64", "--heldout", "0.25",
             "--json", "--threads", "1"] + extra)
        self.assertEqual(code, 0, err)
        return summary, err

    def test_curve_file_has_every_evaluation_and_the_summary_its_figures(self):
        curve_path = self.path("curve.json")
        summary, err, data = self.train_noisy(
            ["--out", self.path("head.safetensors"), "--epochs", "3", "--eval-every", "150",
             "--curve", curve_path])
        with open(curve_path, encoding="utf-8") as f:
            document = json.load(f)
        self.assertEqual((document["format"], document["version"], document["status"]),
                         ("selfspec-exit-head-curve", 1, "finished"))
        settings = document["settings"]
        self.assertEqual((settings["exit_layer"], settings["num_layers"], settings["data_name"],
                          settings["data_dir"]), (2, 4, "data", os.path.abspath(data)))
        self.assertEqual((settings["eval_every"], settings["epochs"], settings["lr"],
                          settings["patience"], settings["evaluated_positions"]),
                         (150, 3, 1e-2, 0, summary["heldout_positions"]))
        points, train = document["curve"], summary["train_positions"]
        self.assertEqual(points, summary["curve"])
        self.assertEqual(document["best"], summary["best"])
        self.assertEqual(document["positions_per_s"], summary["positions_per_s"])
        first = points[0]
        self.assertEqual((first["evaluation"], first["positions_trained"], first["epoch"],
                          first["train_loss_recent"]), (0, 0, 0, None))
        self.assertEqual(first["heldout_agreement"], summary["agreement_before"])
        self.assertEqual(points[-1]["heldout_agreement"], summary["agreement_after"])
        self.assertEqual([p["evaluation"] for p in points], list(range(len(points))))
        self.assertEqual([p["positions_trained"] for p in points if p["end_of_epoch"]],
                         [train, 2 * train, 3 * train])
        self.assertGreater(len(points), 1 + 3 + 3)  # ~ 3 * train / 150 mid-epoch evaluations
        for previous, point in zip(points, points[1:]):
            self.assertGreater(point["positions_trained"], previous["positions_trained"])
            self.assertGreaterEqual(point["seconds"], previous["seconds"])
            self.assertEqual(point["epoch"], -(-point["positions_trained"] // train))
            # At the first batch boundary past a multiple of 150, or at an epoch's end.
            self.assertTrue(point["end_of_epoch"] or point["positions_trained"] // 150 >
                            previous["positions_trained"] // 150, point)
            self.assertLess(point["positions_trained"] - previous["positions_trained"],
                            150 + 4 * 25)  # a batch is at most 4 sequences of < 25 positions
            self.assertGreaterEqual(point["heldout_agreement"], 0.0)
        # train_loss_recent weighted by the positions since the previous evaluation gives each
        # epoch's mean train loss.
        for epoch, loss in enumerate(summary["train_loss"], 1):
            weighted = sum(p["train_loss_recent"] *
                           (p["positions_trained"] - q["positions_trained"])
                           for q, p in zip(points, points[1:]) if p["epoch"] == epoch)
            self.assertAlmostEqual(weighted / train, loss, places=5)
        best = max(points, key=lambda p: p["heldout_agreement"])  # the earliest of the best
        self.assertEqual(summary["best"], best)
        self.assertEqual((summary["positions_trained"], summary["epochs_run"], summary["status"]),
                         (3 * train, 3, "finished"))
        self.assertAlmostEqual(summary["positions_per_s"],
                               summary["positions_trained"] / summary["train_seconds"],
                               delta=0.01 * summary["positions_per_s"])
        self.assertIn(f"eval {len(points) - 1} (epoch 3, {3 * train} positions trained)", err)
        self.assertIn("positions/s in training steps", err)

    def test_evaluations_do_not_change_training(self):
        data = make_data_dir(self.temp.name, noisy_teacher(self.teacher, self.rng), self.teacher,
                             self.rng)
        plain, _ = self.train(data, ["--out", self.path("a.safetensors"), "--epochs", "2"])
        often, _ = self.train(data, ["--out", self.path("b.safetensors"), "--epochs", "2",
                                     "--eval-every", "40"])
        self.assertEqual(plain["train_loss"], often["train_loss"])
        self.assertEqual(len(plain["curve"]), 3)
        self.assertEqual([p["heldout_agreement"] for p in plain["curve"]],
                         [p["heldout_agreement"] for p in often["curve"]
                          if p["evaluation"] == 0 or p["end_of_epoch"]])

    def test_patience_stops_when_agreement_cannot_rise_and_keeps_the_initial_weights(self):
        # Initialised to the teacher: agreement 1.0 before training, which nothing can beat.
        data = make_data_dir(self.temp.name, self.teacher, self.teacher, self.rng)
        out = self.path("head.safetensors")
        summary, err = self.train(data, ["--out", out, "--epochs", "50", "--eval-every", "40",
                                         "--patience", "3", "--curve", self.path("c.json")])
        self.assertEqual(summary["agreement_before"], 1.0)
        self.assertEqual(summary["status"], "stopped early")
        self.assertEqual(len(summary["curve"]), 1 + 3)  # before training, then 3 without a rise
        self.assertLess(summary["positions_trained"], 3 * 40 + 3 * 4 * 25)
        self.assertEqual(summary["epochs_run"], 1)
        self.assertEqual(summary["best"]["evaluation"], 0)
        self.assertIn("stopping early: 3 evaluations in a row", err)
        self.assertIn("keeping the initial weights", err)
        with open(self.path("c.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["status"], "stopped early")
        tensors, metadata = read_safetensors(out)
        init, _ = read_safetensors(os.path.join(data, "init_layer.safetensors"))
        self.assertEqual(set(tensors), set(init))
        for name, value in tensors.items():  # lr 1e-2 moved them; the kept weights are these
            np.testing.assert_array_equal(value, init[name], err_msg=name)
        self.assertEqual(metadata["heldout_top1_agreement"], "1.0000")
        self.assertIn("evaluation 0 of 3", metadata["kept"])
        self.assertIn("stopped early", metadata["trained_on"])

    def test_patience_counts_only_rises_above_min_delta(self):
        # A perturbed start improves at first; with --min-delta 1 no evaluation counts as a rise.
        summary, _, _ = self.train_noisy(["--out", self.path("head.safetensors"), "--epochs", "9",
                                          "--patience", "2", "--min-delta", "1"])
        self.assertEqual((summary["status"], summary["epochs_run"], len(summary["curve"])),
                         ("stopped early", 2, 3))
        self.assertGreater(summary["best"]["evaluation"], 0)  # the best is kept all the same

    def test_written_head_is_the_best_evaluation_on_the_evaluated_subset(self):
        out = self.path("head.safetensors")
        summary, err, data = self.train_noisy(
            ["--out", out, "--epochs", "6", "--eval-every", "100", "--eval-positions", "60"])
        self.assertEqual(summary["evaluated_positions"], 60)
        self.assertEqual(summary["settings"]["evaluated_positions"], 60)
        best = summary["best"]
        self.assertGreater(best["evaluation"], 0, err)
        self.assertIn(f"keeping evaluation {best['evaluation']} of {len(summary['curve']) - 1}",
                      err)
        # The written head, evaluated here on the same 60 positions, scores the best agreement.
        manifest = load_manifest(data, False)
        spec = model_spec(manifest)
        positions = load_positions(data, manifest, spec)
        head = train_exit_head.load_frozen(os.path.join(data, "frozen.safetensors"), spec)
        _, held = split_sequences(sequence_spans(positions), 0.25, 0)
        windows = evaluation_windows(windows_of(held, 1024), 60, 0)
        tensors, metadata = read_safetensors(out)
        model = ExitLayer(spec)
        model.load_state_dict({k[len("exit_layer."):]: torch.from_numpy(np.array(v))
                               for k, v in tensors.items()})
        model.eval()
        agreement = train_exit_head.heldout_agreement(model, head, positions, windows, 4)
        self.assertEqual(agreement, best["heldout_agreement"])
        self.assertEqual(metadata["heldout_top1_agreement"], f"{best['heldout_agreement']:.4f}")
        self.assertEqual(metadata["heldout_evaluated_positions"], "60")

    def test_bad_options_are_refused(self):
        data = make_data_dir(self.temp.name, self.teacher, self.teacher, self.rng, sequences=6)
        out = self.path("head.safetensors")
        for argv, message in (
                ([data, "--out", out, "--patience", "2", "--heldout", "0"], "--heldout > 0"),
                ([data, "--out", out, "--eval-every", "-1"], ">= 0"),
                (["--predictor", data, "--out", out, "--curve", "c.json"],
                 "--curve applies to the exit head")):
            code, err = run_quiet(argv)
            self.assertEqual(code, 2, err)
            self.assertIn(message, err)
        self.assertFalse(os.path.exists(out))

    def test_plot_script_draws_curves_and_refuses_malformed_files(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError as missing:
            self.skipTest(f"no matplotlib ({missing})")
        curves = []
        for lr in ("1e-2", "3e-3"):
            curves.append(self.path(f"curve-{lr}.json"))
            self.train_noisy(["--out", self.path("head.safetensors"), "--epochs", "2",
                              "--eval-every", "100", "--lr", lr, "--curve", curves[-1]],
                             sequences=24)
            os.rename(os.path.join(self.temp.name, "data"), self.path(f"data-{lr}"))
        png = self.path("plot.png")
        script = os.path.join(kScripts, "plot_exit_head_curve.py")
        result = subprocess.run([sys.executable, script] + curves + ["--out", png, "--title",
                                                                     "test"],
                                capture_output=True, text=True, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        import plot_exit_head_curve  # (needs matplotlib: imported only here)
        labels = plot_exit_head_curve.labels_of(
            [plot_exit_head_curve.load_curve(c) for c in curves])
        self.assertEqual(labels, ["N 2 of 4, data, lr 0.01", "N 2 of 4, data, lr 0.003"])
        bad = self.path("bad.json")
        for text, message in (("{not json", "not readable JSON"),
                              ('{"settings": {}}', "no \"curve\" list"),
                              ('{"settings": {}, "curve": [{"positions_trained": 0, '
                               '"heldout_agreement": 1.5}]}', "curve[0]: heldout_agreement")):
            with open(bad, "w", encoding="utf-8") as f:
                f.write(text)
            result = subprocess.run([sys.executable, script, curves[0], bad, "--out",
                                     self.path("bad.png")], capture_output=True, text=True,
                                    check=False)
            self.assertEqual(result.returncode, 1)
            self.assertEqual(result.stderr.count("\n"), 1, result.stderr)
            self.assertIn(f"plot_exit_head_curve: error: {bad}: ", result.stderr)
            self.assertIn(message, result.stderr)
            self.assertFalse(os.path.exists(self.path("bad.png")))


class DataSplitTest(unittest.TestCase):
    def test_split_keeps_sequences_whole_and_is_seeded(self):
        spans = [(i * 10, i * 10 + 10) for i in range(20)]
        train, held = split_sequences(spans, 0.1, seed=3)
        self.assertEqual((len(train), len(held)), (18, 2))
        self.assertEqual(sorted(train + held), spans)
        self.assertEqual(split_sequences(spans, 0.1, seed=3), (train, held))
        self.assertNotEqual(split_sequences(spans, 0.5, seed=3)[1],
                            split_sequences(spans, 0.5, seed=4)[1])

    def test_windows_train_each_row_once_with_half_a_window_of_context(self):
        windows = windows_of([(0, 5), (5, 42)], max_len=8)
        self.assertEqual(windows[0], Window(0, 5, 0))
        trained = [r for w in windows for r in range(w.loss_from, w.end)]
        self.assertEqual(trained, list(range(42)))
        for w in windows:
            self.assertLessEqual(w.end - w.start, 8)
            self.assertTrue(w.loss_from == w.start or w.loss_from - w.start >= 4, w)


    def test_evaluation_windows_are_a_seeded_subset_of_whole_windows(self):
        windows = windows_of([(0, 5), (5, 42), (42, 50), (50, 61), (61, 90)], max_len=8)
        total = sum(w.end - w.loss_from for w in windows)
        self.assertEqual(evaluation_windows(windows, 0, 1), windows)
        self.assertEqual(evaluation_windows(windows, total + 5, 1), windows)
        chosen = evaluation_windows(windows, 30, seed=1)
        self.assertEqual(chosen, evaluation_windows(windows, 30, seed=1))
        self.assertNotEqual(chosen, evaluation_windows(windows, 30, seed=2))
        self.assertEqual(sum(w.end - w.loss_from for w in chosen), 30)
        cut = 0
        for w in chosen:  # each a window of the input, at most one cut short at its end
            original = next(o for o in windows if (o.start, o.loss_from) == (w.start, w.loss_from))
            self.assertLessEqual(w.end, original.end)
            cut += w.end < original.end
        self.assertLessEqual(cut, 1)
        self.assertEqual(chosen, sorted(chosen, key=lambda w: (w.start, w.loss_from)))


class SafetensorsIoTest(unittest.TestCase):
    def test_round_trip_with_bf16_and_metadata(self):
        with tempfile.TemporaryDirectory() as temp:
            path = os.path.join(temp, "t.safetensors")
            values = np.array([1.0, -2.5, 3.14159, 1e-3], dtype=np.float32)
            write_safetensors(path, {"a": values.reshape(2, 2), "b": Bf16(f32_to_bf16(values))},
                              {"k": "v"})
            tensors, metadata = read_safetensors(path)
            self.assertEqual(metadata, {"k": "v"})
            np.testing.assert_array_equal(tensors["a"], values.reshape(2, 2))
            np.testing.assert_allclose(bf16_to_f32(tensors["b"]), values, rtol=2 ** -8)
            self.assertEqual(dtype_of(path), {"a": "F32", "b": "BF16"})
            self.assertEqual(os.path.getsize(path) % 8, 0)  # 8-aligned header, 24 data bytes
            umask = os.umask(0o022)
            try:
                write_safetensors(path, {"a": values}, {})
            finally:
                os.umask(umask)
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)
            self.assertEqual(os.listdir(temp), ["t.safetensors"])  # no temporary file left


if __name__ == "__main__":
    unittest.main()
