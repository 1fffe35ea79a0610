"""Compares the data collected by run.sh at TP 1 and TP > 1, column by column, byte for byte."""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / 'scripts'))
from exit_head.safetensors_io import bf16_to_f32, read_safetensors  # noqa: E402


def columns(name):
    manifest = json.loads(Path(f'data-{name}/manifest.json').read_text())
    out = {}
    for shard in manifest['shards']:
        tensors, _ = read_safetensors(f"data-{name}/{shard['file']}")
        for key, value in tensors.items():
            out.setdefault(key, []).append(np.asarray(value))
    return manifest, {key: np.concatenate(parts) for key, parts in out.items()}


def summary(name):
    lines = Path(f'{name}.json').read_text().strip().splitlines()
    return json.loads(lines[-1])


for model, tp in [('smol', 3), ('qwen', 2)]:
    for order in ['tp-invariant', 'rank-order']:
        one, other = f'{model}-{order}-np1', f'{model}-{order}-np{tp}'
        m1, a = columns(one)
        m2, b = columns(other)
        s1, s2 = summary(one), summary(other)
        print(f'{model} --reduction {order}: TP 1 {s1["positions"]} positions at '
              f'{s1["positions_per_s"]:.1f}/s, TP {tp} at {s2["positions_per_s"]:.1f}/s; '
              f'manifest reduction {m1.get("reduction")}')
        identical = True
        for key in sorted(a):
            x, y = a[key], b[key]
            if x.shape == y.shape and x.tobytes() == y.tobytes():
                print(f'  {key:14s} {x.size:8d} values identical bit for bit')
                continue
            identical = False
            if x.shape != y.shape:
                print(f'  {key:14s} shapes differ: {x.shape} vs {y.shape}')
                continue
            fx = bf16_to_f32(x) if key == 'hidden' else x.astype(np.float64)
            fy = bf16_to_f32(y) if key == 'hidden' else y.astype(np.float64)
            print(f'  {key:14s} {np.count_nonzero(x != y)} of {x.size} values differ; '
                  f'max |diff| {np.abs(fx - fy).max():.3g}')
        print(f'  => {"IDENTICAL" if identical else "not identical"} at TP 1 and TP {tp}')
