"""The configure step: CMake against the kit (the single-rank flavour, SELFSPEC_MPI=OFF, for the
GPU's architecture, with the NCCL found), and where each dependency came from (CMakeCache.txt)."""

import os
import re

from .repo import REPO

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
