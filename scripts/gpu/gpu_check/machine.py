"""The machine: the environment step (OS, CPUs, memory, disk, the tools and their versions,
PyTorch, NCCL, the GPU and the commit - recorded in check.json before anything is built) and the
facts it gathers, with the repository's path and the helpers that run other programs."""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys

# ---- the environment step ----

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


# ---- the repository and other programs ----
# The repository the check builds and runs (the one holding this package); finding other
# programs, running a short one, stopping a process group, reading what a program printed.

REPO = os.path.realpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def find_program(name, extra_dirs=()):
    path = shutil.which(name)
    if path:
        return path
    for d in extra_dirs:
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def quick(cmd, timeout=20):
    """Runs a short command; (rc, combined output). rc None when it could not run."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           text=True, errors="replace")
        return p.returncode, p.stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{type(e).__name__}: {e}"


def kill_group(proc):
    """SIGTERM, then SIGKILL, to the process group of proc (started with start_new_session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def last_json_line(text):
    for line in reversed((text or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


# ---- Pythons and tools ----
# The machine's Pythons (PyTorch's venv first) and their site-packages, where the pip packages
# of PyTorch bring nvcc and NCCL.

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


# The build's tools on the machine (CMake, ninja, the compilers, nvcc, ...) and their versions.

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
    # The profiler and the memory checker: on PATH, beside nvcc, or in the toolkit's folders.
    cuda_dirs = [os.path.dirname(tools["nvcc"])] if tools["nvcc"] else []
    cuda_dirs += ["/usr/local/cuda/bin"] + sorted(glob.glob("/usr/local/cuda-*/bin"), reverse=True)
    cuda_dirs += sorted(glob.glob("/opt/nvidia/nsight-compute/*"), reverse=True)
    for name in ("ncu", "compute-sanitizer"):
        tools[name] = find_program(name, list(extra_dirs) + cuda_dirs)


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


# ---- the GPU ----
# The GPU: what the driver's nvidia-smi and PyTorch see, whether one is present, and the CUDA
# architecture to build for.

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


# ---- NCCL ----
# Where the build's NCCL is: --nccl-include/--nccl-library, then $NCCL_ROOT, then PyTorch's pip
# package (nvidia-nccl-cu12/-cu13; with the kit's nccl.h where the package has none), then beside
# the CUDA toolkit or in the system (left to CMakeLists.txt's own search).

def find_nccl(c, pythons):
    """{source, include_dir, library, version, ...}; include_dir set when CMake must be told."""
    a = c.args
    if a.nccl_include or a.nccl_library:
        return from_options(a)
    kit_header = os.path.join(c.kit, "nccl", "include", "nccl.h")
    return (from_nccl_root(os.environ.get("NCCL_ROOT"))
            or from_pip_packages(pythons, kit_header)
            or beside_toolkit(c.tools.get("nvcc"))
            or from_system()
            or not_found())


def nccl_version_of(header):
    try:
        text = open(header, errors="replace").read()
    except OSError:
        return None
    parts = []
    for key in ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"):
        m = re.search(rf"#define\s+{key}\s+(\d+)", text)
        if not m:
            return None
        parts.append(m.group(1))
    return ".".join(parts)


def pick_nccl_library(libdir):
    for name in ("libnccl.so", "libnccl.so.2"):
        if os.path.isfile(os.path.join(libdir, name)):
            return os.path.join(libdir, name)
    others = sorted(glob.glob(os.path.join(libdir, "libnccl.so.*")))
    return others[-1] if others else None


def from_options(a):
    if not (a.nccl_include and a.nccl_library):
        return {"source": "options", "error": "give both --nccl-include and --nccl-library"}
    return {"source": "options", "include_dir": a.nccl_include, "library": a.nccl_library,
            "version": nccl_version_of(os.path.join(a.nccl_include, "nccl.h"))}


def from_nccl_root(root):
    if not root:
        return None
    lib = pick_nccl_library(os.path.join(root, "lib")) or pick_nccl_library(
        os.path.join(root, "lib64"))
    inc = os.path.join(root, "include")
    if lib and os.path.isfile(os.path.join(inc, "nccl.h")):
        return {"source": "NCCL_ROOT", "include_dir": inc, "library": lib,
                "version": nccl_version_of(os.path.join(inc, "nccl.h"))}
    return None


def from_pip_packages(pythons, kit_header):
    """The first libnccl.so* in a site-packages' nvidia/ folder, with the package's nccl.h:
    nvidia/nccl/{include/nccl.h,lib/libnccl.so.2}; or the kit's, for a package without one."""
    for py in pythons:
        for site in python_site_dirs(py):
            libs = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libnccl.so*"),
                                    recursive=True))
            for libdir in sorted({os.path.dirname(x) for x in libs}):
                lib = pick_nccl_library(libdir)
                header = os.path.join(os.path.dirname(libdir), "include", "nccl.h")
                found = {"source": f"pip package ({py})", "library": lib}
                if os.path.isfile(header):
                    found.update(include_dir=os.path.dirname(header),
                                 version=nccl_version_of(header))
                    return found
                if os.path.isfile(kit_header):
                    found.update(include_dir=os.path.dirname(kit_header),
                                 version=nccl_version_of(kit_header),
                                 note=f"the pip package has no nccl.h: the kit's (NCCL "
                                      f"{nccl_version_of(kit_header)}) with the package's library")
                    return found
    return None


def beside_toolkit(nvcc):
    if not nvcc:
        return None
    top = os.path.dirname(os.path.dirname(nvcc))
    header = os.path.join(top, "include", "nccl.h")
    for libdir in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
        lib = pick_nccl_library(os.path.join(top, libdir))
        if lib and os.path.isfile(header):
            return {"source": "beside the CUDA toolkit (CMakeLists.txt finds it)",
                    "include_dir": None, "library": None, "found": lib,
                    "version": nccl_version_of(header)}
    return None


def from_system():
    if not os.path.isfile("/usr/include/nccl.h"):
        return None
    return {"source": "system (CMakeLists.txt finds it)", "include_dir": None,
            "library": None, "version": nccl_version_of("/usr/include/nccl.h")}


def not_found():
    return {"source": "not found", "include_dir": None, "library": None, "version": None,
            "error": "no nccl.h with libnccl.so* in PyTorch's site-packages (nvidia/...), "
                     "beside nvcc or in /usr/include; pass --nccl-include DIR --nccl-library FILE"}
