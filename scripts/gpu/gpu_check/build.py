"""The build step: the programs the checks run (selfspec, the benches, the test executables of
tests/gpu), or every target with --all-targets, on all CPUs."""

import glob
import os
import re

from .repo import REPO

# Targets the checks run; the test executables of tests/gpu are added from its CMake files.
BASE_TARGETS = ["selfspec", "cuda_kernel_bench", "nccl_bench"]


def step_build(c, s):
    jobs = c.args.jobs or len(os.sched_getaffinity(0))
    args = [c.tools["cmake"], "--build", c.build, "-j", str(jobs)]
    if not c.args.all_targets:
        targets = targets_to_build(c, s)
        if targets is None:
            return
        args += ["--target"] + targets
        s.figures["targets"] = len(targets)
    rc, _ = s.run(args)
    s.figures.update({"jobs": jobs, "compiler_warnings": count_warnings(s.log_path)})
    if rc != 0:
        s.fail(f"the build exited with {rc}" + (" (timed out)" if rc == 124 else ""))


def targets_to_build(c, s):
    """The wanted targets this configuration defines; None (the step failed) without selfspec."""
    wanted = BASE_TARGETS + gpu_test_targets()
    have = available_targets(c, s)
    targets = wanted if have is None else [t for t in wanted if t in have]
    missing = sorted(set(wanted) - set(targets))
    if missing:
        s.note("targets this configuration does not define: " + ", ".join(missing))
    if "selfspec" not in targets:
        s.fail("the configuration defines no 'selfspec' target")
        return None
    return targets


def gpu_test_targets():
    """The executables tests/gpu defines (selfspec_add_gtest / add_executable)."""
    names = []
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "gpu", "*.cmake")) +
                       [os.path.join(REPO, "tests", "gpu", "CMakeLists.txt")]):
        try:
            text = open(path).read()
        except OSError:
            continue
        names += re.findall(r"(?:selfspec_add_gtest|add_executable)\(\s*([A-Za-z0-9_]+)", text)
    return sorted(set(names))


def available_targets(c, s):
    """The targets of the configured build (cmake --build --target help), or None."""
    rc, out = s.run([c.tools["cmake"], "--build", c.build, "--target", "help"], capture=True,
                    timeout=60)
    names = set()
    for line in out.splitlines():
        m = re.match(r"^(?:\.\.\. )?([A-Za-z0-9_.+-]+)(?::|$| )", line.strip())
        if m:
            names.add(m.group(1))
    return names if rc == 0 else None


def count_warnings(log_path):
    try:
        return sum(1 for ln in open(log_path, errors="replace") if "warning:" in ln)
    except OSError:
        return 0
