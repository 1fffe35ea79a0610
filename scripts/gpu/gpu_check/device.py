"""The GPU: what the driver's nvidia-smi and PyTorch see, whether one is present, and the CUDA
architecture to build for."""

import glob
import os
import re

from .programs import first_line, last_json_line

TORCH_PROBE = (
    "import json, torch\n"
    "d = {'python': __import__('sys').executable, 'torch': torch.__version__,\n"
    "     'cuda': torch.version.cuda, 'available': torch.cuda.is_available()}\n"
    "d['count'] = torch.cuda.device_count() if d['available'] else 0\n"
    "if d['count']:\n"
    "    d['name'] = torch.cuda.get_device_name(0)\n"
    "    d['capability'] = '.'.join(map(str, torch.cuda.get_device_capability(0)))\n"
    "try:\n"
    "    d['nccl'] = '.'.join(map(str, torch.cuda.nccl.version()))\n"
    "except Exception as e:\n"
    "    d['nccl'] = 'unknown: %s' % e\n"
    "print(json.dumps(d))\n")

# The essential fields first; the others in a second query that may fail on its own.
GPU_FIELDS = (["name", "driver_version", "memory.total", "compute_cap"],
              ["pci.bus_id", "clocks.max.sm", "clocks.max.mem", "power.limit", "persistence_mode"])


def probe_torch(s, pythons):
    """What PyTorch (the first Python that imports it) says of the GPU and its NCCL, or None."""
    for py in pythons:
        rc, out = s.run([py, "-c", TORCH_PROBE], capture=True,
                        timeout=min(90, max(5, s.left() - 20)))
        if rc == 0:
            return last_json_line(out)
    return None


def probe_device(c, s, torch_info):
    """Fills c.device: the GPUs, whether one is present (the driver's tool lists one or PyTorch
    can use one) and how that was told, and the CUDA architecture."""
    smi = c.tools.get("nvidia-smi")
    listed, smi_says = ask_nvidia_smi(c, s, smi) if smi else ([], without_nvidia_smi())
    torch_count = torch_info.get("count", 0) if isinstance(torch_info, dict) else 0
    c.device["present"] = bool(listed) or torch_count > 0
    c.device["how"] = smi_says + (f"; PyTorch sees {torch_count} GPU(s)" if torch_count else
                                  "; PyTorch sees no GPU" if isinstance(torch_info, dict) else
                                  "; PyTorch not importable")
    if isinstance(torch_info, dict) and torch_info.get("name"):
        c.device["torch_name"] = torch_info["name"]
        c.device["torch_capability"] = torch_info.get("capability")
    c.device["cuda_arch"] = cuda_arch(c)


def ask_nvidia_smi(c, s, smi):
    """([GPU lines of nvidia-smi -L], what it says); keeps nvidia-smi's output in the outdir."""
    rc, out = s.run([smi], capture=True, timeout=30)
    with open(os.path.join(c.outdir, "nvidia-smi.txt"), "w") as f:
        f.write(out)
    c.device["gpus"] = query_gpus(s, smi)
    rc, out = s.run([smi, "-L"], capture=True, timeout=30)
    listed = [ln for ln in out.splitlines() if ln.startswith("GPU ")]
    smi_says = (f"nvidia-smi -L lists {len(listed)} GPU(s)" if rc == 0 and listed
                else f"nvidia-smi -L lists no GPU (exit {rc}: {first_line(out)})")
    c.device["nvidia_smi"] = "nvidia-smi.txt"
    return listed, smi_says


def query_gpus(s, smi):
    """[{field: value}] of each GPU, from the queries of GPU_FIELDS."""
    gpus = []
    for fields in GPU_FIELDS:
        rc, out = s.run([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader"],
                        capture=True, timeout=30)
        rows = [[v.strip() for v in line.split(",")] for line in out.splitlines()
                if line.strip()] if rc == 0 else []
        for i, values in enumerate(r for r in rows if len(r) == len(fields)):
            if i == len(gpus):
                gpus.append({})
            if i < len(gpus):
                gpus[i].update(zip(fields, values))
    return gpus


def without_nvidia_smi():
    nodes = sorted(glob.glob("/dev/nvidia[0-9]*"))
    return "no nvidia-smi on PATH" + (f" (device nodes: {', '.join(nodes)})" if nodes
                                      else ", no /dev/nvidia* device node")


def cuda_arch(c):
    """--cuda-arch, else the GPUs' compute capabilities (nvidia-smi, then PyTorch), else 90."""
    if c.args.cuda_arch:
        return c.args.cuda_arch
    caps = sorted({g.get("compute_cap", "") for g in c.device.get("gpus", [])} - {""})
    archs = [cap.replace(".", "") for cap in caps if re.fullmatch(r"\d+\.\d+", cap)]
    if archs:
        return ";".join(archs)
    cap = c.device.get("torch_capability") or ""
    if re.fullmatch(r"\d+\.\d+", cap):
        return cap.replace(".", "")
    return "90"
