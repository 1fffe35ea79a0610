"""The exit-layer training data: a directory written by `selfspec collect-exit-data`.

Reads and checks manifest.json and the shards (docs: the EESD formats, section 1), groups the
rows into sequences, splits sequences (never positions) into train and held-out sets, and cuts
long sequences into overlapping windows so that every position is trained on exactly once, with
at least half a window of its sequence before it as attention context.
"""

import dataclasses
import json
import os

import numpy as np

from exit_head.safetensors_io import SafetensorsError, dtype_of, read_safetensors

kDataFormat = "selfspec-exit-data"
kDataVersion = 1
_MODEL_INT_FIELDS = ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                     "head_dim", "vocab_size")
_SHARD_TENSORS = ("hidden", "sequence", "position", "token", "next_token", "topk_ids",
                  "topk_logprobs")


class DataError(Exception):
    """Training data that cannot be used, naming the file and the field or tensor."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """The model architecture fields of manifest.json's "model" object."""
    identity: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rope_theta: float
    rms_norm_eps: float
    attention_bias: bool
    o_proj_bias: bool
    rope_scaling: dict  # HF config's rope_scaling when the manifest has one, else {}


@dataclasses.dataclass
class Positions:
    """Every row of every shard, in order. hidden holds BF16 bit patterns (uint16)."""
    hidden: np.ndarray         # uint16 [P, H]
    sequence: np.ndarray       # int64 [P]
    position: np.ndarray       # int64 [P]
    next_token: np.ndarray     # int64 [P]
    topk_ids: np.ndarray       # int64 [P, k]
    topk_logprobs: np.ndarray  # float32 [P, k]

    def __len__(self):
        return self.sequence.shape[0]


@dataclasses.dataclass(frozen=True)
class Window:
    """Rows [start, end) of one sequence; the loss counts rows [loss_from, end) only."""
    start: int
    end: int
    loss_from: int


def load_manifest(data_dir, allow_incomplete):
    """manifest.json of `data_dir`, checked: format, version, completeness, shard list."""
    path = os.path.join(data_dir, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise DataError(f"{path}: cannot read ({error})") from error
    _require(manifest.get("format") == kDataFormat, path,
             f"\"format\" is {manifest.get('format')!r}, expected {kDataFormat!r}")
    _require(manifest.get("version") == kDataVersion, path,
             f"\"version\" is {manifest.get('version')!r}; this trainer reads {kDataVersion}")
    _require(manifest.get("complete") is True or allow_incomplete, path,
             "\"complete\" is false: the collection did not finish (resume it, or pass "
             "--allow-incomplete to train on what is there)")
    for key in ("model", "exit_layer", "top_k", "shards", "init_layer", "frozen"):
        _require(key in manifest, path, f"missing \"{key}\"")
    _require(isinstance(manifest["shards"], list) and manifest["shards"], path,
             "\"shards\" is empty")
    return manifest


def model_spec(manifest, path="manifest.json", allow_final=False):
    """The ModelSpec of manifest["model"], each field checked. "exit_layer" must be in
    [1, num_layers - 1] (an exit head reads the residual stream before the layer it starts from);
    allow_final also accepts num_layers (the final residual stream, which a feature draft head
    reads: scripts/train_feature_head.py, which requires it)."""
    model = manifest["model"]
    try:
        ints = {k: int(model[k]) for k in _MODEL_INT_FIELDS}
        spec = ModelSpec(identity=str(model["identity"]), rope_theta=float(model["rope_theta"]),
                         rms_norm_eps=float(model["rms_norm_eps"]),
                         attention_bias=bool(model["attention_bias"]),
                         o_proj_bias=bool(model["o_proj_bias"]),
                         rope_scaling=dict(model.get("rope_scaling") or {}), **ints)
    except (KeyError, TypeError, ValueError) as error:
        raise DataError(f"{path}: \"model\" field missing or bad: {error}") from error
    _require(all(v > 0 for v in ints.values()), path, f"\"model\" sizes must be positive: {ints}")
    _require(spec.num_heads % spec.num_kv_heads == 0, path,
             f"num_heads {spec.num_heads} is not a multiple of num_kv_heads {spec.num_kv_heads}")
    _require(spec.head_dim % 2 == 0, path, f"head_dim {spec.head_dim} is odd (RoPE needs pairs)")
    exit_layer = manifest["exit_layer"]
    last = spec.num_layers if allow_final else spec.num_layers - 1
    _require(isinstance(exit_layer, int) and 1 <= exit_layer <= last, path,
             f"\"exit_layer\" {exit_layer!r} is outside [1, {last}]")
    return spec


def load_positions(data_dir, manifest, spec):
    """All shards' rows, concatenated in order and checked against the manifest."""
    parts = [_load_shard(os.path.join(data_dir, entry["file"]), entry, spec, manifest["top_k"])
             for entry in manifest["shards"]]
    positions = Positions(*(np.concatenate([getattr(p, f.name) for p in parts])
                            for f in dataclasses.fields(Positions)))
    _check_sequences(positions, os.path.join(data_dir, "manifest.json"))
    return positions


def sequence_spans(positions):
    """[(start, end)] row ranges of the sequences, in order (rows of a sequence are contiguous)."""
    change = np.flatnonzero(np.diff(positions.sequence)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(positions)]])
    return [(int(s), int(e)) for s, e in zip(starts, ends)]


def split_sequences(spans, heldout_fraction, seed):
    """(train, heldout) lists of spans: a seeded random round(fraction * count) sequences are
    held out (at least one when the fraction is positive), the rest train; order kept."""
    count = len(spans)
    heldout = int(round(heldout_fraction * count))
    if heldout_fraction > 0:
        heldout = max(heldout, 1)
    if heldout >= count:
        raise DataError(f"--heldout {heldout_fraction} of {count} sequences leaves none to "
                        "train on")
    chosen = set(np.random.default_rng(seed).permutation(count)[:heldout].tolist())
    train = [s for i, s in enumerate(spans) if i not in chosen]
    held = [s for i, s in enumerate(spans) if i in chosen]
    return train, held


def windows_of(spans, max_len):
    """Windows of at most max_len rows covering the spans; a sequence longer than max_len is cut
    into windows that advance by max_len // 2, each training only on its rows not covered by the
    previous window (so a row keeps at least max_len // 2 rows of context before it)."""
    step = max(1, max_len // 2)
    result = []
    for start, end in spans:
        result.append(Window(start, min(end, start + max_len), start))
        covered = min(end, start + max_len)
        while covered < end:
            window_end = min(end, covered + step)
            result.append(Window(max(start, window_end - max_len), window_end, covered))
            covered = window_end
    return result


def evaluation_windows(windows, limit, seed):
    """The held-out windows evaluated at every evaluation: all of them when limit is 0; else
    whole windows taken in a seeded random order while their loss rows fit in `limit`, the first
    one that does not fit cut to its first rows so that exactly `limit` rows are evaluated (a
    window's rows attend only to rows before them, so the kept rows see all of their context).
    Returned in data order; the same for the same windows, limit and seed."""
    total = sum(w.end - w.loss_from for w in windows)
    if limit == 0 or limit >= total:
        return list(windows)
    chosen, left = [], limit
    for index in np.random.default_rng(seed).permutation(len(windows)).tolist():
        w = windows[index]
        rows = w.end - w.loss_from
        chosen.append((index, w if rows <= left else Window(w.start, w.loss_from + left,
                                                            w.loss_from)))
        left -= min(rows, left)
        if left == 0:
            break
    return [w for _, w in sorted(chosen, key=lambda c: c[0])]


def _load_shard(path, entry, spec, top_k):
    try:
        tensors, _ = read_safetensors(path)
        dtypes = dtype_of(path)
    except (OSError, SafetensorsError) as error:
        raise DataError(f"{path}: cannot read shard ({error})") from error
    for name in _SHARD_TENSORS:
        _require(name in tensors, path, f"missing tensor {name}")
    rows = int(entry.get("positions", -1))
    _require(dtypes["hidden"] == "BF16" and tensors["hidden"].shape == (rows, spec.hidden_size),
             path, f"tensor hidden is {dtypes['hidden']} {list(tensors['hidden'].shape)}, "
                   f"expected BF16 [{rows}, {spec.hidden_size}] (manifest positions, hidden_size)")
    for name in _SHARD_TENSORS[1:]:
        expected = (rows, top_k) if name.startswith("topk") else (rows,)
        _require(dtypes[name] == "F32" and tensors[name].shape == expected, path,
                 f"tensor {name} is {dtypes[name]} {list(tensors[name].shape)}, "
                 f"expected F32 {list(expected)}")
    ids = {n: tensors[n].astype(np.int64) for n in ("sequence", "position", "next_token",
                                                    "topk_ids")}
    for name in ("next_token", "topk_ids"):
        _require(ids[name].size == 0 or (ids[name].min() >= 0 and
                                         ids[name].max() < spec.vocab_size), path,
                 f"tensor {name} holds ids outside [0, {spec.vocab_size})")
    return Positions(hidden=np.array(tensors["hidden"]), sequence=ids["sequence"],
                     position=ids["position"], next_token=ids["next_token"],
                     topk_ids=ids["topk_ids"],
                     topk_logprobs=np.array(tensors["topk_logprobs"], dtype=np.float32))


def _check_sequences(positions, path):
    _require(len(positions) > 0, path, "the shards hold no positions")
    step = np.diff(positions.sequence)
    _require(bool(np.all(step >= 0)), path, "shard rows are not ordered by sequence")
    same = step == 0
    _require(bool(np.all(np.diff(positions.position)[same] == 1)), path,
             "a sequence's positions are not consecutive and in order")


def _require(condition, path, message):
    if not condition:
        raise DataError(f"{path}: {message}")
