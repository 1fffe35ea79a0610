"""The build steps: the kit (checked and unpacked), configure (CMake against the kit), build
(the programs the checks run) and the link check (every built program finds its libraries)."""

import glob
import hashlib
import json
import os
import re
import shutil
import tarfile
import time

from .machine import REPO, first_line

# ---- kit ----
# The kit step: the kit of scripts/gpu/pack.sh checked against its manifest (SHA-256 of the
# tarball and the models) and unpacked into <build>/kit-root, whose pkg-config must run here.

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def step_kit(c, s):
    manifest_path = os.path.join(c.kit, "manifest.json")
    tarball = os.path.join(c.kit, "root.tar.xz")
    if not os.path.isfile(manifest_path) or not os.path.isfile(tarball):
        s.fail(f"no kit at {c.kit} (needs manifest.json and root.tar.xz): run "
               "scripts/gpu/pack.sh on a Debian machine and bring .gpu-kit along")
        return
    manifest = json.load(open(manifest_path))
    digest = sha256_file(tarball)
    expected = manifest.get("root_tarball", {}).get("sha256")
    c.kit_info.update(describe_kit(c, manifest, tarball))
    if digest != expected:
        s.fail(f"root.tar.xz has SHA-256 {digest}, the manifest says {expected}: a damaged or "
               "mixed-up kit")
        return
    unpack(c, s, tarball, digest)
    check_models(c, s, manifest)
    check_pkg_config(c, s)
    s.figures.update({"packages": len(c.kit_info["packages"]),
                      "tarball_mib": round(c.kit_info["tarball_bytes"] / 2**20, 1),
                      "models": ", ".join(c.kit_info["models"]) or "none"})


def describe_kit(c, manifest, tarball):
    """check.json's "kit": where it is and is unpacked, where it was made, what it holds."""
    return {
        "dir": c.kit,
        "root": c.kit_root,
        "made_on": manifest.get("made_on"),
        "created_utc": manifest.get("created_utc"),
        "tarball_bytes": os.path.getsize(tarball),
        "packages": {p["package"]: p["version"] for p in manifest.get("packages", [])},
        "models": [m["name"] for m in manifest.get("models", [])],
    }


def unpack(c, s, tarball, digest):
    """Unpacks the tarball into the kit root, unless this tarball (digest) is unpacked there."""
    stamp = os.path.join(c.kit_root, ".kit-sha256")
    if os.path.isfile(stamp) and open(stamp).read().strip() == digest:
        s.note(f"already unpacked in {c.kit_root}")
        return
    shutil.rmtree(c.kit_root, ignore_errors=True)
    os.makedirs(c.kit_root)
    t0 = time.monotonic()
    with tarfile.open(tarball, "r:xz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(c.kit_root, filter="data")
        else:
            tar.extractall(c.kit_root)
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    s.figures["unpack_s"] = round(time.monotonic() - t0, 1)


def check_models(c, s, manifest):
    for model in manifest.get("models", []):
        for rel, sha in model.get("files", {}).items():
            path = os.path.join(c.kit, model["path"], rel)
            if not os.path.isfile(path) or sha256_file(path) != sha:
                s.fail(f"kit model file {model['path']}/{rel} is missing or damaged")


def check_pkg_config(c, s):
    pkgconfig = os.path.join(c.kit_root, "bin", "pkg-config")
    rc, out = s.run([pkgconfig, "--modversion", "sentencepiece", "libpcre2-8"], capture=True,
                    timeout=20)
    if rc != 0:
        s.fail(f"the kit's pkg-config does not run here (exit {rc})")


# ---- configure ----
# The configure step: CMake against the kit (the single-rank flavour, SELFSPEC_MPI=OFF, for the
# GPU's architecture, with the NCCL found), and where each dependency came from (CMakeCache.txt).

# Where the build's dependencies must come from: CMake cache entries that name them.
KIT_DEPENDENCIES = [
    ("fmt", "fmt_DIR"),
    ("nlohmann_json", "nlohmann_json_DIR"),
    ("yaml-cpp", "yaml-cpp_DIR"),
    ("CLI11", "CLI11_DIR"),
    ("Boost", "Boost_DIR"),
    ("Eigen3", "Eigen3_DIR"),
    ("GTest", "GTest_DIR"),
    ("benchmark", "benchmark_DIR"),
    ("OpenSSL headers", "OPENSSL_INCLUDE_DIR"),
    ("OpenSSL libcrypto", "OPENSSL_CRYPTO_LIBRARY"),
    ("sentencepiece", "pkgcfg_lib_SENTENCEPIECE_sentencepiece"),
    ("pcre2-8", "pkgcfg_lib_PCRE2_pcre2-8"),
    ("pkg-config", "PKG_CONFIG_EXECUTABLE"),
]
# What the machine itself brings: recorded, not checked.
MACHINE_DEPENDENCIES = [
    ("nvcc", "CMAKE_CUDA_COMPILER"),
    ("CUDA runtime", "CUDA_cudart_LIBRARY"),
    ("NCCL header", "NCCL_INCLUDE_DIR"),
    ("NCCL library", "NCCL_LIBRARY"),
    ("C++ compiler", "CMAKE_CXX_COMPILER"),
    ("MPI (SELFSPEC_MPI)", "SELFSPEC_MPI"),
]


def read_cache(build):
    cache = {}
    try:
        for line in open(os.path.join(build, "CMakeCache.txt"), errors="replace"):
            m = re.match(r"^([^#/][^:=]*):[A-Z_]+=(.*)$", line.rstrip("\n"))
            if m:
                cache[m.group(1)] = m.group(2)
    except OSError:
        pass
    return cache


def step_configure(c, s):
    check_prerequisites(c, s)
    if s.status == "failed":
        return
    os.makedirs(c.build, exist_ok=True)
    args = cmake_command(c, s)
    rc, _ = s.run(args)
    deps, outside = record_dependencies(c, args)
    s.figures["dependencies_from_kit"] = f"{len(deps) - len(outside)}/{len(deps)}"
    if rc != 0:
        s.fail(f"cmake exited with {rc}")
    elif outside:
        s.note("found outside the kit: " + "; ".join(outside))


def check_prerequisites(c, s):
    """Fails the step without CMake, nvcc or an NCCL."""
    for name in ("cmake", "nvcc"):
        if not c.tools.get(name):
            s.fail(f"no {name}: {'the CUDA compiler (set CUDACXX)' if name == 'nvcc' else 'CMake'}"
                   " is needed to build")
    if c.nccl.get("error"):
        s.fail("NCCL: " + c.nccl["error"])


def cmake_command(c, s):
    t = c.tools
    args = [t["cmake"], "-S", REPO, "-B", c.build]
    if "CMAKE_GENERATOR" not in read_cache(c.build):  # an existing build keeps its generator
        if t.get("ninja"):
            args += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={t['ninja']}"]
        else:
            args += ["-G", "Unix Makefiles"]
            s.note("no ninja: Unix Makefiles")
    args += [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DSELFSPEC_CUDA=ON",
        f"-DCMAKE_CUDA_COMPILER={t['nvcc']}",
        f"-DCMAKE_CUDA_ARCHITECTURES={c.device['cuda_arch']}",
        "-DSELFSPEC_MPI=OFF",  # the single-rank flavour: the GPU machine has no MPI
        f"-DCMAKE_PREFIX_PATH={c.kit_root}/usr",
        f"-DPKG_CONFIG_EXECUTABLE={c.kit_root}/bin/pkg-config",
        "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
    ]
    if c.nccl.get("include_dir"):
        args += [f"-DNCCL_INCLUDE_DIR={c.nccl['include_dir']}",
                 f"-DNCCL_LIBRARY={c.nccl['library']}"]
    if t.get("ccache"):
        args += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={t['ccache']}" for lang in ("C", "CXX", "CUDA")]
    return args + c.args.cmake_arg


def record_dependencies(c, args):
    """Fills c.build_info from CMakeCache.txt; (dependencies, those found outside the kit)."""
    cache = read_cache(c.build)
    deps = {}
    outside = []
    kit_real = os.path.realpath(c.kit_root)
    for label, key in KIT_DEPENDENCIES:
        value = cache.get(key)
        in_kit = bool(value) and os.path.realpath(value).startswith(kit_real + os.sep)
        deps[label] = {"cache_entry": key, "value": value, "in_kit": in_kit}
        if not in_kit:
            outside.append(f"{label} ({key}={value})")
    machine = {label: cache.get(key) for label, key in MACHINE_DEPENDENCIES}
    c.build_info.update({"cmake_args": args[1:], "cuda_arch": c.device["cuda_arch"],
                         "kit_dependencies": deps, "machine_dependencies": machine,
                         "dependencies_outside_kit": outside})
    return deps, outside


# ---- build ----
# The build step: the programs the checks run (selfspec, the benches, the test executables of
# tests/gpu), or every target with --all-targets, on all CPUs.

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


# ---- link_check ----
# The link check: every built program finds its libraries (ldd; libcuda.so.1, the driver's,
# may be missing where there is no GPU), and where selfspec's come from (the kit or the machine).

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
