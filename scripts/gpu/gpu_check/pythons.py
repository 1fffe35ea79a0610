"""The machine's Pythons (PyTorch's venv first) and their site-packages, where the pip packages
of PyTorch bring nvcc and NCCL."""

import json
import os
import shutil
import sys

from .programs import quick


def python_candidates():
    found = []
    for p in [os.environ.get("SELFSPEC_TORCH_PYTHON"), "/opt/torch/.venv/bin/python3",
              shutil.which("python3"), sys.executable, "/usr/bin/python3"]:
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            real = os.path.abspath(p)
            if real not in found:
                found.append(real)
    return found


def python_site_dirs(python):
    rc, out = quick([python, "-c", "import json, sys; print(json.dumps(sys.path))"], timeout=20)
    if rc != 0:
        return []
    try:
        return [p for p in json.loads(out.strip().splitlines()[-1]) if p and os.path.isdir(p)]
    except (ValueError, IndexError):
        return []
