#!/usr/bin/env python3
"""Compares two output folders of scripts/dev/json_regression.sh, leaving out timing fields.

A field is timing when its key (or a key above it) matches TIMING: seconds, milliseconds,
tokens per second, bandwidths, speedups and the figures derived from measured times (the cost
ratio c, eq. 6's expected speedup, v), and the transparent-huge-page byte count. Everything else
(tokens, text, acceptance counts, controller and drafter states, skip sets, traces) must match;
paths into each run's own output folder are compared with that folder written as OUT.

  scripts/dev/json_regression_diff.py BEFORE AFTER   # exit 1 when a file differs
"""
import json
import re
import sys
from pathlib import Path

TIMING = re.compile(
    r"(_s$|_ms|per_s$|per_token|speedup|efficiency|cost_ratio|fraction|gbps|bandwidth|timings|"
    r"phases|anon_huge_bytes|^v$|load_s)")


def strip(value, root):
    """The value without timing fields, its output folder written as OUT (paths of models and
    files the script made there differ between the two runs by that folder only)."""
    if isinstance(value, dict):
        return {k: strip(v, root) for k, v in value.items() if not TIMING.search(k)}
    if isinstance(value, list):
        return [strip(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "OUT")
    return value


def differences(a, b, path="$"):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                yield f"{path}.{key}: only in {'after' if key in b else 'before'}"
            else:
                yield from differences(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"


def records(file):
    text = file.read_text()
    root = str(file.parent.resolve())
    if file.suffix == ".json":
        return [strip(json.loads(text), root)]
    return [strip(json.loads(line), root) for line in text.splitlines() if line.strip()]


def main():
    before, after = Path(sys.argv[1]), Path(sys.argv[2])
    names = sorted({p.name for p in before.glob("*.json*")} | {p.name for p in after.glob("*.json*")})
    changed = 0
    for name in names:
        if not (before / name).exists() or not (after / name).exists():
            print(f"{name}: only in {'after' if (after / name).exists() else 'before'}")
            changed += 1
            continue
        diff = list(differences(records(before / name), records(after / name)))
        print(f"{name}: {'identical' if not diff else f'{len(diff)} difference(s)'}")
        for line in diff[:20]:
            print(f"  {line}")
        changed += bool(diff)
    print(f"{len(names)} files, {changed} differ (timing fields left out)")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
