"""Tests scripts/train_exit_head.py on a tiny synthetic training-data directory.

The data is made here with numpy: a random model (hidden 32, 4 query heads of 8 over 2 kv heads,
vocab 300) whose "full model" is a known random exit layer (the teacher), evaluated by an
independent numpy implementation of the layer (EESD formats, section 3; RoPE in the engine's
rotate-half convention). So an exit head initialised to the teacher must agree with the recorded
top-1 everywhere (the trainer's forward matches), and one initialised to a perturbed teacher must
get closer to it by training. Exits 77 (ctest: skipped) when torch is not importable.

    /usr/bin/python3 tests/scripts/train_exit_head_test.py
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

try:
    import numpy as np
    import torch  # noqa: F401  (the trainer's dependency; skipped without it)
except ImportError as missing:
    print(f"SKIP: {missing} (install python3-torch with scripts/setup.sh; run /usr/bin/python3)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))

import train_exit_head  # noqa: E402
from exit_head.dataset import Window, split_sequences, windows_of  # noqa: E402
from exit_head.safetensors_io import (Bf16, bf16_to_f32, dtype_of, f32_to_bf16,  # noqa: E402
                                      read_safetensors, write_safetensors)

kSpec = dict(hidden_size=32, intermediate_size=64, num_layers=4, num_heads=4, num_kv_heads=2,
             head_dim=8, vocab_size=300, rope_theta=10000.0, rms_norm_eps=1e-6,
             attention_bias=True, o_proj_bias=False)
kExitLayer, kTopK, kIdentity = 2, 4, "0123456789abcdef"


def random_layer(rng):
    """{HF name (no prefix): f32 array} of a random layer of kSpec's shape."""
    h, i, q, kv = 32, 64, 4 * 8, 2 * 8
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
        self.assertEqual(float(metadata["heldout_top1_agreement"]),
                         round(summary["agreement_after"], 4))
        self.assertIn("sampled", metadata["loss"])

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
