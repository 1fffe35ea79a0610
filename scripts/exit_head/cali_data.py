"""The Cali-TS calibration data: a directory written by `selfspec collect-cali-data`.

Reads and checks manifest.json (format "selfspec-cali-data", version 1) and its shards, and
splits the rows into train and held-out sets by generated sequence. Format (the Cali-TS formats,
section 1): one row per drafted token of a round, up to and including the round's first rejected
one, with

    target_hidden  BF16 [r, d]  the target's final (normed) hidden state at the round's root
    draft_hidden   BF16 [r, d]  the draft's final (normed) hidden state at the drafted token
    step           F32  [r]     the 1-based draft step i within the round (not clamped)
    accepted       F32  [r]     1 when the drafted token was accepted, else 0
    sequence       F32  [r]     the generated sequence (prompt) the row came from

Every error is a DataError naming the file and the field or tensor.
"""

import dataclasses
import json
import os
import re

import numpy as np

from exit_head.dataset import DataError, split_sequences
from exit_head.safetensors_io import SafetensorsError, dtype_of, read_safetensors

kCaliDataFormat = "selfspec-cali-data"
kCaliDataVersion = 1
_IDENTITY = re.compile(r"[0-9a-fA-F]{16}")
_HIDDEN_TENSORS = ("target_hidden", "draft_hidden")
_COLUMN_TENSORS = ("step", "accepted", "sequence")
_BF16_EXPONENT = 0x7F80  # all exponent bits set: an infinity or a NaN


@dataclasses.dataclass
class CaliRows:
    """Every row of every shard, in order. The hidden states are BF16 bit patterns (uint16)."""
    target_hidden: np.ndarray  # uint16 [R, d]
    draft_hidden: np.ndarray   # uint16 [R, d]
    step: np.ndarray           # int64 [R], >= 1
    accepted: np.ndarray       # float32 [R], 0 or 1
    sequence: np.ndarray       # int64 [R], >= 0

    def __len__(self):
        return self.step.shape[0]


@dataclasses.dataclass(frozen=True)
class RowSplit:
    """Row indices of the train and held-out sets, and how many sequences each holds."""
    train: np.ndarray    # int64
    heldout: np.ndarray  # int64
    train_sequences: int
    heldout_sequences: int


def load_cali_data(cali_dir, allow_incomplete=False):
    """(manifest dict, CaliRows) of `cali_dir`, checked against the format."""
    manifest = load_cali_manifest(cali_dir, allow_incomplete)
    manifest_path = os.path.join(cali_dir, "manifest.json")
    parts = [_load_shard(os.path.join(cali_dir, entry["file"]), entry["rows"],
                         manifest["hidden_size"]) for entry in manifest["shards"]]
    rows = CaliRows(*(np.concatenate([getattr(part, field.name) for part in parts])
                      for field in dataclasses.fields(CaliRows)))
    accepted = int(rows.accepted.sum())
    _require(accepted == manifest["accepted_rows"], manifest_path,
             f"\"accepted_rows\" is {manifest['accepted_rows']}, but the shards hold {accepted} "
             "accepted rows")
    return manifest, rows


def load_cali_manifest(cali_dir, allow_incomplete=False):
    """manifest.json of `cali_dir`: format, version, completeness, sizes and shard list checked."""
    path = os.path.join(cali_dir, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise DataError(f"{path}: cannot read ({error})") from error
    _require(isinstance(manifest, dict), path, "not a JSON object")
    _require(manifest.get("format") == kCaliDataFormat, path,
             f"\"format\" is {manifest.get('format')!r}, expected {kCaliDataFormat!r}")
    _require(_is_int(manifest.get("version")) and manifest["version"] == kCaliDataVersion, path,
             f"\"version\" is {manifest.get('version')!r}; this trainer reads {kCaliDataVersion}")
    _require(manifest.get("complete") is True or
             (allow_incomplete and manifest.get("complete") is False), path,
             f"\"complete\" is {manifest.get('complete')!r}: the collection did not finish "
             "(resume it, or pass --allow-incomplete to train on what is there)")
    identity = manifest.get("model_identity")
    _require(isinstance(identity, str) and _IDENTITY.fullmatch(identity) is not None, path,
             f"\"model_identity\" is {identity!r}, expected 16 hex digits")
    for key, least in (("exit_layer", 1), ("hidden_size", 1), ("steps", 1), ("rows", 1),
                       ("rounds", 0), ("accepted_rows", 0)):
        value = manifest.get(key)
        _require(_is_int(value) and value >= least, path,
                 f"\"{key}\" is {value!r}, expected an integer >= {least}")
    _require(manifest["accepted_rows"] <= manifest["rows"], path,
             f"\"accepted_rows\" {manifest['accepted_rows']} exceeds \"rows\" {manifest['rows']}")
    _check_shard_list(manifest, path)
    return manifest


def split_by_sequence(rows, heldout_fraction, seed):
    """RowSplit of `rows`: a seeded random round(fraction * count) of the generated sequences
    (at least one when the fraction is positive) are held out, whole, the rest train."""
    sequences = np.unique(rows.sequence).tolist()
    train, heldout = split_sequences(sequences, heldout_fraction, seed)
    is_heldout = np.isin(rows.sequence, np.array(heldout, dtype=np.int64))
    return RowSplit(train=np.flatnonzero(~is_heldout), heldout=np.flatnonzero(is_heldout),
                    train_sequences=len(train), heldout_sequences=len(heldout))


def _check_shard_list(manifest, path):
    shards = manifest.get("shards")
    _require(isinstance(shards, list) and shards, path, "\"shards\" is missing or empty")
    for index, entry in enumerate(shards):
        _require(isinstance(entry, dict) and isinstance(entry.get("file"), str) and
                 entry["file"] and _is_int(entry.get("rows")) and entry["rows"] >= 0, path,
                 f"\"shards\"[{index}] is {entry!r}, expected {{\"file\": name, \"rows\": "
                 "integer >= 0}")
    total = sum(entry["rows"] for entry in shards)
    _require(total == manifest["rows"], path,
             f"\"rows\" is {manifest['rows']}, but the shards' \"rows\" add up to {total}")


def _load_shard(path, rows, hidden_size):
    """The CaliRows of one shard, whose manifest entry says it holds `rows` rows."""
    try:
        tensors, _ = read_safetensors(path)
        dtypes = dtype_of(path)
    except (OSError, SafetensorsError) as error:
        raise DataError(f"{path}: cannot read shard ({error})") from error
    for name in _HIDDEN_TENSORS + _COLUMN_TENSORS:
        _require(name in tensors, path, f"missing tensor {name}")
    for name in _HIDDEN_TENSORS:
        _check_tensor(path, name, dtypes[name], tensors[name].shape, "BF16", (rows, hidden_size),
                      "(the manifest's shard rows, hidden_size)")
        bits = tensors[name]
        _require(not np.any((bits & _BF16_EXPONENT) == _BF16_EXPONENT), path,
                 f"tensor {name} holds an infinity or a NaN")
    for name in _COLUMN_TENSORS:
        _check_tensor(path, name, dtypes[name], tensors[name].shape, "F32", (rows,),
                      "(the manifest's shard rows)")
    step, accepted, sequence = (np.array(tensors[n], dtype=np.float64) for n in _COLUMN_TENSORS)
    _require(bool(np.all(np.isfinite(step) & (step >= 1) & (step == np.floor(step)))), path,
             "tensor step holds a value that is not an integer >= 1 (steps are 1-based)")
    _require(bool(np.all((accepted == 0) | (accepted == 1))), path,
             "tensor accepted holds a value other than 0 and 1")
    _require(bool(np.all(np.isfinite(sequence) & (sequence >= 0) &
                         (sequence == np.floor(sequence)))), path,
             "tensor sequence holds a value that is not an integer >= 0")
    return CaliRows(target_hidden=np.array(tensors["target_hidden"]),
                    draft_hidden=np.array(tensors["draft_hidden"]),
                    step=step.astype(np.int64), accepted=accepted.astype(np.float32),
                    sequence=sequence.astype(np.int64))


def _check_tensor(path, name, dtype, shape, expected_dtype, expected_shape, origin):
    _require(dtype == expected_dtype and tuple(shape) == tuple(expected_shape), path,
             f"tensor {name} is {dtype} {list(shape)}, expected {expected_dtype} "
             f"{list(expected_shape)} {origin}")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _require(condition, path, message):
    if not condition:
        raise DataError(f"{path}: {message}")
