"""The link check: every built program finds its libraries (ldd; libcuda.so.1, the driver's,
may be missing where there is no GPU), and where selfspec's come from (the kit or the machine)."""

import glob
import os
import re

from .programs import first_line

# The libraries of selfspec that check.json lists, with where each was found.
REPORTED_LIBRARIES = ("libfmt", "libyaml-cpp", "libsentencepiece", "libpcre2-8", "libcrypto",
                      "libnccl", "libcudart", "libcublasLt", "libcublas.", "libgomp", "libstdc++")


def step_link_check(c, s):
    ldd = c.tools.get("ldd")
    binaries = built_programs(c.build)
    if not binaries:
        s.fail(f"no built programs in {c.build}/bin")
        return
    if not ldd:
        s.note("no ldd: not checked")
        return
    unresolved, resolved = resolve_libraries(s, ldd, binaries)
    kit_real = os.path.realpath(c.kit_root)
    s.figures["selfspec_libraries"] = {
        k: (v + ("  [kit]" if os.path.realpath(v).startswith(kit_real + os.sep) else ""))
        for k, v in sorted(resolved.items()) if k.startswith(REPORTED_LIBRARIES)}
    s.figures["programs"] = len(binaries)
    selfspec = c.program("selfspec")
    if os.path.isfile(selfspec):
        rc, out = s.run([selfspec, "--version"], capture=True, timeout=30)
        s.figures["selfspec_version"] = first_line(out) if rc == 0 else f"exit {rc}"
    if not c.device["present"]:
        unresolved = without_driver_library(unresolved)
    if unresolved:
        s.fail("unresolved libraries: " + "; ".join(f"{b}: {', '.join(v)}"
                                                    for b, v in unresolved.items()))


def built_programs(build):
    binaries = sorted(glob.glob(os.path.join(build, "bin", "*")))
    return [b for b in binaries if os.path.isfile(b) and os.access(b, os.X_OK)]


def resolve_libraries(s, ldd, binaries):
    """({program: [libraries not found]}, {library: path} of selfspec), as ldd tells them."""
    unresolved = {}
    resolved = {}
    for b in binaries:
        rc, out = s.run([ldd, b], capture=True, timeout=30)
        for line in out.splitlines():
            m = re.match(r"^\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
            if not m:
                continue
            lib, where = m.group(1), m.group(2).strip()
            if where == "not found":
                unresolved.setdefault(os.path.basename(b), []).append(lib)
            elif os.path.basename(b) == "selfspec":
                resolved[lib] = where
    return unresolved, resolved


def without_driver_library(unresolved):
    """libcuda.so.1 comes with the driver: without a GPU (and driver) it is absent, as expected."""
    left = {}
    for b, libs in unresolved.items():
        libs = [x for x in libs if x != "libcuda.so.1"]
        if libs:
            left[b] = libs
    return left
