#!/usr/bin/env python3
"""The GPU check: scripts/gpu/check.sh runs this (see there for how to call it).

On a bare GPU machine (nvcc, CMake, ninja, Python with PyTorch and its NCCL; no apt, no network,
no MPI) it builds selfspec against the carried kit (scripts/gpu/pack.sh) and runs every GPU check,
each step under a time bound and all of them within one budget, riskiest first. After every step
it rewrites OUTDIR/check.json and OUTDIR/check.md, so that whatever ends the run leaves a report;
step logs (trimmed) go to OUTDIR/logs/, raw results (bench JSON, JUnit XML) to OUTDIR/raw/.

Exit status:
  0  every check passed
  1  a check failed
  2  bad arguments
  3  no device: no GPU is visible (nvidia-smi lists none); everything that needs none was done
     (environment, kit, configure, build, link check) and passed
  4  the kit, the configuration or the build failed (or a built binary cannot find a library):
     nothing was checked on a GPU
  5  incomplete: the time budget ran out before every check ran (none of those that ran failed)
"""

import argparse
import datetime
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_NO_DEVICE, EXIT_BUILD, EXIT_INCOMPLETE = 0, 1, 2, 3, 4, 5
RESULTS = {
    EXIT_PASSED: "passed",
    EXIT_FAILED: "failed",
    EXIT_NO_DEVICE: "no device",
    EXIT_BUILD: "build failed",
    EXIT_INCOMPLETE: "incomplete",
}
LOG_LIMIT = 160 * 1024  # bytes of a step log kept: its first quarter and its end
RESERVE_S = 5.0  # kept back from the budget for the final report
MIN_STEP_S = 5.0  # a step gets at least this much, or does not start

# The ctest groups of `ctest -L gpu`, riskiest first (the newest and least exercised GPU code):
# name, title, regex over ctest test names. A last group runs every gpu test none of these took.
CTEST_GROUPS = [
    ("ctest_top_p_tie_cut", "top-p/top-k cut with exact ties (warp_logits vs CPU)",
     r"CudaWarpLogits\."),
    ("ctest_tree_mask_attention", "attention vs CPU, causal and tree masks",
     r"CudaAttention\.MatchesCpu"),
    ("ctest_prefill_workspace", "prefill attention split into several workspace passes",
     r"CudaAttention\.PrefillSplitIntoSeveralWorkspacePasses"),
    ("ctest_speculative_accept", "speculative_accept vs the sequential reference",
     r"CudaSpeculativeAccept\."),
    ("ctest_cublaslt_heuristic", "cuBLASLt prefill GEMMs vs CPU (kernel and backend)",
     r"CublasLt"),
    ("ctest_token_count_invariance", "token-count invariance bit for bit (GEMV, attention, rows)",
     r"TokenCountInvariant|QueryIsBitIdenticalAloneOrInABatch|VerificationRowsAreBitIdentical"
     r"|VectorAndScalarLoadPathsAreBitIdentical"),
    ("ctest_backend_vs_cpu", "CUDA backend vs CPU backend (logits, KV rollback, row compaction)",
     r"CudaBackendTest\.(LogitsMatchTheCpuBackend|KvCacheAfterRollback)|CudaKvCacheKeepRows"),
    ("ctest_graph_replay", "CUDA graph replays vs eager launches, bit for bit",
     r"CudaBackendTest\.GraphReplays"),
    ("ctest_speculative_lossless", "self-speculative greedy == autoregressive (backend)",
     r"CudaBackendTest\.SelfSpeculativeGreedy"),
]
CTEST_REST = ("ctest_gpu_rest", "every other test labelled gpu")

# Targets the checks run; the test executables of tests/gpu are added from its CMake files.
BASE_TARGETS = ["selfspec", "cuda_kernel_bench", "nccl_bench"]

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
MACHINE_DEPENDENCIES = [
    ("nvcc", "CMAKE_CUDA_COMPILER"),
    ("CUDA runtime", "CUDA_cudart_LIBRARY"),
    ("NCCL header", "NCCL_INCLUDE_DIR"),
    ("NCCL library", "NCCL_LIBRARY"),
    ("C++ compiler", "CMAKE_CXX_COMPILER"),
    ("MPI (SELFSPEC_MPI)", "SELFSPEC_MPI"),
]

# The generate checks: a real trained model (stories260K, carried in the kit) and a synthetic
# bf16 GQA model made on the machine. Prompts are token ids (no tokenizer needed).
GEN_TOKENS = 96
SYNTH_MODEL_ARGS = ["--layers", "4", "--hidden", "256", "--heads", "8", "--kv-heads", "2",
                    "--intermediate", "688", "--vocab", "2048", "--dtype", "bf16", "--seed", "7"]
SPEC_VARIANTS = [
    ("layer-skip chain", ["--spec", "layer-skip", "--skip-uniform", "0.2"]),
    ("layer-skip tree", ["--spec", "layer-skip", "--skip-uniform", "0.2", "--tree", "swift"]),
]


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def quick(cmd, timeout=20, env=None):
    """Runs a short command; (rc, combined output). rc None when it could not run."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           env=env, text=True, errors="replace")
        return p.returncode, p.stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{type(e).__name__}: {e}"


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


def trim_file(path, limit=LOG_LIMIT):
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size <= limit:
        return
    with open(path, "rb") as f:
        head = f.read(limit // 4)
        f.seek(size - (limit - limit // 4))
        tail = f.read()
    with open(path, "wb") as f:
        f.write(head)
        f.write(f"\n\n[... {size - len(head) - len(tail)} bytes cut by check.py ...]\n\n".encode())
        f.write(tail)


def tail_lines(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Budget:
    def __init__(self, seconds):
        self.start = time.monotonic()
        self.seconds = seconds

    def elapsed(self):
        return time.monotonic() - self.start

    def left(self):
        return self.seconds - self.elapsed() - RESERVE_S


class Step:
    """One step of the check: its commands (each bounded by the step's deadline), log, figures."""

    def __init__(self, checker, name, title, bound_s):
        self.checker = checker
        self.name = name
        self.title = title
        self.bound_s = bound_s
        self.timeout_s = max(0.0, min(bound_s, checker.budget.left()))
        self.deadline = time.monotonic() + self.timeout_s
        self.log_path = os.path.join(checker.outdir, "logs", f"{name}.log")
        self.log = open(self.log_path, "w", errors="replace")
        self.status = None
        self.figures = {}
        self.notes = []
        self.commands = []
        self.timed_out = False
        self.start = time.monotonic()

    def left(self):
        return self.deadline - time.monotonic()

    def note(self, text):
        self.notes.append(text)
        self.log.write(f"# note: {text}\n")
        self.log.flush()

    def fail(self, text):
        self.status = "failed"
        self.note(text)

    def run(self, cmd, env=None, cwd=None, capture=False, timeout=None):
        """Runs cmd under the step's deadline (and timeout, if smaller). stdout is returned when
        capture is set (and also logged); stderr always goes to the log. Returns (rc, stdout);
        rc 124 after a timeout, 127 when the program could not be started."""
        limit = self.left() if timeout is None else min(timeout, self.left())
        printable = shlex.join(str(c) for c in cmd)
        self.commands.append(printable)
        self.log.write(f"$ {printable}\n")
        self.log.flush()
        if limit <= 0:
            self.timed_out = True
            self.log.write("# not started: the step's time is spent\n")
            return 124, ""
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        try:
            proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd or REPO, env=full_env,
                                    stdout=subprocess.PIPE if capture else self.log,
                                    stderr=self.log, start_new_session=True,
                                    text=capture, errors="replace" if capture else None)
        except OSError as e:
            self.log.write(f"# cannot run: {e}\n")
            self.log.flush()
            return 127, ""
        self.checker.current = proc
        out = ""
        try:
            out, _ = proc.communicate(timeout=limit)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            self.timed_out = True
            kill_group(proc)
            out, _ = proc.communicate()
            rc = 124
            self.log.write(f"\n# timed out after {limit:.0f} s: killed\n")
        finally:
            self.checker.current = None
        if capture:
            self.log.write(out or "")
        self.log.write(f"# exit status {rc}\n")
        self.log.flush()
        return rc, out or ""

    def close(self):
        self.duration_s = time.monotonic() - self.start
        self.log.close()
        trim_file(self.log_path)

    def record(self):
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "duration_s": round(getattr(self, "duration_s", time.monotonic() - self.start), 1),
            "timeout_s": round(self.timeout_s),
            "timed_out": self.timed_out,
            "commands": self.commands,
            "log": os.path.relpath(self.log_path, self.checker.outdir),
            "figures": self.figures,
            "notes": self.notes,
        }


def kill_group(proc):
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


def find_program(name, extra_dirs=()):
    path = shutil.which(name)
    if path:
        return path
    for d in extra_dirs:
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


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


class Checker:
    def __init__(self, args):
        self.args = args
        self.outdir = os.path.abspath(args.outdir)
        self.build = os.path.abspath(args.build_dir)
        self.kit = os.path.abspath(args.kit)
        self.kit_root = os.path.join(self.build, "kit-root")
        self.work = os.path.join(self.build, "gpu-check")
        self.budget = Budget(args.budget)
        self.steps = []
        self.current = None
        self.running_step = None
        self.build_failed = False
        self.device = {"present": False, "how": "not probed yet"}
        self.environment = {}
        self.kit_info = {}
        self.build_info = {}
        self.started = utc_now()
        self.final = None
        self.gen_cache = {}
        self.tools = {}
        self.selected = None
        if args.steps:
            self.selected = [s.strip() for s in args.steps.split(",") if s.strip()]
        os.makedirs(os.path.join(self.outdir, "logs"), exist_ok=True)
        os.makedirs(os.path.join(self.outdir, "raw"), exist_ok=True)

    # ---- reports ----

    def wanted(self, name):
        if self.selected is None:
            return True
        return any(name == s or name.startswith(s) for s in self.selected)

    def verdict(self):
        """(exit code, summary) from the steps so far."""
        failed = [s["name"] for s in self.steps if s["status"] == "failed"]
        not_run = [s["name"] for s in self.steps if s["status"] == "not run"]
        if self.build_failed:
            return EXIT_BUILD, "the kit, configuration or build failed: " + ", ".join(failed)
        if not self.device["present"]:
            return EXIT_NO_DEVICE, ("no device: " + self.device.get("how", "")
                                    + "; the GPU checks did not run")
        if failed:
            return EXIT_FAILED, "failed: " + ", ".join(failed)
        if not_run:
            return EXIT_INCOMPLETE, "incomplete, not run: " + ", ".join(not_run)
        return EXIT_PASSED, "every check passed"

    def write_reports(self):
        if self.final is not None:
            code, summary = self.final
            result = RESULTS[code]
        else:
            code, summary = None, "running"
            result = "running"
            if self.running_step:
                summary = (f"interrupted or still running during step '{self.running_step}' "
                           "(a report the run rewrote last)")
                result = "interrupted"
        report = {
            "schema": "selfspec-gpu-check/1",
            "result": result,
            "exit_code": code,
            "summary": summary,
            "started_utc": self.started,
            "updated_utc": utc_now(),
            "elapsed_s": round(self.budget.elapsed(), 1),
            "budget_s": self.args.budget,
            "command": shlex.join(sys.argv),
            "repo": REPO,
            "build_dir": self.build,
            "kit": self.kit_info,
            "device": self.device,
            "environment": self.environment,
            "build": self.build_info,
            "exit_codes": {str(k): v for k, v in RESULTS.items()},
            "steps": self.steps,
        }
        tmp = os.path.join(self.outdir, ".check.json.tmp")
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, os.path.join(self.outdir, "check.json"))
        tmp = os.path.join(self.outdir, ".check.md.tmp")
        with open(tmp, "w") as f:
            f.write(render_markdown(report))
        os.replace(tmp, os.path.join(self.outdir, "check.md"))

    # ---- steps ----

    def step(self, name, title, bound_s, fn, fatal=False, info=False, needs_device=False):
        """Runs fn(step) as a step; records it. fatal: a failure marks the build failed."""
        if not self.wanted(name):
            self.steps.append({"name": name, "title": title, "status": "skipped",
                               "notes": ["not selected (--steps)"]})
            self.write_reports()
            return None
        if needs_device and not self.device["present"]:
            self.steps.append({"name": name, "title": title, "status": "not run",
                               "notes": ["no device"]})
            return None
        if self.build_failed and needs_device:
            self.steps.append({"name": name, "title": title, "status": "not run",
                               "notes": ["the build failed"]})
            return None
        if self.budget.left() < MIN_STEP_S:
            self.steps.append({"name": name, "title": title, "status": "not run",
                               "notes": [f"the time budget ({self.args.budget} s) is spent"]})
            self.write_reports()
            progress(f"{name}: not run (time budget spent)")
            return None
        s = Step(self, name, title, bound_s)
        self.running_step = name
        self.write_reports()
        progress(f"{name}: {title} (at most {s.timeout_s:.0f} s)")
        try:
            fn(s)
        except Exception as e:  # a bug or surprise in the check itself: a failure, with why
            s.fail(f"check.py error: {type(e).__name__}: {e}")
        if s.status is None:
            s.status = "info" if info else "passed"
        if s.timed_out and s.status == "passed":
            s.status = "failed"
            s.notes.append("timed out")
        if info and s.status == "failed":
            s.status = "info"
        s.close()
        self.running_step = None
        self.steps.append(s.record())
        if fatal and s.status == "failed":
            self.build_failed = True
        self.write_reports()
        line = f"{name}: {s.status} ({s.duration_s:.1f} s)"
        if s.notes:
            line += " - " + "; ".join(s.notes[:3])
        progress(line)
        if s.status == "failed":
            sys.stderr.write(f"---- last lines of {s.log_path} ----\n{tail_lines(s.log_path)}"
                             "----\n")
        return s


def progress(text):
    sys.stderr.write(f"[check] {text}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# Environment and device
# ---------------------------------------------------------------------------------------------

def step_environment(c, s):
    env = c.environment
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
    for label, path in (("repo", REPO), ("build", os.path.dirname(c.build) or "/")):
        try:
            env[f"disk_free_gib_{label}"] = round(shutil.disk_usage(path).free / 2**30, 1)
        except OSError:
            pass
    env["python"] = f"{sys.executable} {sys.version.split()[0]}"
    pythons = python_candidates()
    extra_dirs = [os.path.dirname(p) for p in pythons] + ["/usr/local/bin"]
    tools = c.tools
    for name in ("cmake", "ctest", "ninja", "c++", "g++", "gcc", "git", "ldd", "ccache",
                 "nvidia-smi"):
        tools[name] = find_program(name, extra_dirs)
    # ctest belongs to the cmake found (a pip cmake brings both).
    if tools["cmake"]:
        beside = os.path.join(os.path.dirname(tools["cmake"]), "ctest")
        if os.path.isfile(beside):
            tools["ctest"] = beside
    tools["nvcc"] = find_nvcc(c, pythons)
    versions = {}
    for name, flag in (("cmake", "--version"), ("ninja", "--version"), ("g++", "--version"),
                       ("c++", "--version"), ("ccache", "--version"), ("git", "--version")):
        if tools.get(name):
            rc, out = quick([tools[name], flag])
            versions[name] = first_line(out) if rc == 0 else f"error: {first_line(out)}"
    if tools["nvcc"]:
        rc, out = quick([tools["nvcc"], "--version"])
        lines = [ln for ln in out.splitlines() if ln.strip()]
        versions["nvcc"] = lines[-2] if rc == 0 and len(lines) >= 2 else first_line(out)
    env["tools"] = tools
    env["versions"] = versions
    for name in ("cmake", "c++", "nvcc"):
        if not tools.get(name):
            s.note(f"no {name} found (PATH, {', '.join(extra_dirs)})")
    # PyTorch and its NCCL (a second opinion on the device, and the NCCL the build may use).
    env["pythons"] = pythons
    torch_info = None
    for py in pythons:
        code = ("import json, torch\n"
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
        rc, out = s.run([py, "-c", code], capture=True, timeout=min(90, max(5, s.left() - 20)))
        if rc == 0:
            torch_info = last_json_line(out)
            break
    env["torch"] = torch_info or "not importable"
    c.nccl = find_nccl(c, pythons)
    env["nccl"] = c.nccl
    # The GPU, as the driver sees it.
    smi = tools.get("nvidia-smi")
    if smi:
        rc, out = s.run([smi], capture=True, timeout=30)
        with open(os.path.join(c.outdir, "nvidia-smi.txt"), "w") as f:
            f.write(out)
        gpus = []
        # The essential fields first; the others in a second query that may fail on its own.
        for fields in (["name", "driver_version", "memory.total", "compute_cap"],
                       ["pci.bus_id", "clocks.max.sm", "clocks.max.mem", "power.limit",
                        "persistence_mode"]):
            rc, out = s.run([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader"],
                            capture=True, timeout=30)
            rows = [[v.strip() for v in line.split(",")] for line in out.splitlines()
                    if line.strip()] if rc == 0 else []
            for i, values in enumerate(r for r in rows if len(r) == len(fields)):
                if i == len(gpus):
                    gpus.append({})
                if i < len(gpus):
                    gpus[i].update(zip(fields, values))
        c.device["gpus"] = gpus
        rc, out = s.run([smi, "-L"], capture=True, timeout=30)
        listed = [ln for ln in out.splitlines() if ln.startswith("GPU ")]
        smi_says = (f"nvidia-smi -L lists {len(listed)} GPU(s)" if rc == 0 and listed
                    else f"nvidia-smi -L lists no GPU (exit {rc}: {first_line(out)})")
        c.device["nvidia_smi"] = "nvidia-smi.txt"
    else:
        listed = []
        nodes = sorted(glob.glob("/dev/nvidia[0-9]*"))
        smi_says = "no nvidia-smi on PATH" + (f" (device nodes: {', '.join(nodes)})" if nodes
                                              else ", no /dev/nvidia* device node")
    # A GPU is there when the driver's tool lists one or PyTorch can use one.
    torch_count = torch_info.get("count", 0) if isinstance(torch_info, dict) else 0
    c.device["present"] = bool(listed) or torch_count > 0
    c.device["how"] = smi_says + (f"; PyTorch sees {torch_count} GPU(s)" if torch_count else
                                  "; PyTorch sees no GPU" if isinstance(torch_info, dict) else
                                  "; PyTorch not importable")
    if isinstance(torch_info, dict) and torch_info.get("name"):
        c.device["torch_name"] = torch_info["name"]
        c.device["torch_capability"] = torch_info.get("capability")
    c.device["cuda_arch"] = cuda_arch(c)
    git = tools.get("git")
    if git and os.path.exists(os.path.join(REPO, ".git")):
        rc, out = quick([git, "-C", REPO, "rev-parse", "HEAD"])
        if rc == 0:
            env["git_commit"] = out.strip()
            rc, out = quick([git, "-C", REPO, "status", "--porcelain"])
            env["git_dirty_files"] = len(out.splitlines()) if rc == 0 else None
    else:
        env["git_commit"] = "unknown (no .git)"
    s.figures.update({
        "gpu": ", ".join(g.get("name", "?") for g in c.device.get("gpus", [])) or
               c.device.get("torch_name") or "none",
        "driver": ", ".join(sorted({g.get("driver_version", "?")
                                    for g in c.device.get("gpus", [])})) or None,
        "nvcc": versions.get("nvcc"),
        "cmake": versions.get("cmake"),
        "compiler": versions.get("c++") or versions.get("g++"),
        "torch": torch_info.get("torch") if isinstance(torch_info, dict) else None,
        "nccl": (c.nccl or {}).get("version"),
        "cpus": env.get("cpus"),
    })


def find_nvcc(c, pythons):
    candidates = [os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    candidates += sorted(glob.glob("/usr/local/cuda-*/bin/nvcc"), reverse=True)
    for py in pythons:
        for site in python_site_dirs(py):
            candidates += sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", "nvcc")))
    for p in candidates:
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def find_nccl(c, pythons):
    """Where NCCL is: explicit options, then PyTorch's pip package, then beside the toolkit or
    in the system (left to CMakeLists.txt's own search)."""
    a = c.args
    if a.nccl_include or a.nccl_library:
        if not (a.nccl_include and a.nccl_library):
            return {"source": "options", "error": "give both --nccl-include and --nccl-library"}
        return {"source": "options", "include_dir": a.nccl_include, "library": a.nccl_library,
                "version": nccl_version_of(os.path.join(a.nccl_include, "nccl.h"))}
    root = os.environ.get("NCCL_ROOT")
    if root:
        lib = pick_nccl_library(os.path.join(root, "lib")) or pick_nccl_library(
            os.path.join(root, "lib64"))
        inc = os.path.join(root, "include")
        if lib and os.path.isfile(os.path.join(inc, "nccl.h")):
            return {"source": "NCCL_ROOT", "include_dir": inc, "library": lib,
                    "version": nccl_version_of(os.path.join(inc, "nccl.h"))}
    kit_header = os.path.join(c.kit, "nccl", "include", "nccl.h")
    for py in pythons:
        for site in python_site_dirs(py):
            # nvidia-nccl-cu12/-cu13: nvidia/nccl/{include/nccl.h,lib/libnccl.so.2}
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
    nvcc = c.tools.get("nvcc")
    if nvcc:
        top = os.path.dirname(os.path.dirname(nvcc))
        header = os.path.join(top, "include", "nccl.h")
        for libdir in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            lib = pick_nccl_library(os.path.join(top, libdir))
            if lib and os.path.isfile(header):
                return {"source": "beside the CUDA toolkit (CMakeLists.txt finds it)",
                        "include_dir": None, "library": None, "found": lib,
                        "version": nccl_version_of(header)}
    if os.path.isfile("/usr/include/nccl.h"):
        return {"source": "system (CMakeLists.txt finds it)", "include_dir": None,
                "library": None, "version": nccl_version_of("/usr/include/nccl.h")}
    return {"source": "not found", "include_dir": None, "library": None, "version": None,
            "error": "no nccl.h with libnccl.so* in PyTorch's site-packages (nvidia/...), "
                     "beside nvcc or in /usr/include; pass --nccl-include DIR --nccl-library FILE"}


def cuda_arch(c):
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


# ---------------------------------------------------------------------------------------------
# Kit, configure, build
# ---------------------------------------------------------------------------------------------

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
    c.kit_info.update({
        "dir": c.kit,
        "root": c.kit_root,
        "made_on": manifest.get("made_on"),
        "created_utc": manifest.get("created_utc"),
        "tarball_bytes": os.path.getsize(tarball),
        "packages": {p["package"]: p["version"] for p in manifest.get("packages", [])},
        "models": [m["name"] for m in manifest.get("models", [])],
    })
    if digest != expected:
        s.fail(f"root.tar.xz has SHA-256 {digest}, the manifest says {expected}: a damaged or "
               "mixed-up kit")
        return
    stamp = os.path.join(c.kit_root, ".kit-sha256")
    if os.path.isfile(stamp) and open(stamp).read().strip() == digest:
        s.note(f"already unpacked in {c.kit_root}")
    else:
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
    for model in manifest.get("models", []):
        for rel, sha in model.get("files", {}).items():
            path = os.path.join(c.kit, model["path"], rel)
            if not os.path.isfile(path) or sha256_file(path) != sha:
                s.fail(f"kit model file {model['path']}/{rel} is missing or damaged")
    pkgconfig = os.path.join(c.kit_root, "bin", "pkg-config")
    rc, out = s.run([pkgconfig, "--modversion", "sentencepiece", "libpcre2-8"], capture=True,
                    timeout=20)
    if rc != 0:
        s.fail(f"the kit's pkg-config does not run here (exit {rc})")
    s.figures.update({"packages": len(c.kit_info["packages"]),
                      "tarball_mib": round(c.kit_info["tarball_bytes"] / 2**20, 1),
                      "models": ", ".join(c.kit_info["models"]) or "none"})


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
    t = c.tools
    for name in ("cmake", "nvcc"):
        if not t.get(name):
            s.fail(f"no {name}: {'the CUDA compiler (set CUDACXX)' if name == 'nvcc' else 'CMake'}"
                   " is needed to build")
    if c.nccl.get("error"):
        s.fail("NCCL: " + c.nccl["error"])
    if s.status == "failed":
        return
    os.makedirs(c.build, exist_ok=True)
    args = [t["cmake"], "-S", REPO, "-B", c.build]
    cache = read_cache(c.build)
    if "CMAKE_GENERATOR" not in cache:  # the generator of an existing build folder stays
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
    args += c.args.cmake_arg
    rc, _ = s.run(args)
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
    s.figures["dependencies_from_kit"] = f"{len(deps) - len(outside)}/{len(deps)}"
    if rc != 0:
        s.fail(f"cmake exited with {rc}")
    elif outside:
        s.note("found outside the kit: " + "; ".join(outside))


def available_targets(c, s):
    rc, out = s.run([c.tools["cmake"], "--build", c.build, "--target", "help"], capture=True,
                    timeout=60)
    names = set()
    for line in out.splitlines():
        m = re.match(r"^(?:\.\.\. )?([A-Za-z0-9_.+-]+)(?::|$| )", line.strip())
        if m:
            names.add(m.group(1))
    return names if rc == 0 else None


def step_build(c, s):
    jobs = c.args.jobs or len(os.sched_getaffinity(0))
    args = [c.tools["cmake"], "--build", c.build, "-j", str(jobs)]
    if not c.args.all_targets:
        wanted = BASE_TARGETS + gpu_test_targets()
        have = available_targets(c, s)
        targets = wanted if have is None else [t for t in wanted if t in have]
        missing = sorted(set(wanted) - set(targets))
        if missing:
            s.note("targets this configuration does not define: " + ", ".join(missing))
        if "selfspec" not in targets:
            s.fail("the configuration defines no 'selfspec' target")
            return
        args += ["--target"] + targets
        s.figures["targets"] = len(targets)
    rc, _ = s.run(args)
    warnings = 0
    try:
        warnings = sum(1 for ln in open(s.log_path, errors="replace") if "warning:" in ln)
    except OSError:
        pass
    s.figures.update({"jobs": jobs, "compiler_warnings": warnings})
    if rc != 0:
        s.fail(f"the build exited with {rc}" + (" (timed out)" if rc == 124 else ""))


def step_link_check(c, s):
    ldd = c.tools.get("ldd")
    binaries = sorted(glob.glob(os.path.join(c.build, "bin", "*")))
    binaries = [b for b in binaries if os.path.isfile(b) and os.access(b, os.X_OK)]
    if not binaries:
        s.fail(f"no built programs in {c.build}/bin")
        return
    if not ldd:
        s.note("no ldd: not checked")
        return
    kit_real = os.path.realpath(c.kit_root)
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
    interesting = ("libfmt", "libyaml-cpp", "libsentencepiece", "libpcre2-8", "libcrypto",
                   "libnccl", "libcudart", "libcublasLt", "libcublas.", "libgomp", "libstdc++")
    s.figures["selfspec_libraries"] = {
        k: (v + ("  [kit]" if os.path.realpath(v).startswith(kit_real + os.sep) else ""))
        for k, v in sorted(resolved.items()) if k.startswith(interesting)}
    s.figures["programs"] = len(binaries)
    if os.path.isfile(selfspec(c)):
        rc, out = s.run([selfspec(c), "--version"], capture=True, timeout=30)
        s.figures["selfspec_version"] = first_line(out) if rc == 0 else f"exit {rc}"
    # libcuda.so.1 comes with the driver: without a GPU (and driver) it is absent, as expected.
    if not c.device["present"]:
        for b in list(unresolved):
            unresolved[b] = [x for x in unresolved[b] if x != "libcuda.so.1"]
            if not unresolved[b]:
                del unresolved[b]
    if unresolved:
        s.fail("unresolved libraries: " + "; ".join(f"{b}: {', '.join(v)}"
                                                    for b, v in unresolved.items()))


# ---------------------------------------------------------------------------------------------
# ctest -L gpu
# ---------------------------------------------------------------------------------------------

def parse_junit(path):
    tests = []
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None
    for case in root.iter("testcase"):
        status = case.get("status", "run")
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif skipped is not None or status in ("notrun", "disabled"):
            # CTest marks a test that skipped itself (SKIP_REGULAR_EXPRESSION, SKIP_RETURN_CODE)
            # and one it could not start alike ("notrun"); the message tells them apart.
            message = (skipped.get("message", "") if skipped is not None else "").lower()
            outcome = "skipped" if "skip" in message or status == "disabled" else "not run"
        elif status == "fail":
            outcome = "failed"
        else:
            outcome = "passed"
        test = {"name": case.get("name"), "outcome": outcome,
                "time_s": float(case.get("time") or 0.0)}
        if outcome != "passed":
            test["detail"] = gtest_detail(case.findtext("system-out") or "")
        tests.append(test)
    return tests


def gtest_detail(output):
    """The reason of a skip or the first failure in a GoogleTest output (a few lines)."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("Skipped"):
            return " ".join(x.strip() for x in lines[i:i + 2])[:400]
        if "Failure" in line:
            return " ".join(x.strip() for x in lines[i:i + 4])[:400]
    return " ".join(x.strip() for x in lines[-3:])[:400]


def parse_ctest_stdout(text):
    tests = []
    for line in text.splitlines():
        m = re.match(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\s*(\*{0,3}[A-Za-z ]+?)\s+[\d.]+ sec", line)
        if m:
            word = m.group(2).strip("* ").lower()
            outcome = {"passed": "passed", "skipped": "skipped", "not run": "not run"}.get(
                word, "failed")
            tests.append({"name": m.group(1), "outcome": outcome})
    return tests


def run_ctest_group(c, s, include=None, exclude=None):
    ctest = c.tools.get("ctest")
    if not ctest:
        s.fail("no ctest")
        return
    junit = os.path.join(c.outdir, "raw", f"{s.name}.xml")
    if os.path.exists(junit):
        os.remove(junit)
    jobs = max(1, min(4, len(os.sched_getaffinity(0))))
    args = [ctest, "--test-dir", c.build, "-L", "gpu", "--output-on-failure", "--timeout", "120",
            "-j", str(jobs), "--output-junit", junit]
    if include:
        args += ["-R", include]
    if exclude:
        args += ["-E", exclude]
    rc, out = s.run(args, capture=True)
    tests = parse_junit(junit)
    if tests is None:
        tests = parse_ctest_stdout(out)
    counts = {}
    for t in tests:
        counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
    s.figures.update({k: v for k, v in sorted(counts.items())})
    s.figures["tests"] = len(tests)
    bad = [t["name"] for t in tests if t["outcome"] in ("failed", "not run")]
    skipped = [t["name"] for t in tests if t["outcome"] == "skipped"]
    if bad:
        s.figures["failed_tests"] = bad
    if skipped:
        s.figures["skipped_tests"] = skipped
    details = [f"{t['name']}: {t['detail']}" for t in tests if t.get("detail")]
    if details:
        s.figures["details"] = details[:10]
    if not tests:
        s.fail("no test matched: the group's pattern no longer names a gpu test")
    elif bad:
        s.fail(f"{len(bad)} test(s) failed: " + ", ".join(bad[:8]))
    elif skipped:
        s.fail(f"{len(skipped)} test(s) skipped with a GPU present (the tests could not use it)")
    elif rc != 0:
        s.fail(f"ctest exited with {rc}")


# ---------------------------------------------------------------------------------------------
# selfspec generate on the GPU
# ---------------------------------------------------------------------------------------------

def selfspec(c):
    return os.path.join(c.build, "bin", "selfspec")


def gen_models(c, s):
    """[(label, model dir, extra args, prompt ids)] for the generate checks."""
    models = []
    stories = os.path.join(c.kit, "models", "stories260K")
    prompt = "1,403,407,365,471,296,260,289"
    if os.path.isfile(os.path.join(stories, "config.json")):
        models.append(("stories260K f32", stories, [], prompt))
        models.append(("stories260K as bf16", stories, ["--weights-dtype", "bf16"], prompt))
    else:
        s.note("the kit carries no stories260K: checked on the synthetic model only")
    synth = os.path.join(c.work, "models", "synthetic-gqa-bf16")
    if not os.path.isfile(os.path.join(synth, "config.json")):
        rc, _ = s.run([selfspec(c), "make-model", "--out", synth] + SYNTH_MODEL_ARGS, timeout=120)
        if rc != 0:
            s.fail(f"selfspec make-model exited with {rc}")
            return models
    models.append(("synthetic GQA bf16", synth, [], "1,5,900,17,1500,33"))
    return models


def generate(c, s, model, extra, prompt, device="cuda", graphs="on", spec=()):
    key = (model, tuple(extra), prompt, device, graphs, tuple(spec))
    if key in c.gen_cache:
        return c.gen_cache[key]
    args = [selfspec(c), "generate", "--model", model, "--prompt-ids", prompt,
            "--max-new-tokens", str(GEN_TOKENS), "--ignore-eos", "--json", "--device", device]
    if device == "cuda":
        args += ["--cuda-graphs", graphs]
    else:
        args += ["--threads", str(len(os.sched_getaffinity(0)))]
    args += list(extra) + list(spec)
    rc, out = s.run(args, capture=True, timeout=120)
    result = last_json_line(out) if rc == 0 else None
    if result is None:
        s.fail(f"selfspec generate ({' '.join(spec) or 'autoregressive'}, device {device}, "
               f"graphs {graphs}) on {model} exited with {rc}")
    c.gen_cache[key] = result
    return result


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def step_cli_graphs(c, s):
    rows = []
    for label, model, extra, prompt in gen_models(c, s):
        for spec_label, spec in [("autoregressive", [])] + SPEC_VARIANTS[:1]:
            on = generate(c, s, model, extra, prompt, graphs="on", spec=spec)
            off = generate(c, s, model, extra, prompt, graphs="off", spec=spec)
            if not on or not off:
                continue
            diff = first_difference(on["tokens"], off["tokens"])
            rows.append({"model": label, "mode": spec_label, "tokens": len(on["tokens"]),
                         "identical": diff is None,
                         "decode_tok_s_graphs_on": round(on["timings"]["decode_tokens_per_s"], 1),
                         "decode_tok_s_graphs_off": round(off["timings"]["decode_tokens_per_s"],
                                                          1)})
            if diff is not None:
                s.fail(f"{label}, {spec_label}: graphs on and off differ at token {diff}")
    s.figures["runs"] = rows


def step_cli_speculative(c, s):
    rows = []
    for label, model, extra, prompt in gen_models(c, s):
        ar = generate(c, s, model, extra, prompt)
        if not ar:
            continue
        for spec_label, spec in SPEC_VARIANTS:
            sp = generate(c, s, model, extra, prompt, spec=spec)
            if not sp:
                continue
            diff = first_difference(ar["tokens"], sp["tokens"])
            rows.append({"model": label, "drafter": spec_label, "tokens": len(sp["tokens"]),
                         "lossless": diff is None, "drafted": sp.get("drafted"),
                         "acceptance_rate": round(sp.get("acceptance_rate", 0.0), 3),
                         "mean_accepted_length": round(sp.get("mean_accepted_length", 0.0), 2)})
            if diff is not None:
                s.fail(f"{label}, {spec_label}: speculative output differs from autoregressive "
                       f"at token {diff}")
            if not sp.get("drafted"):
                s.note(f"{label}, {spec_label}: nothing was drafted")
    s.figures["runs"] = rows


def step_cli_cpu_vs_gpu(c, s):
    rows = []
    for label, model, extra, prompt in gen_models(c, s):
        gpu = generate(c, s, model, extra, prompt)
        cpu = generate(c, s, model, extra, prompt, device="cpu")
        if not gpu or not cpu:
            continue
        diff = first_difference(gpu["tokens"], cpu["tokens"])
        rows.append({"model": label, "tokens": len(gpu["tokens"]),
                     "agree": diff is None,
                     "first_difference": diff})
    s.figures["runs"] = rows
    s.note("informational: GPU and CPU reductions differ in order, so long greedy runs may part "
           "at a near tie (the logits are compared with tolerances in ctest_backend_vs_cpu)")


# ---------------------------------------------------------------------------------------------
# Benchmarks
# ---------------------------------------------------------------------------------------------

def step_decode_bench(c, s, graphs):
    out = os.path.join(c.outdir, "raw", f"bench-7b-bf16-graphs-{graphs}.json")
    args = [selfspec(c), "bench", "--architecture",
            os.path.join(REPO, "configs", "models", "llama-2-7b.yaml"), "--weights-dtype", "bf16",
            "--device", "cuda", "--cuda-graphs", graphs, "--prompt-len", "128", "--gen", "128",
            "--reps", "3", "--json", "--out", out]
    if os.path.exists(out):
        os.remove(out)
    rc, _ = s.run(args, capture=True)
    if rc != 0:
        s.fail(f"selfspec bench exited with {rc}")
        return
    try:
        r = json.load(open(out))
    except (OSError, ValueError) as e:
        s.fail(f"no bench JSON ({e})")
        return
    f = s.figures
    f["backend"] = r.get("backend")
    f["parameters"] = r.get("parameters")
    f["load_s"] = round(r.get("load_s", 0.0), 1)
    f["prefill_tok_s"] = round(r.get("prefill_tokens_per_s", 0.0), 1)
    f["decode_tok_s"] = round(r.get("decode_tokens_per_s", 0.0), 1)
    f["decode_ms_per_token"] = round(r.get("decode_ms_per_token", 0.0), 3)
    f["effective_gbps"] = round((r.get("effective_bandwidth_gbps") or {}).get("all_ranks", 0.0), 1)
    device = r.get("device_bandwidth_gbps")
    if not device:
        s.fail("the bench reports no device bandwidth: it did not run on the GPU")
        return
    f["device_copy_gbps"] = round(device.get("measured_copy_all_ranks", 0.0), 1)
    f["device_peak_gbps"] = round(device.get("peak_all_ranks", 0.0), 1)
    f["fraction_of_device_copy_bandwidth"] = round(
        r.get("decode_fraction_of_device_copy_bandwidth", 0.0), 3)
    f["fraction_of_device_peak_bandwidth"] = round(
        r.get("decode_fraction_of_device_peak_bandwidth", 0.0), 3)
    f["cuda_graphs"] = r.get("cuda_graphs")
    if graphs == "off":
        on = [st for st in c.steps if st["name"] == "bench_7b_graphs_on" and st.get("figures")]
        if on and on[0]["figures"].get("decode_tok_s") and f["decode_tok_s"]:
            f["graphs_speedup"] = round(on[0]["figures"]["decode_tok_s"] / f["decode_tok_s"], 3)
    if r.get("cuda_graphs") != (graphs == "on"):
        s.fail(f"asked for --cuda-graphs {graphs}, the bench reports cuda_graphs "
               f"{r.get('cuda_graphs')}")


def step_kernel_bench(c, s):
    out = os.path.join(c.outdir, "raw", "cuda_kernel_bench.json")
    if os.path.exists(out):
        os.remove(out)
    args = [os.path.join(c.build, "bin", "cuda_kernel_bench"), f"--benchmark_out={out}",
            "--benchmark_out_format=json", "--benchmark_min_time=0.05"]
    rc, text = s.run(args, capture=True)
    if "no CUDA device" in text or "cannot query the CUDA device" in text:
        s.fail("cuda_kernel_bench found no usable CUDA device")
        return
    if rc != 0:
        s.fail(f"cuda_kernel_bench exited with {rc}")
    try:
        r = json.load(open(out))
    except (OSError, ValueError) as e:
        s.fail(f"no benchmark JSON ({e})")
        return
    rows = []
    errors = []
    for b in r.get("benchmarks", []):
        if b.get("error_occurred"):
            errors.append(f"{b.get('name')}: {b.get('error_message')}")
            continue
        row = {"name": b.get("name"), "time_us": round(b.get("real_time", 0.0) *
                                                       {"ns": 1e-3, "us": 1.0, "ms": 1e3}.get(
                                                           b.get("time_unit", "ns"), 1.0), 2)}
        if "GB/s" in b:
            row["GB/s"] = round(b["GB/s"], 1)
            if b.get("peak_GB/s"):
                row["fraction_of_peak"] = round(b["GB/s"] / b["peak_GB/s"], 3)
        if "TFLOP/s" in b:
            row["TFLOP/s"] = round(b["TFLOP/s"], 1)
        rows.append(row)
    s.figures["device"] = (r.get("context") or {}).get("device")
    s.figures["peak_gbps"] = (r.get("context") or {}).get("peak_bandwidth_GBps")
    s.figures["benchmarks"] = rows
    if errors:
        s.fail(f"{len(errors)} benchmark(s) ended with an error: " + "; ".join(errors[:5]))
    if not rows:
        s.fail("no benchmark result")


def step_nccl_bench(c, s):
    out = os.path.join(c.outdir, "raw", "nccl_bench.json")
    if os.path.exists(out):
        os.remove(out)
    args = [os.path.join(c.build, "bin", "nccl_bench"), "--iters", "100", "--warmup", "10",
            "--out", out]
    rc, text = s.run(args, capture=True)
    if "nothing to measure" in text:
        s.fail("nccl_bench found nothing to measure (no usable GPU, or built without CUDA)")
        return
    if rc != 0:
        s.fail(f"nccl_bench exited with {rc}")
        return
    try:
        r = json.load(open(out))
    except (OSError, ValueError) as e:
        s.fail(f"no nccl_bench JSON ({e})")
        return
    s.figures["nccl_version"] = r.get("nccl_version")
    s.figures["ranks"] = r.get("ranks")
    s.figures["results"] = [{k: row.get(k) for k in ("hidden", "dtype", "tokens", "bytes",
                                                      "stream_us", "graph_us")}
                            for row in r.get("results", [])]


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------

def short_figures(figures):
    parts = []
    for k, v in figures.items():
        if isinstance(v, (list, dict)):
            continue
        if v is None:
            continue
        parts.append(f"{k} {v}")
    return ", ".join(parts)


def md_table(rows, columns):
    if not rows:
        return ""
    out = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    for r in rows:
        out += "| " + " | ".join("" if r.get(col) is None else str(r.get(col))
                                 for col in columns) + " |\n"
    return out


def render_markdown(report):
    lines = []
    title = report["result"].upper()
    lines.append(f"# selfspec GPU check: {title}\n")
    lines.append(f"- exit code: {report['exit_code']} ({report['summary']})")
    dev = report["device"]
    gpus = ", ".join(f"{g.get('name')} (sm {g.get('compute_cap')}, driver "
                     f"{g.get('driver_version')}, {g.get('memory.total')})"
                     for g in dev.get("gpus", [])) or "none"
    lines.append(f"- device: {'present' if dev.get('present') else 'NONE'}: {dev.get('how')}; "
                 f"GPUs: {gpus}")
    env = report["environment"]
    v = env.get("versions", {})
    torch = env.get("torch")
    lines.append(f"- machine: {env.get('os')}, {env.get('cpus')} CPUs, "
                 f"{env.get('memory_gib')} GiB; {v.get('c++') or v.get('g++')}; "
                 f"{v.get('cmake')}; nvcc {v.get('nvcc')}")
    if isinstance(torch, dict):
        lines.append(f"- PyTorch {torch.get('torch')} (CUDA {torch.get('cuda')}, NCCL "
                     f"{torch.get('nccl')}) at {torch.get('python')}")
    nccl = env.get("nccl") or {}
    lines.append(f"- NCCL for the build: {nccl.get('version')} from {nccl.get('source')} "
                 f"{nccl.get('library') or nccl.get('found') or ''}"
                 + (f" ({nccl['note']})" if nccl.get("note") else ""))
    lines.append(f"- commit: {env.get('git_commit')}; started {report['started_utc']}, "
                 f"{report['elapsed_s']} s of a {report['budget_s']} s budget")
    kit = report.get("kit") or {}
    if kit:
        lines.append(f"- kit: {kit.get('dir')} ({len(kit.get('packages', {}))} packages from "
                     f"{(kit.get('made_on') or {}).get('os')}, models: "
                     f"{', '.join(kit.get('models', [])) or 'none'})")
    lines.append("")
    lines.append("## Steps\n")
    lines.append("| step | status | time (s) | bound (s) | figures and notes |")
    lines.append("|---|---|---|---|---|")
    for st in report["steps"]:
        text = short_figures(st.get("figures", {}))
        notes = "; ".join(st.get("notes", []))
        if notes:
            text = (text + "; " if text else "") + notes
        text = text.replace("|", "/").replace("\n", " ")
        if len(text) > 400:
            text = text[:400] + "..."
        lines.append(f"| {st['name']} | {st['status']} | {st.get('duration_s', '')} | "
                     f"{st.get('timeout_s', '')} | {text} |")
    lines.append("")
    build = report.get("build") or {}
    if build.get("kit_dependencies"):
        lines.append("## Where the build's dependencies came from\n")
        rows = [{"dependency": k, "in kit": "yes" if d["in_kit"] else "NO", "path": d["value"]}
                for k, d in build["kit_dependencies"].items()]
        rows += [{"dependency": k, "in kit": "(machine)", "path": val}
                 for k, val in (build.get("machine_dependencies") or {}).items()]
        lines.append(md_table(rows, ["dependency", "in kit", "path"]))
    by_name = {st["name"]: st for st in report["steps"]}
    bench_rows = []
    for graphs in ("on", "off"):
        st = by_name.get(f"bench_7b_graphs_{graphs}")
        if st and st.get("figures"):
            row = dict(st["figures"])
            row["graphs"] = graphs
            bench_rows.append(row)
    if bench_rows:
        lines.append("## Decode, LLaMA-2-7B geometry, synthetic bf16 weights\n")
        lines.append(md_table(bench_rows, ["graphs", "decode_tok_s", "decode_ms_per_token",
                                           "effective_gbps", "device_copy_gbps",
                                           "device_peak_gbps",
                                           "fraction_of_device_copy_bandwidth",
                                           "fraction_of_device_peak_bandwidth",
                                           "graphs_speedup", "prefill_tok_s", "load_s"]))
    for name, columns in (("cli_graph_replay", ["model", "mode", "tokens", "identical",
                                                 "decode_tok_s_graphs_on",
                                                 "decode_tok_s_graphs_off"]),
                          ("cli_speculative", ["model", "drafter", "tokens", "lossless",
                                               "drafted", "acceptance_rate",
                                               "mean_accepted_length"]),
                          ("cli_cpu_vs_gpu", ["model", "tokens", "agree", "first_difference"])):
        st = by_name.get(name)
        if st and st.get("figures", {}).get("runs"):
            lines.append(f"## {st['title']}\n")
            lines.append(md_table(st["figures"]["runs"], columns))
    st = by_name.get("kernel_bench")
    if st and st.get("figures", {}).get("benchmarks"):
        lines.append(f"## CUDA kernels ({st['figures'].get('device')}, peak "
                     f"{st['figures'].get('peak_gbps')} GB/s)\n")
        lines.append(md_table(st["figures"]["benchmarks"],
                              ["name", "time_us", "GB/s", "fraction_of_peak", "TFLOP/s"]))
    st = by_name.get("nccl_bench")
    if st and st.get("figures", {}).get("results"):
        lines.append(f"## NCCL all-reduce (NCCL {st['figures'].get('nccl_version')}, "
                     f"{st['figures'].get('ranks')} rank)\n")
        lines.append(md_table(st["figures"]["results"],
                              ["hidden", "dtype", "tokens", "bytes", "stream_us", "graph_us"]))
    failed = [st for st in report["steps"] if st["status"] == "failed"]
    if failed:
        lines.append("## Failures\n")
        for st in failed:
            lines.append(f"### {st['name']}: {st['title']}\n")
            for n in st.get("notes", []):
                lines.append(f"- {n}")
            for key in ("failed_tests", "skipped_tests"):
                if st.get("figures", {}).get(key):
                    lines.append(f"- {key}: {', '.join(st['figures'][key])}")
            for detail in st.get("figures", {}).get("details", []):
                lines.append(f"  - {detail}")
            if st.get("log"):
                lines.append(f"- log: `{st['log']}`")
            lines.append("")
    lines.append("Exit codes: 0 passed, 1 a check failed, 2 bad arguments, 3 no device, "
                 "4 kit/configure/build failed, 5 incomplete (time budget).\n")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="scripts/gpu/check.sh",
        description="Builds selfspec from the kit and runs the GPU checks; writes "
                    "OUTDIR/check.json and OUTDIR/check.md.",
        epilog="Exit status: 0 passed, 1 a check failed, 2 bad arguments, 3 no device, "
               "4 kit/configure/build failed, 5 incomplete (time budget spent).")
    p.add_argument("outdir", help="folder for the reports (created)")
    p.add_argument("--kit", default=os.environ.get("SELFSPEC_GPU_KIT",
                                                   os.path.join(REPO, ".gpu-kit")),
                   help="the kit folder of scripts/gpu/pack.sh (default: $SELFSPEC_GPU_KIT or "
                        "<repo>/.gpu-kit)")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build-gpu"),
                   help="build folder (default <repo>/build-gpu; kept, so a rerun is "
                        "incremental)")
    p.add_argument("--budget", type=float, default=540.0,
                   help="seconds for the whole run; steps that would start later are reported "
                        "'not run' (default 540)")
    p.add_argument("--build-timeout", type=float, default=420.0,
                   help="bound of the build step in seconds (default 420)")
    p.add_argument("--jobs", type=int, default=0, help="build jobs (default: all CPUs)")
    p.add_argument("--cuda-arch", default="",
                   help="CMAKE_CUDA_ARCHITECTURES (default: the GPU's compute capability from "
                        "nvidia-smi, else 90)")
    p.add_argument("--nccl-include", default="", help="folder of nccl.h (with --nccl-library)")
    p.add_argument("--nccl-library", default="", help="libnccl.so* file (with --nccl-include)")
    p.add_argument("--cmake-arg", action="append", default=[],
                   help="extra CMake argument, after check.sh's own (repeatable)")
    p.add_argument("--all-targets", action="store_true",
                   help="build every target, not only those the checks run")
    p.add_argument("--no-build", action="store_true",
                   help="skip kit, configure and build: use the programs already in --build-dir")
    p.add_argument("--steps", default="",
                   help="comma-separated step names or prefixes to run (environment, kit, "
                        "configure, build and link_check always run); e.g. ctest_,bench_")
    args = p.parse_args(argv)
    extra = os.environ.get("SELFSPEC_CHECK_CMAKE_ARGS", "")
    args.cmake_arg = shlex.split(extra) + args.cmake_arg
    if args.budget <= 0 or args.build_timeout <= 0:
        p.error("--budget and --build-timeout must be positive")
    return args


def main(argv):
    try:
        args = parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code not in (0, None) else 0
    c = Checker(args)
    c.nccl = {}

    def on_signal(signum, frame):
        if c.current is not None:
            kill_group(c.current)
        progress(f"stopped by signal {signum} during {c.running_step}")
        c.write_reports()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    c.write_reports()

    always = c.selected
    c.selected = None  # the environment and build steps run whatever --steps says
    c.step("environment", "machine, tools, versions, GPU (nvidia-smi), PyTorch, NCCL", 120,
           lambda s: step_environment(c, s), info=True)
    if args.no_build:
        for name in ("kit", "configure", "build"):
            c.steps.append({"name": name, "title": name, "status": "skipped",
                            "notes": ["--no-build"]})
    else:
        c.step("kit", "verify and unpack the kit", 180, lambda s: step_kit(c, s), fatal=True)
        if not c.build_failed:
            c.step("configure", "cmake against the kit (SELFSPEC_MPI=OFF)", 240,
                   lambda s: step_configure(c, s), fatal=True)
        if not c.build_failed:
            c.step("build", "build the programs the checks run", args.build_timeout,
                   lambda s: step_build(c, s), fatal=True)
    if not c.build_failed:
        c.step("link_check", "every built program finds its libraries (ldd)", 60,
               lambda s: step_link_check(c, s), fatal=True)
    c.selected = always

    if not c.build_failed and not c.device["present"]:
        progress("no device: " + c.device.get("how", "") + " - the GPU checks do not run")
    checks = []
    for name, title, regex in CTEST_GROUPS:
        checks.append((name, title, 150, lambda s, r=regex: run_ctest_group(c, s, include=r),
                       False))
    rest = "|".join(f"(?:{r})" for _, _, r in CTEST_GROUPS)
    checks.append((CTEST_REST[0], CTEST_REST[1], 240,
                   lambda s: run_ctest_group(c, s, exclude=rest), False))
    checks += [
        ("cli_graph_replay", "selfspec generate: CUDA graphs on == off (tokens)", 150,
         lambda s: step_cli_graphs(c, s), False),
        ("cli_speculative", "selfspec generate: speculative greedy == autoregressive on the GPU",
         150, lambda s: step_cli_speculative(c, s), False),
        ("cli_cpu_vs_gpu", "selfspec generate: GPU vs CPU greedy tokens (information)", 120,
         lambda s: step_cli_cpu_vs_gpu(c, s), True),
        ("bench_7b_graphs_on", "decode bench, LLaMA-2-7B geometry, bf16, CUDA graphs on", 200,
         lambda s: step_decode_bench(c, s, "on"), False),
        ("bench_7b_graphs_off", "decode bench, LLaMA-2-7B geometry, bf16, CUDA graphs off", 200,
         lambda s: step_decode_bench(c, s, "off"), False),
        ("kernel_bench", "cuda_kernel_bench (GB/s, TFLOP/s against the device peak)", 180,
         lambda s: step_kernel_bench(c, s), False),
        ("nccl_bench", "nccl_bench, one rank (all-reduce latency at decode sizes)", 120,
         lambda s: step_nccl_bench(c, s), False),
    ]
    for name, title, bound, fn, info in checks:
        c.step(name, title, bound, fn, info=info, needs_device=True)

    c.final = c.verdict()
    c.write_reports()
    code, summary = c.final
    stream = sys.stderr
    stream.write(f"check.sh: {RESULTS[code]} (exit {code}): {summary}\n"
                 f"check.sh: reports in {os.path.join(c.outdir, 'check.md')} and check.json\n")
    if code == EXIT_NO_DEVICE:
        stream.write("check.sh: no device - nothing was checked on a GPU; this is not a pass\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
