"""Tests scripts/train_feature_head.py (the EAGLE feature-level draft head) on tiny synthetic data.

The data is made here with numpy, a collect-exit-data directory at exit layer = num_layers = 2 of
a tiny model (hidden 16, 2 query heads of 8 over 1 kv head, vocab 50): the token embedding (tied
to the LM head) puts token x at angles 2π k_j x / 50 in 8 planes, so that the next token,
x + kStep mod 50, is a rotation of the current one's row away, and the final residual at a
position points at the row of the token after it. So the next position's final state is a fixed
linear function of the current token's embedding, which the head can learn. The depth-2 attention
is checked against a brute-force per-row reference, and depth 2 as a whole against the causal
layer run on the true inputs with the last row replaced by its draft; the batch's target rows
(each row but a sequence's first once, windows cut from long sequences included); training must
raise the held-out depth-1 agreement far above its start; the written head must reload to the
same evaluation, whose agreements (depth 1, depth 2, depth 2 given depth 1) are recounted row by
row; data of another exit layer and --heldout 0 are refused; the exit-head trainer still refuses
the final layer. Exits 77 (ctest: skipped) when torch is not importable.

    /usr/bin/python3 tests/scripts/train_feature_head_test.py
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
    import torch  # (the trainer's dependency; skipped without it)
except ImportError as missing:
    print(f"SKIP: {missing} (install python3-torch with scripts/setup.sh; run /usr/bin/python3)")
    sys.exit(77)

torch.set_num_threads(1)

kScripts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
sys.path.insert(0, kScripts)

import train_exit_head  # noqa: E402
import train_exit_head_test  # noqa: E402  (its random layer)
import train_feature_head  # noqa: E402
from exit_head import precision  # noqa: E402
from exit_head import training_loop  # noqa: E402
from exit_head import feature_head as fh  # noqa: E402
from exit_head.dataset import (evaluation_windows, load_manifest, load_positions,  # noqa: E402
                               model_spec, sequence_spans, split_sequences, windows_of)
from exit_head.safetensors_io import (Bf16, bf16_to_f32, dtype_of, f32_to_bf16,  # noqa: E402
                                      read_safetensors, write_safetensors)

kHidden, kInter, kHeads, kKvHeads, kHeadDim, kVocab, kLayers = 16, 32, 2, 1, 8, 50, 2
kSpec = dict(hidden_size=kHidden, intermediate_size=kInter, num_layers=kLayers, num_heads=kHeads,
             num_kv_heads=kKvHeads, head_dim=kHeadDim, vocab_size=kVocab, rope_theta=10000.0,
             rms_norm_eps=1e-6, attention_bias=True, o_proj_bias=False)
kTopK, kIdentity, kStep = 4, "feedfacecafe0123", 3


def random_layer(rng):
    """{HF name (no prefix): f32 array} of a random layer of kSpec's shape."""
    return train_exit_head_test.random_layer(rng, kHidden, kInter, kHeads * kHeadDim,
                                             kKvHeads * kHeadDim)


def rotation_embedding(rng):
    """f32 [V, H]: token x's row holds (cos, sin) of 2π k_j x / V + φ_j for 8 distinct k_j, so that
    rows are told apart by their dot products and x -> x + s is one rotation of every row."""
    k = rng.choice(np.arange(1, kVocab // 2), kHidden // 2, replace=False)
    angle = 2 * np.pi * np.outer(np.arange(kVocab), k) / kVocab + rng.uniform(0, 2 * np.pi, k.size)
    return np.concatenate([np.cos(angle), np.sin(angle)], 1).astype(np.float32)


def rms(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def make_data_dir(root, rng, sequences=40, exit_layer=kLayers, embed_tokens=False,
                  name="data"):
    """Writes a collect-exit-data directory (exit_layer, by default num_layers) whose sequences
    follow x_{i+1} = x_i + kStep mod V; returns its path."""
    norm = (1.0 + 0.1 * rng.standard_normal(kHidden)).astype(np.float32)
    lm_head = f32_to_bf16(rotation_embedding(rng))
    table = bf16_to_f32(lm_head).astype(np.float64)
    columns = {n: [] for n in ("hidden", "sequence", "position", "token", "next_token",
                               "topk_ids", "topk_logprobs")}
    for s in range(sequences):
        length = int(rng.integers(6, 19))
        tokens = (int(rng.integers(0, kVocab)) + kStep * np.arange(length + 1)) % kVocab
        hidden = 3.0 * table[tokens[1:]] + 0.2 * rng.standard_normal((length, kHidden))
        hidden = bf16_to_f32(f32_to_bf16(hidden.astype(np.float32))).astype(np.float64)
        logits = 2.0 * rms(hidden, norm) @ table.T
        logprobs = logits - logits.max(-1, keepdims=True)
        logprobs -= np.log(np.exp(logprobs).sum(-1, keepdims=True))
        top = np.argsort(-logits, -1)[:, :kTopK]
        assert (top[:, 0] == tokens[1:]).all()  # the full model predicts the sequence's token
        for column, value in (("hidden", hidden), ("sequence", np.full(length, s)),
                              ("position", np.arange(length)), ("token", tokens[:-1]),
                              ("next_token", tokens[1:]), ("topk_ids", top),
                              ("topk_logprobs", np.take_along_axis(logprobs, top, -1))):
            columns[column].append(value)
    path = os.path.join(root, name)
    os.makedirs(path)
    arrays = {n: np.concatenate(v).astype(np.float32) for n, v in columns.items()}
    arrays["hidden"] = Bf16(f32_to_bf16(arrays["hidden"]))
    positions = len(arrays["sequence"])
    write_safetensors(os.path.join(path, "shard-00000.safetensors"), arrays, {})
    write_safetensors(os.path.join(path, "init_layer.safetensors"),
                      {"exit_layer." + k: v for k, v in random_layer(rng).items()},
                      {"format": "selfspec-exit-head", "model_identity": kIdentity,
                       "exit_layer": str(exit_layer), "hidden_size": str(kHidden),
                       "num_layers": str(kLayers), "trained_on": "none"})
    frozen = {"model.norm.weight": norm, "lm_head.weight": Bf16(lm_head)}
    if embed_tokens:
        frozen["model.embed_tokens.weight"] = Bf16(f32_to_bf16(
            rng.standard_normal((kVocab, kHidden)).astype(np.float32)))
    write_safetensors(os.path.join(path, "frozen.safetensors"), frozen, {})
    manifest = {"format": "selfspec-exit-data", "version": 1,
                "model": dict(kSpec, path="synthetic", identity=kIdentity, model_type="qwen2",
                              tie_word_embeddings=True),
                "exit_layer": exit_layer, "top_k": kTopK, "prompts_file": "none",
                "prompts_sha256": "", "split": "calibration", "mix": {}, "tp": 1,
                "sequences": sequences, "positions": positions,
                "shards": [{"file": "shard-00000.safetensors", "sequences": sequences,
                            "positions": positions}],
                "init_layer": "init_layer.safetensors", "frozen": "frozen.safetensors",
                "complete": True}
    with open(os.path.join(path, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return path


def run_main(module, argv):
    """(exit code, the --json summary or None, stderr) of module.main(argv), argparse exits too."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = module.main(argv)
        except SystemExit as exit_:
            code = exit_.code
    summary = json.loads(out.getvalue()) if out.getvalue().strip() else None
    return code, summary, err.getvalue()


def spec_of(data):
    manifest = load_manifest(data, False)
    return manifest, model_spec(manifest, allow_final=True)


def random_head(seed):
    """A FeatureHead of kSpec with a random fc and layer (the layer's default init perturbed so
    that its norms and biases are not trivial)."""
    torch.manual_seed(seed)
    manifest = {"model": dict(kSpec, identity=kIdentity), "exit_layer": kLayers}
    model = fh.FeatureHead(model_spec(manifest, allow_final=True))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model.eval()


def count_agreements(model, frozen, data, windows, embedding):
    """fh.evaluate's agreements counted here row by row from the windows' bounds."""
    one, two, given = [], [], []
    with torch.no_grad():
        for w in windows:
            _, z1, z2 = fh.forward(model, frozen, fh.FeatureBatch(data, [w], embedding), True)
            draft1, draft2 = frozen.argmax(z1[0]).numpy(), frozen.argmax(z2[0]).numpy()
            for t in range(max(w.loss_from, w.start + 1), w.end):  # the window's target rows
                i = t - 1 - w.start  # the row of the window that predicts t
                one.append(draft1[i] == data.topk_ids[t, 0])
                if i >= 1:  # its depth-2 draft reads row i - 1's prediction
                    two.append(draft2[i] == data.topk_ids[t, 0])
                    if draft1[i - 1] == data.topk_ids[t - 1, 0]:
                        given.append(two[-1])
    return {"depth1_positions": len(one), "depth2_positions": len(two),
            "depth2_conditioned_positions": len(given), "depth1_agreement": float(np.mean(one)),
            "depth2_agreement": float(np.mean(two)),
            "depth2_agreement_given_depth1": float(np.mean(given)) if given else None}


class Depth2AttentionTest(unittest.TestCase):
    def test_matches_a_brute_force_reference_per_row(self):
        model = random_head(3)
        attn = model.layer.self_attn
        gen = torch.Generator().manual_seed(5)
        batch, length = 3, 7
        h_true = torch.randn(batch, length, kHidden, generator=gen)
        h_draft = torch.randn(batch, length, kHidden, generator=gen)
        positions = torch.arange(length).repeat(batch, 1) + torch.tensor([[0], [5], [11]])
        valid = torch.ones(batch, length, dtype=torch.bool)
        valid[1, 5:] = False  # a padded window
        cos, sin = fh.rope_tables(model.layer, positions)
        with torch.no_grad():
            got = fh.depth2_attention(attn, h_true, h_draft, cos, sin, valid).double().numpy()
        w = {k: v.detach().double().numpy() for k, v in attn.state_dict().items()}
        inv_freq = model.layer.inv_freq.double().numpy()

        def project(h, name, heads):  # [heads, d] of one row
            return (w[f"{name}.weight"] @ h + w[f"{name}.bias"]).reshape(heads, kHeadDim)

        def rope(v, position):  # rotate-half of v [heads, d] at one position
            angle = position * inv_freq
            c, s = np.cos(angle), np.sin(angle)
            a, b = v[:, :kHeadDim // 2], v[:, kHeadDim // 2:]
            return np.concatenate([a * c - b * s, b * c + a * s], -1)

        checked = 0
        for b in range(batch):
            x, xd = h_true[b].double().numpy(), h_draft[b].double().numpy()
            pos = positions[b].numpy()
            for p in range(length):
                if not valid[b, p]:
                    continue
                query = rope(project(xd[p], "q_proj", kHeads), pos[p])
                keys = [rope(project(x[j], "k_proj", kKvHeads), pos[j])
                        for j in range(p) if valid[b, j]]
                values = [project(x[j], "v_proj", kKvHeads) for j in range(p) if valid[b, j]]
                keys.append(rope(project(xd[p], "k_proj", kKvHeads), pos[p]))  # its own key
                values.append(project(xd[p], "v_proj", kKvHeads))
                out = np.zeros((kHeads, kHeadDim))
                for head in range(kHeads):
                    kv = head // (kHeads // kKvHeads)
                    scores = np.array([query[head] @ key[kv] for key in keys]) / np.sqrt(kHeadDim)
                    probs = np.exp(scores - scores.max())
                    probs /= probs.sum()
                    out[head] = sum(pr * value[kv] for pr, value in zip(probs, values))
                expected = w["o_proj.weight"] @ out.reshape(-1)
                np.testing.assert_allclose(got[b, p], expected, atol=1e-5, rtol=0,
                                           err_msg=f"window {b}, row {p}")
                checked += 1
        self.assertEqual(checked, batch * length - 2)

    def test_drafts_equal_to_the_true_inputs_give_the_causal_layer(self):
        model = random_head(4)
        gen = torch.Generator().manual_seed(6)
        features = torch.randn(2, 6, kHidden, generator=gen)
        embedded = torch.randn(2, 6, kHidden, generator=gen)
        positions = torch.arange(6).repeat(2, 1)
        valid = torch.ones(2, 6, dtype=torch.bool)
        with torch.no_grad():
            u = model.inputs(features, embedded)
            np.testing.assert_allclose(
                model.depth2(u, features, embedded, positions, valid).numpy(),
                model.layer(u, positions, valid).numpy(), atol=1e-5)


class FeatureBatchTest(unittest.TestCase):
    def test_every_row_but_a_sequences_first_is_a_depth1_target_once(self):
        with tempfile.TemporaryDirectory() as temp:
            data_dir = make_data_dir(temp, np.random.default_rng(1), sequences=6)
            manifest, spec = spec_of(data_dir)
            data = load_positions(data_dir, manifest, spec)
            frozen = train_exit_head.load_frozen(os.path.join(data_dir, "frozen.safetensors"),
                                                 spec)
            embedding = fh.load_embedding(os.path.join(data_dir, "frozen.safetensors"), spec,
                                          frozen)
            self.assertEqual(embedding.source, "lm_head.weight (tied embedding)")
            spans = sequence_spans(data)
            windows = windows_of(spans, 5)  # cut into overlapping windows
            batch = fh.FeatureBatch(data, windows, embedding)
            targets = sorted(batch.depth1_targets.tolist())
            self.assertEqual(targets, [r for s, e in spans for r in range(s + 1, e)])
            depth2 = sorted(batch.depth2_targets.tolist())
            self.assertEqual(len(depth2), len(set(depth2)))
            self.assertTrue(set(depth2) <= set(targets))
            self.assertTrue(all(t - 2 >= s for s, e in spans for t in depth2 if s <= t < e))
            # E(x_{i+1}) at row i: the LM head row of next_token.
            first = windows[0]
            np.testing.assert_array_equal(
                batch.embedded[0, :first.end - first.start].numpy(),
                bf16_to_f32(frozen.lm_head_bits[data.next_token[first.start:first.end]]))

    def test_depth2_is_the_causal_layer_with_its_row_replaced_by_the_draft(self):
        # Row p at depth 2 is what the layer gives row p of the sequence u_0 .. u_{p-1}, û_p with
        # û_p = fc(concat(n(o_{p-1}), E(x_{p+1}))): the drafter after its first draft.
        with tempfile.TemporaryDirectory() as temp:
            data_dir = make_data_dir(temp, np.random.default_rng(3), sequences=3)
            manifest, spec = spec_of(data_dir)
            data = load_positions(data_dir, manifest, spec)
            path = os.path.join(data_dir, "frozen.safetensors")
            frozen = train_exit_head.load_frozen(path, spec)
            batch = fh.FeatureBatch(data, windows_of(sequence_spans(data), 1024),
                                    fh.load_embedding(path, spec, frozen))
            model = random_head(8)
            with torch.no_grad():
                _, z1, z2 = fh.forward(model, frozen, batch, True)
                checked = 0
                for b in range(z1.shape[0]):
                    u = model.inputs(frozen.normed(batch.hidden[b]), batch.embedded[b])
                    for p in range(1, int(batch.valid[b].sum())):
                        draft = model.inputs(z1[b, p - 1], batch.embedded[b, p])
                        rows = torch.cat([u[:p], draft[None]])[None]
                        out = model.layer(rows, batch.positions[b, :p + 1][None],
                                          torch.ones(1, p + 1, dtype=torch.bool))[0, p]
                        np.testing.assert_allclose(z2[b, p].numpy(), frozen.normed(out).numpy(),
                                                   atol=1e-5, err_msg=f"window {b}, row {p}")
                        checked += 1
            self.assertEqual(checked, len(data) - 3)

    def test_a_separate_embedding_is_used_when_frozen_has_one(self):
        with tempfile.TemporaryDirectory() as temp:
            data_dir = make_data_dir(temp, np.random.default_rng(2), sequences=3,
                                     embed_tokens=True)
            _, spec = spec_of(data_dir)
            path = os.path.join(data_dir, "frozen.safetensors")
            embedding = fh.load_embedding(path, spec, train_exit_head.load_frozen(path, spec))
            self.assertEqual(embedding.source, "model.embed_tokens.weight")
            tensors, _ = read_safetensors(path)
            np.testing.assert_array_equal(embedding.rows(np.array([3, 7])).numpy(),
                                          bf16_to_f32(tensors["model.embed_tokens.weight"][[3, 7]]))


class TrainFeatureHeadTest(unittest.TestCase):
    def setUp(self):
        self.temp = tempfile.TemporaryDirectory()
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        self.temp.cleanup()

    def path(self, name):
        return os.path.join(self.temp.name, name)

    def test_training_learns_the_next_feature_and_writes_a_head_that_reloads(self):
        data_dir = make_data_dir(self.temp.name, self.rng)
        out, curve_path = self.path("head.safetensors"), self.path("curve.json")
        progress = training_loop.kProgressSeconds
        training_loop.kProgressSeconds = 0.0  # a progress line after every step
        try:
            code, summary, err = run_main(train_feature_head, [
                data_dir, "--out", out, "--epochs", "6", "--lr", "1e-2", "--batch", "4",
                "--negatives", "20", "--heldout", "0.25", "--depth2-weight", "0.5",
                "--eval-every", "150", "--eval-positions", "80", "--curve", curve_path,
                "--json", "--threads", "1"])
        finally:
            training_loop.kProgressSeconds = progress
        self.assertEqual(code, 0, err)
        before, best = summary["agreement_before"], summary["best"]
        self.assertLess(before, 0.2, err)
        self.assertGreater(best["heldout_agreement"], before + 0.5, err)
        self.assertGreater(best["depth2_agreement"], 0.3, err)
        self.assertEqual(summary["best_depth1_agreement"], best["heldout_agreement"])
        self.assertEqual(summary["best_depth2_agreement"], best["depth2_agreement_given_depth1"])
        self.assertEqual(summary["kept_evaluation"], best["evaluation"])
        a1, a2 = best["heldout_agreement"], best["depth2_agreement_given_depth1"]
        self.assertAlmostEqual(summary["chain_expected_tokens"], 1 + a1 + a1 * a2)
        self.assertEqual(summary["evaluated_positions"], best["depth1_positions"])
        self.assertEqual(summary["heldout_sequences"], 10)
        self.assertEqual(max(p["heldout_agreement"] for p in summary["curve"]),
                         best["heldout_agreement"])
        self.assertIn("ETA", err)
        self.assertIn("depth 2: agreement", err)
        for name in ("feature_weight", "depth2_weight", "kl_weight", "ce_weight", "negatives"):
            self.assertIn(name, summary["settings"])
        with open(curve_path, encoding="utf-8") as f:
            curve = json.load(f)
        self.assertEqual((curve["format"], curve["status"]),
                         ("selfspec-feature-head-curve", "finished"))
        self.assertEqual(curve["curve"], summary["curve"])
        for point in curve["curve"]:
            for field in train_feature_head.kDepth2Fields:
                self.assertIn(field, point)
        self.check_head_file(out, summary, data_dir)

    def test_bf16_training_learns_like_f32_and_writes_an_f32_head(self):
        # --precision bf16: the head's forward under bf16 autocast, both depths' losses and the
        # evaluations in f32; the written head is f32 and reloads with its kept figures.
        data_dir = make_data_dir(self.temp.name, self.rng)
        runs = {}
        for precision in ("f32", "bf16"):
            out = self.path(f"{precision}.safetensors")
            code, summary, err = run_main(train_feature_head, [
                data_dir, "--out", out, "--epochs", "6", "--lr", "1e-2", "--batch", "4",
                "--negatives", "20", "--heldout", "0.25", "--depth2-weight", "0.5",
                "--eval-positions", "80", "--precision", precision, "--json", "--threads", "1"])
            self.assertEqual(code, 0, err)
            self.assertEqual(summary["settings"]["precision"], precision)
            runs[precision] = (summary, out)
        (f32, _), (bf16, out) = runs["f32"], runs["bf16"]
        self.assertEqual(bf16["agreement_before"], f32["agreement_before"])  # f32 evaluations
        self.assertGreater(bf16["best"]["heldout_agreement"], bf16["agreement_before"] + 0.5)
        self.assertGreater(bf16["best"]["depth2_agreement"], 0.3)
        self.assertNotEqual(bf16["train_loss"], f32["train_loss"])
        np.testing.assert_allclose(bf16["train_loss"][0], f32["train_loss"][0], rtol=0.05)
        self.check_head_file(out, bf16, data_dir)

    def test_auto_precision_follows_a_timed_probe_and_falls_back_to_f32(self):
        parser = train_feature_head.argparse.ArgumentParser()
        precision.add_argument(parser)
        self.assertEqual(parser.parse_args([]).precision, "f32")  # auto only when asked
        self.assertEqual(precision.resolve("bf16", 1), ("bf16", None))
        chosen, probe = precision.resolve("auto", 1)
        self.assertGreater(probe["f32_s"], 0.0)
        self.assertGreater(probe["bf16_s"], 0.0)
        self.assertEqual(chosen, "bf16" if probe["speedup"] >= precision.kAutoMinSpeedup
                         else "f32")
        self.assertIn(f"auto -> {chosen}", precision.describe(chosen, probe))
        # A probe that dies (as an unsupported instruction would kill it) means f32.
        saved = precision._PROBE
        precision._PROBE = "import os; os.abort()"
        try:
            chosen, probe = precision.resolve("auto", 1)
        finally:
            precision._PROBE = saved
        self.assertEqual(chosen, "f32")
        self.assertIn("probe failed", precision.describe(chosen, probe))

    def check_head_file(self, out, summary, data_dir):
        tensors, metadata = read_safetensors(out)
        layer = {"input_layernorm.weight": [16], "post_attention_layernorm.weight": [16],
                 "self_attn.q_proj.weight": [16, 16], "self_attn.k_proj.weight": [8, 16],
                 "self_attn.v_proj.weight": [8, 16], "self_attn.o_proj.weight": [16, 16],
                 "self_attn.q_proj.bias": [16], "self_attn.k_proj.bias": [8],
                 "self_attn.v_proj.bias": [8], "mlp.gate_proj.weight": [32, 16],
                 "mlp.up_proj.weight": [32, 16], "mlp.down_proj.weight": [16, 32]}
        expected = {"feature_head.fc.weight": [16, 32], "feature_head.fc.bias": [16]}
        expected.update({"feature_head.layer." + k: v for k, v in layer.items()})
        self.assertEqual({k: list(v.shape) for k, v in tensors.items()}, expected)
        self.assertEqual(set(dtype_of(out).values()), {"F32"})
        best = summary["best"]
        self.assertEqual((metadata["format"], metadata["version"], metadata["model_identity"]),
                         ("selfspec-feature-head", "1", kIdentity))
        self.assertEqual((metadata["hidden_size"], metadata["num_layers"]), ("16", "2"))
        self.assertEqual(metadata["embedding"], "lm_head.weight (tied embedding)")
        self.assertIn(f"evaluation {best['evaluation']} of {len(summary['curve']) - 1}",
                      metadata["kept"])
        self.assertEqual(metadata["heldout_depth1_agreement"], f"{best['heldout_agreement']:.4f}")
        self.assertEqual(metadata["heldout_depth2_agreement_given_depth1"],
                         f"{best['depth2_agreement_given_depth1']:.4f}")
        self.assertEqual(metadata["heldout_chain_expected_tokens"],
                         f"{best['chain_expected_tokens']:.4f}")
        self.assertEqual(metadata["heldout_depth1_agreement_before"],
                         f"{summary['agreement_before']:.4f}")
        self.assertIn("SmoothL1", metadata["loss"])
        # Reloaded and evaluated on the same held-out subset: the kept evaluation's figures.
        manifest, spec = spec_of(data_dir)
        data = load_positions(data_dir, manifest, spec)
        frozen_path = os.path.join(data_dir, "frozen.safetensors")
        frozen = train_exit_head.load_frozen(frozen_path, spec)
        _, held = split_sequences(sequence_spans(data), 0.25, 0)
        windows = evaluation_windows(windows_of(held, 1024), 80, 0)
        # 80 held-out rows, whole sequences but the last cut short: their first rows have no
        # depth-1 target.
        self.assertEqual(summary["evaluated_positions"], 80 - len(windows))
        model = fh.load_feature_head(out, spec)
        result = fh.evaluate(model, frozen, data, windows, 4,
                             fh.load_embedding(frozen_path, spec, frozen))
        self.assertEqual(result["depth1_agreement"], best["heldout_agreement"])
        for field in train_feature_head.kDepth2Fields:
            self.assertEqual(result[field], best[field], field)
        self.check_counts(result, model, frozen, data, windows, frozen_path, spec)

    def check_counts(self, result, model, frozen, data, windows, frozen_path, spec):
        """fh.evaluate's figures `result` against count_agreements'."""
        counted = count_agreements(model, frozen, data, windows,
                                   fh.load_embedding(frozen_path, spec, frozen))
        for field, value in counted.items():
            self.assertAlmostEqual(result[field], value, msg=field)

    def test_windows_train_each_target_once_and_depth2_is_evaluated_at_weight_zero(self):
        data_dir = make_data_dir(self.temp.name, self.rng, sequences=12)
        runs = {}
        for weight in ("0", "1"):
            code, summary, err = run_main(train_feature_head, [
                data_dir, "--out", self.path("h.safetensors"), "--epochs", "2", "--batch", "4",
                "--negatives", "8", "--heldout", "0.25", "--max-len", "6", "--depth2-weight",
                weight, "--lr", "1e-2", "--json", "--threads", "1"])
            self.assertEqual(code, 0, err)
            runs[weight] = summary
        plain = runs["0"]
        self.assertEqual(plain["settings"]["depth2_weight"], 0.0)
        self.assertEqual(plain["positions_trained"], 2 * plain["train_positions"])
        self.assertEqual(plain["train_positions"] + plain["heldout_positions"],
                         plain["positions"] - 12)  # a sequence's first row is no target
        self.assertIsNotNone(plain["best"]["depth2_agreement"])
        self.assertGreater(plain["best"]["depth2_positions"], 0)
        # The same start (the evaluation before training); depth 2 adds to the loss.
        self.assertEqual(plain["curve"][0], dict(runs["1"]["curve"][0],
                                                 seconds=plain["curve"][0]["seconds"],
                                                 eval_seconds=plain["curve"][0]["eval_seconds"]))
        self.assertGreater(runs["1"]["train_loss"][0], plain["train_loss"][0])
        # The evaluation on windows cut from longer sequences, counted row by row, with some but
        # not all depth-1 drafts right (so that "given depth 1" is a real condition).
        manifest, spec = spec_of(data_dir)
        data = load_positions(data_dir, manifest, spec)
        frozen_path = os.path.join(data_dir, "frozen.safetensors")
        frozen = train_exit_head.load_frozen(frozen_path, spec)
        _, held = split_sequences(sequence_spans(data), 0.25, 0)
        windows = windows_of(held, 6)
        self.assertGreater(len(windows), len(held))
        model = fh.load_feature_head(self.path("h.safetensors"), spec)
        result = fh.evaluate(model, frozen, data, windows, 4,
                             fh.load_embedding(frozen_path, spec, frozen))
        self.assertEqual(result["depth1_agreement"], runs["1"]["best"]["heldout_agreement"])
        self.assertLess(0, result["depth2_conditioned_positions"])
        self.assertLess(result["depth2_conditioned_positions"], result["depth2_positions"])
        self.check_counts(result, model, frozen, data, windows, frozen_path, spec)

    def test_other_exit_layers_and_no_heldout_are_refused(self):
        other = make_data_dir(self.temp.name, self.rng, sequences=4, exit_layer=1, name="n1")
        out = self.path("h.safetensors")
        code, _, err = run_main(train_feature_head, [other, "--out", out, "--threads", "1"])
        self.assertEqual(code, 1, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("manifest.json", err)
        self.assertIn("\"exit_layer\" 1 is not num_layers 2", err)
        final = make_data_dir(self.temp.name, self.rng, sequences=4, name="final")
        code, _, err = run_main(train_feature_head, [final, "--out", out, "--heldout", "0"])
        self.assertEqual(code, 2, err)
        self.assertIn("--heldout", err)
        self.assertFalse(os.path.exists(out))
        # The exit-head trainer still refuses data of the final layer.
        code, _, err = run_main(train_exit_head, [final, "--out", out, "--threads", "1"])
        self.assertEqual(code, 1, err)
        self.assertIn("\"exit_layer\" 2 is outside [1, 1]", err)
        self.assertFalse(os.path.exists(out))
        manifest = load_manifest(final, False)
        self.assertEqual(model_spec(manifest, allow_final=True).num_layers, 2)


if __name__ == "__main__":
    unittest.main()
