"""The build's tools on the machine (CMake, ninja, the compilers, nvcc, ...) and their versions."""

import glob
import os
import shutil

from .programs import find_program, first_line, quick
from .pythons import python_site_dirs

TOOLS = ("cmake", "ctest", "ninja", "c++", "g++", "gcc", "git", "ldd", "ccache", "nvidia-smi")
VERSION_FLAGS = (("cmake", "--version"), ("ninja", "--version"), ("g++", "--version"),
                 ("c++", "--version"), ("ccache", "--version"), ("git", "--version"))


def find_tools(tools, pythons, extra_dirs):
    """Fills tools (name: path or None): TOOLS on PATH or in extra_dirs, then nvcc."""
    for name in TOOLS:
        tools[name] = find_program(name, extra_dirs)
    # ctest belongs to the cmake found (a pip cmake brings both).
    if tools["cmake"]:
        beside = os.path.join(os.path.dirname(tools["cmake"]), "ctest")
        if os.path.isfile(beside):
            tools["ctest"] = beside
    tools["nvcc"] = find_nvcc(pythons)


def find_nvcc(pythons):
    candidates = [os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    candidates += sorted(glob.glob("/usr/local/cuda-*/bin/nvcc"), reverse=True)
    for py in pythons:
        for site in python_site_dirs(py):
            candidates += sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", "nvcc")))
    for p in candidates:
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def tool_versions(tools):
    versions = {}
    for name, flag in VERSION_FLAGS:
        if tools.get(name):
            rc, out = quick([tools[name], flag])
            versions[name] = first_line(out) if rc == 0 else f"error: {first_line(out)}"
    if tools["nvcc"]:
        rc, out = quick([tools["nvcc"], "--version"])
        lines = [ln for ln in out.splitlines() if ln.strip()]
        versions["nvcc"] = lines[-2] if rc == 0 and len(lines) >= 2 else first_line(out)
    return versions
