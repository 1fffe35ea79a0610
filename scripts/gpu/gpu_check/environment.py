"""The environment step: the machine (OS, CPUs, memory, disk), the tools and their versions,
PyTorch, NCCL, the GPU and the commit - recorded in check.json before anything is built."""

import os
import shutil
import sys

from .device import probe_device, probe_torch
from .nccl import find_nccl
from .programs import quick
from .pythons import python_candidates
from .repo import REPO
from .tools import find_tools, tool_versions


def step_environment(c, s):
    env = c.environment
    describe_machine(env, c.build)
    env["python"] = f"{sys.executable} {sys.version.split()[0]}"
    pythons = python_candidates()
    extra_dirs = [os.path.dirname(p) for p in pythons] + ["/usr/local/bin"]
    find_tools(c.tools, pythons, extra_dirs)
    versions = tool_versions(c.tools)
    env["tools"] = c.tools
    env["versions"] = versions
    for name in ("cmake", "c++", "nvcc"):
        if not c.tools.get(name):
            s.note(f"no {name} found (PATH, {', '.join(extra_dirs)})")
    # PyTorch and its NCCL (a second opinion on the device, and the NCCL the build may use).
    env["pythons"] = pythons
    torch_info = probe_torch(s, pythons)
    env["torch"] = torch_info or "not importable"
    c.nccl = find_nccl(c, pythons)
    env["nccl"] = c.nccl
    probe_device(c, s, torch_info)
    describe_commit(env, c.tools.get("git"))
    s.figures.update(summary_figures(c, versions, torch_info))


def describe_machine(env, build):
    env["hostname"] = os.uname().nodename
    env["uname"] = " ".join(os.uname())
    if os.path.exists("/etc/os-release"):
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                env["os"] = line.split("=", 1)[1].strip().strip('"')
    env["cpus"] = len(os.sched_getaffinity(0))
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                env["memory_gib"] = round(int(line.split()[1]) / 1048576, 1)
    except OSError:
        pass
    for label, path in (("repo", REPO), ("build", os.path.dirname(build) or "/")):
        try:
            env[f"disk_free_gib_{label}"] = round(shutil.disk_usage(path).free / 2**30, 1)
        except OSError:
            pass


def describe_commit(env, git):
    if git and os.path.exists(os.path.join(REPO, ".git")):
        rc, out = quick([git, "-C", REPO, "rev-parse", "HEAD"])
        if rc == 0:
            env["git_commit"] = out.strip()
            rc, out = quick([git, "-C", REPO, "status", "--porcelain"])
            env["git_dirty_files"] = len(out.splitlines()) if rc == 0 else None
    else:
        env["git_commit"] = "unknown (no .git)"


def summary_figures(c, versions, torch_info):
    """The step's figures: the GPU, driver, versions and CPUs in one line of check.md."""
    gpus = c.device.get("gpus", [])
    return {
        "gpu": ", ".join(g.get("name", "?") for g in gpus) or c.device.get("torch_name") or "none",
        "driver": ", ".join(sorted({g.get("driver_version", "?") for g in gpus})) or None,
        "nvcc": versions.get("nvcc"),
        "cmake": versions.get("cmake"),
        "compiler": versions.get("c++") or versions.get("g++"),
        "torch": torch_info.get("torch") if isinstance(torch_info, dict) else None,
        "nccl": (c.nccl or {}).get("version"),
        "cpus": c.environment.get("cpus"),
    }
