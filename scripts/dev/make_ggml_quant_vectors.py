#!/usr/bin/env python3
"""Writes tests/data/ggml/quant_vectors.json, ggml dequantization vectors from gguf-py (dev only).

gguf-py (pip package `gguf`, llama.cpp's own Python library) is the independent implementation:
its `gguf.quants.quantize` / `dequantize` define the expected values. For every type the engine
reads (F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, then Q5_0, Q5_1, Q5_K, then Q2_K, Q3_K, each
group added later and generated after the earlier ones so that their vectors stay as they were) the
file holds a few cases:

  * "quantized": random floats quantized by gguf-py (the types it can quantize: F32, F16, BF16,
    Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), then dequantized by it;
  * "random_bytes_edge_scales": random block bytes whose f16 scale fields are overwritten with
    edge values (+0, -0, subnormals of either sign, the largest finite of either sign, +-1) and
    then random normal ones, dequantized by gguf-py; the Q4_K and Q5_K cases have a block whose
    6-bit scales and mins are all 63, the Q6_K case one whose int8 scales are -128 and 127, the
    Q2_K case one whose 4-bit scales and mins are all 15 and one where they are all 0, the Q3_K
    case one whose 6-bit scales are all 63 (+31) with every hmask bit set and one whose scales
    are all 0 (-32) with no hmask bit set;
  * "random_bytes": the same with random normal scales only. These are how Q2_K, Q3_K, Q4_K, Q5_K
    and Q6_K are covered (gguf-py cannot quantize them) and how the other types get scales a
    quantizer would not produce;
  * F16 / BF16 "special_values" (zeros, subnormals, infinities, extremes) and
    "random_finite_bits". No NaNs: NaN payloads are not part of the contract and numpy's
    conversion may quiet them.

Each case records the element count, the raw bytes and the expected little-endian f32 values,
both as hex strings (so the comparison is bit for bit and -0.0 / infinities survive JSON). The
file also records, from gguf-py's constants, the block geometry of each type and the name of
every ggml type id gguf-py knows; the C++ test checks them against ggml_block_* and
ggml_type_name.

The output is deterministic (fixed seed): rerunning it with the same gguf and numpy versions
rewrites an identical file.

Usage: python3 scripts/dev/make_ggml_quant_vectors.py [--out tests/data/ggml/quant_vectors.json]
(requires: pip install gguf numpy)
"""

import argparse
import importlib.metadata
import json
import pathlib
import sys

import numpy as np
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

T = GGMLQuantizationType
SUPPORTED = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q8_0, T.Q4_K, T.Q6_K, T.Q5_0, T.Q5_1, T.Q5_K,
             T.Q2_K, T.Q3_K]
QUANTIZABLE = {T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0}

# Byte offsets of the f16 scale fields inside one block of each block-quantized type
# (ggml-common.h: block_q4_0 {d, qs}, block_q4_1 {d, m, qs}, block_q5_0 {d, qh, qs},
# block_q5_1 {d, m, qh, qs}, block_q8_0 {d, qs}, block_q2_K {scales[16], qs[64], d, dmin},
# block_q3_K {hmask[32], qs[64], scales[12], d}, block_q4_K {d, dmin, scales, qs},
# block_q5_K {d, dmin, scales, qh, qs}, block_q6_K {ql, qh, scales, d}).
SCALE_OFFSETS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}

# Valid (finite) f16 scale values as bit patterns, the edge cases first.
EDGE_SCALES = [
    0x0000,  # +0
    0x8000,  # -0
    0x0001,  # smallest subnormal
    0x83FF,  # negative, largest subnormal
    0x7BFF,  # largest finite (65504)
    0xFBFF,  # most negative finite
    0x3C00,  # 1
    0xBC00,  # -1
]


def scale_bits(rng: np.random.Generator, n: int, edges: bool) -> list[int]:
    """n f16 scale bit patterns: the edge cases in turn (if edges), then random normals."""
    out = []
    for i in range(n):
        if edges and i < len(EDGE_SCALES):
            out.append(EDGE_SCALES[i])
        else:
            mag = np.float16(rng.uniform(1e-4, 0.5) * (-1 if rng.random() < 0.5 else 1))
            out.append(int(np.array([mag]).view(np.uint16)[0]))
    return out


def random_blocks(rng: np.random.Generator, qtype: T, n_blocks: int, edges: bool) -> bytes:
    """Random bytes for n_blocks blocks with every f16 scale field set to a valid value: the edge
    cases first (if edges), then random normal values."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    data = bytearray(rng.integers(0, 256, size=n_blocks * type_size, dtype=np.uint8).tobytes())
    offsets = SCALE_OFFSETS[qtype]
    patterns = scale_bits(rng, n_blocks * len(offsets), edges)
    for b in range(n_blocks):
        for k, off in enumerate(offsets):
            bits = patterns[b * len(offsets) + k]
            at = b * type_size + off
            data[at : at + 2] = int(bits).to_bytes(2, "little")
    if qtype in (T.Q4_K, T.Q5_K) and n_blocks > 1:  # the largest 6-bit scales and mins
        data[type_size + 4 : type_size + 16] = b"\xff" * 12
    if qtype == T.Q6_K and n_blocks > 1:  # the extreme int8 sub-block scales
        scales = type_size + 192
        data[scales : scales + 16] = bytes([0x80, 0x7F] * 8)
    if qtype == T.Q2_K and n_blocks > 2:  # 4-bit scales and mins all 15, then all 0
        data[type_size : type_size + 16] = b"\xff" * 16
        data[2 * type_size : 2 * type_size + 16] = b"\x00" * 16
    if qtype == T.Q3_K and n_blocks > 2:  # scales all +31 with hmask all set, then -32 and clear
        data[type_size : type_size + 32] = b"\xff" * 32
        data[type_size + 96 : type_size + 108] = b"\xff" * 12
        data[2 * type_size : 2 * type_size + 32] = b"\x00" * 32
        data[2 * type_size + 96 : 2 * type_size + 108] = b"\x00" * 12
    return bytes(data)


def random_floats(rng: np.random.Generator, n: int) -> np.ndarray:
    """Normal floats with a different magnitude per 32 elements, some blocks constant or zero."""
    x = rng.standard_normal(n).astype(np.float32)
    mags = 10.0 ** rng.uniform(-3, 2, size=(n + 31) // 32)
    x *= np.repeat(mags, 32)[:n].astype(np.float32)
    if n >= 96:
        x[32:64] = 0.0  # a zero block: d = 0
        x[64:96] = np.float32(-0.75)  # a constant block
    return x


def special_values(qtype: T) -> bytes:
    if qtype == T.F16:
        bits = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
                0x3C00, 0x3555, 0xC000, 0x0155, 0x8200, 0x7000]
    else:  # BF16
        bits = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80,
                0x3F80, 0x3EAB, 0xC000, 0x0055, 0x8040, 0x4F00]
    return np.array(bits, dtype=np.uint16).tobytes()


def case(name: str, qtype: T, raw: bytes) -> dict:
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    assert len(raw) % type_size == 0
    n = len(raw) // type_size * block_size
    expected = quants.dequantize(np.frombuffer(raw, dtype=np.uint8).copy(), qtype)
    expected = np.asarray(expected, dtype=np.float32).reshape(-1)
    assert expected.size == n, (qtype.name, expected.size, n)
    return {
        "name": name,
        "n": n,
        "data": raw.hex(),
        "expected_f32": expected.astype("<f4").tobytes().hex(),
    }


def cases_for(rng: np.random.Generator, qtype: T) -> list[dict]:
    block_size, _ = GGML_QUANT_SIZES[qtype]
    out = []
    if qtype in QUANTIZABLE:
        n = max(block_size, 32) * 4  # 128 elements: 4 blocks of 32, or 128 scalars
        raw = np.asarray(quants.quantize(random_floats(rng, n), qtype)).tobytes()
        out.append(case("quantized", qtype, raw))
    if qtype in SCALE_OFFSETS:
        # Every edge-case scale in some field, then a block with random scales.
        n_fields = len(SCALE_OFFSETS[qtype])
        n_blocks = (len(EDGE_SCALES) + n_fields - 1) // n_fields + 1
        edge_blocks = random_blocks(rng, qtype, n_blocks, True)
        out.append(case("random_bytes_edge_scales", qtype, edge_blocks))
        out.append(case("random_bytes", qtype, random_blocks(rng, qtype, 2, False)))
    if qtype in (T.F16, T.BF16):
        out.append(case("special_values", qtype, special_values(qtype)))
        finite = rng.integers(0, 0x7800 if qtype == T.F16 else 0x7F00, size=64, dtype=np.uint16)
        finite |= rng.integers(0, 2, size=64, dtype=np.uint16) << 15  # random signs
        out.append(case("random_finite_bits", qtype, finite.tobytes()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/data/ggml/quant_vectors.json")
    parser.add_argument("--seed", type=int, default=20240917)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    types = []
    for qtype in SUPPORTED:
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        types.append({
            "name": qtype.name,
            "id": int(qtype),
            "block_elements": block_size,
            "block_bytes": type_size,
            "cases": cases_for(rng, qtype),
        })
    doc = {
        "generator": "scripts/dev/make_ggml_quant_vectors.py",
        "command": " ".join(["python3", "scripts/dev/make_ggml_quant_vectors.py"] + sys.argv[1:]),
        "seed": args.seed,
        "gguf_version": importlib.metadata.version("gguf"),
        "numpy_version": np.__version__,
        "type_names": {str(int(t)): t.name for t in GGMLQuantizationType},
        "types": types,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    n_cases = sum(len(t["cases"]) for t in types)
    print(f"wrote {out}: {len(types)} types, {n_cases} cases")


if __name__ == "__main__":
    main()
