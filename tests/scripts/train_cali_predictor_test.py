"""Tests `scripts/train_exit_head.py --predictor` (the Cali-TS predictor, EESD §3.3 eq. 5) on
synthetic calibration data.

The data is made here with numpy in the collect-cali-data format (Cali-TS formats, section 1):
rounds of drafted tokens, each round stopping at its first rejection, whose acceptance is drawn
from sigmoid(4 (u · h_D + v_i · h_T + c)), with a different random v_i for each draft step
i = min(step, 10), so that the label depends on the draft hidden state and, through a
step-specific transform, on the target hidden state. The hidden states are stored in BF16 and the
labels computed from the stored values. The checks: the trained predictor beats the base rate and
an oracle that ignores h_T; the written file follows the predictor format exactly; an independent
numpy evaluation of θ_M from the file (one d×d product per row) reproduces the trainer's held-out
figures; malformed data is refused naming the file and field; the two modes exclude each other.
Exits 77 (ctest: skipped) when torch is not importable.

    OMP_NUM_THREADS=1 /usr/bin/python3 tests/scripts/train_cali_predictor_test.py
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
    import torch  # noqa: F401  (the trainer's dependency; skipped without it)
except ImportError as missing:
    print(f"SKIP: {missing} (install python3-torch with scripts/setup.sh; run /usr/bin/python3)")
    sys.exit(77)

kScripts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
sys.path.insert(0, kScripts)

import train_exit_head  # noqa: E402
from exit_head.cali_data import CaliRows, split_by_sequence  # noqa: E402
from exit_head.safetensors_io import (Bf16, bf16_to_f32, dtype_of, f32_to_bf16,  # noqa: E402
                                      read_safetensors, write_safetensors)

kHidden, kSteps, kExitLayer, kIdentity = 8, 10, 3, "fedcba9876543210"
kMaxDraft = 14  # longer than kSteps: steps 11..14 use W^10
kMetadataKeys = {"format", "version", "model_identity", "exit_layer", "hidden_size", "steps",
                 "sigma_m", "heldout_accuracy", "heldout_bce", "base_rate", "train_rows",
                 "heldout_rows"}


class SyntheticRule:
    """The acceptance rule: P(accept) = sigmoid(4 (u · h_D + v[min(step, S) - 1] · h_T + c))."""

    def __init__(self, rng):
        self.u = rng.standard_normal(kHidden) / np.sqrt(kHidden)
        self.v = rng.standard_normal((kSteps, kHidden)) / np.sqrt(kHidden)
        self.offset = 0.9  # about three quarters of the drafted tokens accepted

    def score(self, target, draft, step):
        v = self.v[np.minimum(step, kSteps) - 1]
        return draft @ self.u + (v * target).sum(-1) + self.offset


def bf16_rounded(values):
    return bf16_to_f32(f32_to_bf16(values.astype(np.float32))).astype(np.float64)


def make_rows(rng, rule, sequences=150, rounds=6):
    """Columns {name: array} of the synthetic rows, in collection order."""
    columns = {n: [] for n in ("target_hidden", "draft_hidden", "step", "accepted", "sequence")}
    for sequence in range(sequences):
        for _ in range(rounds):
            target = bf16_rounded(rng.standard_normal(kHidden))
            for step in range(1, kMaxDraft + 1):
                draft = bf16_rounded(rng.standard_normal(kHidden))
                score = rule.score(target[None], draft[None], np.array([step]))[0]
                accepted = float(rng.random() < 1.0 / (1.0 + np.exp(-4.0 * score)))
                for name, value in (("target_hidden", target), ("draft_hidden", draft),
                                    ("step", step), ("accepted", accepted),
                                    ("sequence", sequence)):
                    columns[name].append(value)
                if not accepted:
                    break
    return {n: np.array(v, dtype=np.float32) for n, v in columns.items()}


def write_cali_dir(path, columns, shard_bounds, manifest_changes=None, shard_changes=None):
    """Writes a collect-cali-data directory whose shards hold rows [a, b) for each bound pair;
    manifest_changes update manifest.json, shard_changes(index, tensors) may alter a shard."""
    os.makedirs(path)
    shards = []
    for index, (begin, end) in enumerate(shard_bounds):
        tensors = {n: v[begin:end] for n, v in columns.items()}
        for name in ("target_hidden", "draft_hidden"):
            tensors[name] = Bf16(f32_to_bf16(tensors[name]))
        if shard_changes is not None:
            shard_changes(index, tensors)
        name = f"shard-{index:05d}.safetensors"
        write_safetensors(os.path.join(path, name), tensors, {})
        shards.append({"file": name, "rows": end - begin})
    rows = sum(entry["rows"] for entry in shards)
    manifest = {"format": "selfspec-cali-data", "version": 1, "model_identity": kIdentity,
                "exit_layer": kExitLayer, "hidden_size": kHidden, "steps": kSteps, "rows": rows,
                "rounds": int((columns["step"] == 1).sum()),
                "accepted_rows": int(columns["accepted"].sum()), "shards": shards,
                "complete": True, "prompts_file": "synthetic", "tp": 1}
    manifest.update(manifest_changes or {})
    with open(os.path.join(path, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return path


def run_trainer(argv):
    """(exit code, the --json summary or None, stderr text) of the trainer run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = train_exit_head.main(argv)
        except SystemExit as exit_:  # argparse errors
            code = exit_.code
    summary = json.loads(out.getvalue()) if out.getvalue().strip() else None
    return code, summary, err.getvalue()


def numpy_logits(tensors, columns, rows):
    """θ_M's logits from the predictor file's tensors, evaluated literally (one d×d product per
    row, float64): w[:d] · (W^i h_T) + w[d:] · h_D + b, i = min(step, S)."""
    transforms = tensors["cali.step_transforms"].astype(np.float64)
    weight = tensors["cali.weight"].astype(np.float64)
    bias = float(tensors["cali.bias"][0])
    target = columns["target_hidden"][rows].astype(np.float64)
    draft = columns["draft_hidden"][rows].astype(np.float64)
    index = np.minimum(columns["step"][rows].astype(np.int64), transforms.shape[0]) - 1
    transformed = np.einsum("nrc,nc->nr", transforms[index], target)
    return transformed @ weight[:kHidden] + draft @ weight[kHidden:] + bias


def figures(logits, labels):
    """(RMSE, BCE, accuracy) of θ_M = sigmoid(logits) against 0/1 labels."""
    theta = 1.0 / (1.0 + np.exp(-logits))
    bce = -(labels * np.log(theta) + (1 - labels) * np.log(1 - theta)).mean()
    return (float(np.sqrt(((theta - labels) ** 2).mean())), float(bce),
            float(((theta >= 0.5) == (labels == 1)).mean()))


class TrainCaliPredictorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rng = np.random.default_rng(11)
        cls.rule = SyntheticRule(rng)
        cls.columns = make_rows(rng, cls.rule)
        cls.rows = len(cls.columns["step"])

    def setUp(self):
        self.temp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.temp.name, "predictor.safetensors")

    def tearDown(self):
        self.temp.cleanup()

    def cali_dir(self, name="cali", manifest_changes=None, shard_changes=None, columns=None):
        """Three shards at uneven bounds that cut sequences in two."""
        columns = self.columns if columns is None else columns
        rows = len(columns["step"])
        bounds = [(0, rows // 3 + 1), (rows // 3 + 1, 2 * rows // 3), (2 * rows // 3, rows)]
        return write_cali_dir(os.path.join(self.temp.name, name), columns, bounds,
                              manifest_changes, shard_changes)

    def train(self, *extra):
        return run_trainer(["--predictor", self.cali_dir(), "--out", self.out, "--threads", "1",
                            "--lr", "1e-2", "--epochs", "12", "--json", *extra])

    def test_trained_predictor_beats_the_base_rate_and_an_oracle_without_the_target(self):
        code, summary, err = self.train()
        self.assertEqual(code, 0, err)
        self.assertGreater(self.columns["step"].max(), kSteps)  # i = min(step, S) is exercised
        heldout = self.heldout_rows()
        labels = self.columns["accepted"][heldout].astype(np.float64)
        base = float(labels.mean())
        self.assertAlmostEqual(summary["base_rate"], base, places=12)
        self.assertAlmostEqual(summary["history"][0]["heldout_accuracy"], max(base, 1 - base))
        majority = max(base, 1.0 - base)
        target = self.columns["target_hidden"][heldout].astype(np.float64)
        draft = self.columns["draft_hidden"][heldout].astype(np.float64)
        without_target = float(((draft @ self.rule.u + self.rule.offset > 0) == (labels == 1))
                               .mean())
        true_rule = float(((self.rule.score(target, draft, self.columns["step"][heldout]
                                            .astype(np.int64)) > 0) == (labels == 1)).mean())
        sys.stderr.write(f"\nheld-out accuracy {summary['heldout_accuracy']:.4f}: base rate "
                         f"{base:.4f} (majority {majority:.4f}), oracle without h_T "
                         f"{without_target:.4f}, true rule {true_rule:.4f}; {self.rows} rows, "
                         f"kept epoch {summary['kept_epoch']}\n")
        self.assertGreater(summary["heldout_accuracy"], majority + 0.08, err)
        self.assertGreater(summary["heldout_accuracy"], without_target + 0.03, err)
        self.assertLess(summary["heldout_bce"], summary["history"][0]["heldout_bce"] - 0.1, err)
        self.assertGreater(summary["kept_epoch"], 0)
        self.assertIn(f"keeping epoch {summary['kept_epoch']} of 12", err)
        for needle in ("before training: train BCE", "epoch 12/12: train BCE", "held-out BCE",
                       "accuracy", "RMSE"):
            self.assertIn(needle, err)

    def test_step_transforms_learn_each_steps_direction(self):
        code, _, err = self.train()
        self.assertEqual(code, 0, err)
        tensors, _ = read_safetensors(self.out)
        weight = tensors["cali.weight"].astype(np.float64)
        folded = np.einsum("irc,r->ic", tensors["cali.step_transforms"], weight[:kHidden])
        unit = self.rule.v / np.linalg.norm(self.rule.v, axis=1, keepdims=True)
        for step in range(1, 4):  # the steps with the most rows
            cosines = unit @ folded[step - 1] / np.linalg.norm(folded[step - 1])
            self.assertEqual(int(np.argmax(cosines)), step - 1, (step, cosines))
            self.assertGreater(cosines[step - 1], 0.8, (step, cosines))

    def test_file_follows_the_format_and_numpy_reproduces_the_trainers_figures(self):
        code, summary, err = self.train()
        self.assertEqual(code, 0, err)
        tensors, metadata = read_safetensors(self.out)
        self.assertEqual({k: list(v.shape) for k, v in tensors.items()},
                         {"cali.step_transforms": [kSteps, kHidden, kHidden],
                          "cali.weight": [2 * kHidden], "cali.bias": [1]})
        self.assertEqual(dtype_of(self.out), {k: "F32" for k in tensors})
        self.assertEqual(set(metadata), kMetadataKeys)
        self.assertTrue(all(isinstance(v, str) for v in metadata.values()))
        heldout = self.heldout_rows()
        self.assertEqual({k: metadata[k] for k in ("format", "version", "model_identity",
                                                   "exit_layer", "hidden_size", "steps",
                                                   "train_rows", "heldout_rows")},
                         {"format": "selfspec-cali-predictor", "version": "1",
                          "model_identity": kIdentity, "exit_layer": str(kExitLayer),
                          "hidden_size": str(kHidden), "steps": str(kSteps),
                          "train_rows": str(self.rows - len(heldout)),
                          "heldout_rows": str(len(heldout))})
        labels = self.columns["accepted"][heldout].astype(np.float64)
        rmse, bce, accuracy = figures(numpy_logits(tensors, self.columns, heldout), labels)
        for key, value in (("sigma_m", rmse), ("heldout_bce", bce),
                           ("heldout_accuracy", accuracy), ("base_rate", labels.mean())):
            self.assertAlmostEqual(float(metadata[key]), value, delta=2e-6, msg=key)
        self.assertAlmostEqual(summary["sigma_m"], rmse, delta=1e-5)
        self.assertAlmostEqual(summary["heldout_bce"], bce, delta=1e-5)
        self.assertEqual(summary["heldout_accuracy"], accuracy)
        kept = summary["history"][summary["kept_epoch"]]
        self.assertEqual(kept["heldout_rmse"], summary["sigma_m"])
        self.assertEqual(min(h["heldout_bce"] for h in summary["history"]), kept["heldout_bce"])
        # The figures tell the orientation of W^i and the halves of w apart.
        transposed = dict(tensors, **{"cali.step_transforms":
                                      np.swapaxes(tensors["cali.step_transforms"], 1, 2)})
        swapped = dict(tensors, **{"cali.weight": np.roll(tensors["cali.weight"], kHidden)})
        for wrong in (transposed, swapped):
            self.assertGreater(abs(figures(numpy_logits(wrong, self.columns, heldout),
                                           labels)[0] - rmse), 1e-3)

    def test_the_best_heldout_epoch_is_kept_when_later_ones_overfit(self):
        rows = 600  # labels shuffled: nothing to learn, so training can only overfit
        columns = {n: v[:rows].copy() for n, v in self.columns.items()}
        columns["accepted"] = np.random.default_rng(5).permutation(columns["accepted"])
        path = self.cali_dir("noise", columns=columns)
        code, summary, err = run_trainer(["--predictor", path, "--out", self.out, "--threads",
                                          "1", "--lr", "3e-2", "--epochs", "8", "--heldout",
                                          "0.3", "--json"])
        self.assertEqual(code, 0, err)
        history = summary["history"]
        self.assertLess(history[-1]["train_bce"], history[0]["train_bce"] - 0.02, err)
        best = min(range(len(history)), key=lambda e: history[e]["heldout_bce"])
        self.assertLess(best, 8, err)
        self.assertEqual(summary["kept_epoch"], best)
        _, metadata = read_safetensors(self.out)
        self.assertAlmostEqual(float(metadata["heldout_bce"]), history[best]["heldout_bce"],
                               delta=1e-6)
        self.assertAlmostEqual(float(metadata["sigma_m"]), history[best]["heldout_rmse"],
                               delta=1e-6)

    def heldout_rows(self):
        """The held-out rows of the trainer's split (seed 0, 0.1), checked to be whole
        sequences."""
        split = split_by_sequence(CaliRows(
            target_hidden=None, draft_hidden=None, step=self.columns["step"].astype(np.int64),
            accepted=self.columns["accepted"], sequence=self.columns["sequence"].astype(np.int64)),
            0.1, 0)
        sequences = self.columns["sequence"]
        self.assertFalse(set(sequences[split.train]) & set(sequences[split.heldout]))
        self.assertEqual(split.heldout_sequences, 15)
        return split.heldout

    def test_split_is_seeded_and_keeps_sequences_whole(self):
        def split(seed):
            return split_by_sequence(CaliRows(None, None, np.ones(6, np.int64), np.ones(6),
                                              np.array([0, 0, 1, 1, 2, 5])), 0.5, seed)
        first = split(1)
        self.assertEqual(sorted(first.train.tolist() + first.heldout.tolist()), list(range(6)))
        self.assertEqual((first.train_sequences, first.heldout_sequences), (2, 2))
        self.assertEqual(split(1).heldout.tolist(), first.heldout.tolist())
        self.assertTrue(any(split(s).heldout.tolist() != first.heldout.tolist()
                            for s in range(2, 6)))

    def test_malformed_data_is_refused_naming_the_file_and_the_field(self):
        def drop_manifest(path):
            os.remove(os.path.join(path, "manifest.json"))

        def add_missing_shard(path):
            manifest_path = os.path.join(path, "manifest.json")
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
            manifest["shards"].append({"file": "nope.safetensors", "rows": 0})
            with open(manifest_path, "w", encoding="utf-8") as f:
                json.dump(manifest, f)

        def step_as_int(index, tensors):
            if index == 1:
                tensors["step"] = tensors["step"].astype(np.int32)

        def fewer_rows(index, tensors):
            if index == 2:
                for name in tensors:
                    value = tensors[name]
                    tensors[name] = Bf16(value.bits[:-1]) if isinstance(value, Bf16) \
                        else value[:-1]

        def label_two(index, tensors):
            if index == 0:
                tensors["accepted"] = tensors["accepted"] * 2

        cases = [  # (name, manifest changes, shard changes, then, file, needles)
            ("missing", None, None, drop_manifest, "manifest.json", ["cannot read"]),
            ("format", {"format": "selfspec-exit-data"}, None, None, "manifest.json",
             ["\"format\"", "selfspec-cali-data"]),
            ("version", {"version": 2}, None, None, "manifest.json", ["\"version\""]),
            ("incomplete", {"complete": False}, None, None, "manifest.json",
             ["\"complete\"", "--allow-incomplete"]),
            ("identity", {"model_identity": "xyz"}, None, None, "manifest.json",
             ["\"model_identity\""]),
            ("total", {"rows": self.rows + 1}, None, None, "manifest.json", ["\"rows\""]),
            ("accepted", {"accepted_rows": 1}, None, None, "manifest.json",
             ["\"accepted_rows\""]),
            ("shard rows", None, fewer_rows, None, "shard-00002.safetensors",
             ["tensor target_hidden", "shard rows"]),
            ("dtype", None, step_as_int, None, "shard-00001.safetensors",
             ["tensor step", "I32", "expected F32"]),
            ("hidden", {"hidden_size": kHidden * 2}, None, None, "shard-00000.safetensors",
             ["tensor target_hidden", "expected BF16 [", f", {kHidden * 2}]", "hidden_size"]),
            ("label", None, label_two, None, "shard-00000.safetensors", ["tensor accepted"]),
            ("missing shard", None, None, add_missing_shard, "nope.safetensors",
             ["cannot read"]),
        ]
        for name, manifest, shards, then, file, needles in cases:
            with self.subTest(name):
                path = self.cali_dir(name.replace(" ", "_"), manifest, shards)
                if then is not None:
                    then(path)
                out = os.path.join(path, "p.safetensors")
                code, _, err = run_trainer(["--predictor", path, "--out", out, "--threads", "1"])
                self.assertEqual(code, 1, err)
                lines = err.strip().splitlines()
                self.assertEqual(len(lines), 1, err)
                self.assertIn(os.path.join(path, file), lines[0])
                for needle in needles:
                    self.assertIn(needle, lines[0])
                self.assertFalse(os.path.exists(out))

    def test_command_line_error_is_one_line_without_a_traceback(self):
        missing = os.path.join(self.temp.name, "nothing")
        result = subprocess.run(
            [sys.executable, os.path.join(kScripts, "train_exit_head.py"), "--predictor", missing,
             "--out", self.out, "--threads", "1"], capture_output=True, text=True, timeout=60,
            env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(result.stderr.count("\n"), 1, result.stderr)
        self.assertIn(os.path.join(missing, "manifest.json"), result.stderr)
        self.assertNotIn("Traceback", result.stderr)


class ModeArgumentsTest(unittest.TestCase):
    def parse_error(self, argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as exit_:
            train_exit_head.parse_args(argv)
        self.assertEqual(exit_.exception.code, 2)
        return err.getvalue()

    def test_data_dir_mode_still_parses_with_its_defaults(self):
        args = train_exit_head.parse_args(["data", "--out", "head.safetensors"])
        self.assertEqual((args.data_dir, args.predictor), ("data", None))
        self.assertEqual((args.epochs, args.lr, args.negatives, args.max_len, args.loss_chunk,
                          args.kl_weight, args.ce_weight, args.batch, args.heldout),
                         (3, 1e-4, 512, 1024, 1024, 1.0, 1.0, 64, 0.1))
        args = train_exit_head.parse_args(["data", "--out", "h", "--negatives", "9", "--epochs",
                                           "5", "--heldout", "0"])
        self.assertEqual((args.negatives, args.epochs, args.heldout), (9, 5, 0.0))

    def test_predictor_mode_defaults(self):
        args = train_exit_head.parse_args(["--predictor", "cali", "--out", "p.safetensors"])
        self.assertEqual((args.data_dir, args.predictor), (None, "cali"))
        self.assertEqual((args.epochs, args.lr, args.batch, args.weight_decay, args.heldout,
                          args.seed), (20, 1e-3, 64, 0.01, 0.1, 0))

    def test_exactly_one_mode(self):
        self.assertIn("exactly one of DATA_DIR",
                      self.parse_error(["data", "--predictor", "cali", "--out", "x"]))
        self.assertIn("exactly one of DATA_DIR", self.parse_error(["--out", "x"]))

    def test_exit_head_options_and_no_heldout_are_refused_with_predictor(self):
        self.assertIn("--negatives applies to the exit head",
                      self.parse_error(["--predictor", "c", "--out", "x", "--negatives", "8"]))
        self.assertIn("--max-len applies to the exit head",
                      self.parse_error(["--predictor", "c", "--out", "x", "--max-len", "8"]))
        self.assertIn("--heldout > 0",
                      self.parse_error(["--predictor", "c", "--out", "x", "--heldout", "0"]))


if __name__ == "__main__":
    unittest.main()
