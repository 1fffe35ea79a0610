"""The GPU checks: ctest -L gpu in groups (riskiest first), selfspec generate comparisons (CUDA
graphs on == off, speculative == autoregressive, GPU vs CPU) and the benches (decode,
cuda_kernel_bench, nccl_bench)."""

import json
import os
import re
import xml.etree.ElementTree as ET

from .machine import REPO, last_json_line

# ---- ctest ----
# The ctest checks: `ctest -L gpu` in groups, riskiest first (the newest and least exercised GPU
# code), each a step that fails on a failed, unstarted or (with a GPU present) skipped test.

# name, title, regex over ctest test names. A last group (CTEST_REST) runs every gpu test none of
# these took.
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
    ("ctest_token_count_invariance",
     "token-count invariance bit for bit (GEMV on both kernels and its fused forms, attention, "
     "rows; up to 64 tokens, trees)",
     r"TokenCountInvariant|QueryIsBitIdenticalAloneOrInABatch|VerificationRowsAreBitIdentical"
     r"|VectorAndScalarLoadPathsAreBitIdentical|VerificationsOfUpTo64Tokens"
     r"|TreeNodeRowsAreBitIdentical|TreeQueryIsBitIdentical|SeveralMatricesInOneLaunch"
     r"|AWorkspaceSharedByCalls|SwigluEpilogueEqualsTheTwoProducts|CudaFusedGemvTest\."
     r"|CudaTensorPipelineTest\."),
    ("ctest_backend_vs_cpu", "CUDA backend vs CPU backend (logits, KV rollback, row compaction)",
     r"CudaBackendTest\.(LogitsMatchTheCpuBackend|KvCacheAfterRollback)|CudaKvCacheKeepRows"),
    ("ctest_graph_replay",
     "CUDA graph replays vs eager launches, dependent (PDL) vs plain launches, bit for bit",
     r"CudaBackendTest\.GraphReplays|CudaLaunchOrder\."),
    ("ctest_speculative_lossless",
     "self-speculative greedy == autoregressive (backend; chains, trees of up to 64 nodes)",
     r"CudaBackendTest\.SelfSpeculativeGreedy|CudaBackendTest\.SelfSpeculativeTrees"),
    ("ctest_gguf_native",
     "GGUF formats as stored: quantizer and quantized GEMV vs the CPU's bits, embedding, a GGUF "
     "model end to end",
     r"CudaQuantizeActivations|CudaQuantMatmul|CudaGgufModel|CudaDraftWeights"),
    ("ctest_two_ranks_one_gpu",
     "two tensor-parallel ranks as threads sharing the GPU: sharded forwards, vocab-sharded "
     "logits, device-side verification, lossless at TP 2",
     r"CudaMultiRank"),
    ("ctest_device_verification",
     "device-side verification: shard-walk kernels vs CPU, decisions vs the host path",
     r"CudaShardWalk\.|CudaBackendTest\.DeviceSideVerification"),
]
CTEST_REST = ("ctest_gpu_rest", "every other test labelled gpu")


def rest_pattern():
    """The regex of every group's tests: CTEST_REST excludes it. The groups' alternatives are
    joined without wrapping: CMake's regular expressions (ctest -E) take at most 10 groups and no
    (?:...), and a pattern they cannot compile excludes nothing (the first GPU run's rest step
    re-ran all 62 tests)."""
    return "|".join(r for _, _, r in CTEST_GROUPS)


# The groups run again with programmatic dependent launch off (SELFSPEC_CUDA_PDL=0): the same
# bits must come out, and a failure that only shows with it on points at a launch-order race.
PDL_OFF_PATTERN = "|".join(r for name, _, r in CTEST_GROUPS
                           if name in ("ctest_token_count_invariance",
                                       "ctest_speculative_lossless", "ctest_graph_replay",
                                       "ctest_tree_mask_attention"))


# The groups run again with the bf16 GEMVs on the tensor cores (SELFSPEC_CUDA_GEMV=tensor-cores):
# auto is the CUDA cores, so this is where the models take the fused forms (norm folded into
# Q|K|V and gate|up, residual add into o and down) and must stay lossless.
TENSOR_CORES_PATTERN = "|".join(r for name, _, r in CTEST_GROUPS
                                if name in ("ctest_token_count_invariance",
                                            "ctest_speculative_lossless", "ctest_graph_replay",
                                            "ctest_backend_vs_cpu"))


def run_ctest_group(c, s, include=None, exclude=None, env=None):
    ctest = c.tools.get("ctest")
    if not ctest:
        s.fail("no ctest")
        return
    junit = os.path.join(c.outdir, "raw", f"{s.name}.xml")
    if os.path.exists(junit):
        os.remove(junit)
    rc, out = s.run(ctest_command(c, ctest, junit, include, exclude), capture=True, env=env)
    tests = parse_junit(junit)
    if tests is None:
        tests = parse_ctest_stdout(out)
    bad = [t["name"] for t in tests if t["outcome"] in ("failed", "not run")]
    skipped = [t["name"] for t in tests if t["outcome"] == "skipped"]
    record_tests(s, tests, bad, skipped)
    judge_tests(s, tests, bad, skipped, rc)


def ctest_command(c, ctest, junit, include, exclude):
    jobs = max(1, min(4, len(os.sched_getaffinity(0))))
    args = [ctest, "--test-dir", c.build, "-L", "gpu", "--output-on-failure", "--timeout", "120",
            "-j", str(jobs), "--output-junit", junit]
    if include:
        args += ["-R", include]
    if exclude:
        args += ["-E", exclude]
    return args


def record_tests(s, tests, bad, skipped):
    """The step's figures: how many tests had each outcome, which did not pass, and why."""
    counts = {}
    for t in tests:
        counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
    s.figures.update({k: v for k, v in sorted(counts.items())})
    s.figures["tests"] = len(tests)
    if bad:
        s.figures["failed_tests"] = bad
    if skipped:
        s.figures["skipped_tests"] = skipped
    details = [f"{t['name']}: {t['detail']}" for t in tests if t.get("detail")]
    if details:
        s.figures["details"] = details[:10]


def judge_tests(s, tests, bad, skipped, rc):
    """Fails the step on a failed or unstarted test (bad), a skipped one or no test at all."""
    if not tests:
        s.fail("no test matched: the group's pattern no longer names a gpu test")
    elif bad:
        s.fail(f"{len(bad)} test(s) failed: " + ", ".join(bad[:8]))
    elif skipped:
        s.fail(f"{len(skipped)} test(s) skipped with a GPU present (the tests could not use it)")
    elif rc != 0:
        s.fail(f"ctest exited with {rc}")


# Each test's outcome in a ctest run: from its JUnit XML (--output-junit), else from its stdout.

def parse_junit(path):
    """[{name, outcome, time_s, detail (not when passed)}], or None without a readable file."""
    tests = []
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None
    for case in root.iter("testcase"):
        outcome = junit_outcome(case)
        test = {"name": case.get("name"), "outcome": outcome,
                "time_s": float(case.get("time") or 0.0)}
        if outcome != "passed":
            test["detail"] = gtest_detail(case.findtext("system-out") or "")
        tests.append(test)
    return tests


def junit_outcome(case):
    """passed, failed, skipped or not run."""
    status = case.get("status", "run")
    skipped = case.find("skipped")
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    if skipped is not None or status in ("notrun", "disabled"):
        # CTest marks a test that skipped itself (SKIP_REGULAR_EXPRESSION, SKIP_RETURN_CODE)
        # and one it could not start alike ("notrun"); the message tells them apart.
        message = (skipped.get("message", "") if skipped is not None else "").lower()
        return "skipped" if "skip" in message or status == "disabled" else "not run"
    if status == "fail":
        return "failed"
    return "passed"


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
    """[{name, outcome}] from ctest's progress lines."""
    tests = []
    for line in text.splitlines():
        m = re.match(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\s*(\*{0,3}[A-Za-z ]+?)\s+[\d.]+ sec",
                     line)
        if m:
            word = m.group(2).strip("* ").lower()
            outcome = {"passed": "passed", "skipped": "skipped", "not run": "not run"}.get(
                word, "failed")
            tests.append({"name": m.group(1), "outcome": outcome})
    return tests


# ---- selfspec generate ----
# selfspec generate as the generate checks run it: on a real trained model (stories260K, when the
# kit carries one: pack.sh --model DIR) and a synthetic bf16 GQA model made on the machine, with
# prompts of token ids (no tokenizer needed); each distinct run once (the checks share them).

GEN_TOKENS = 96
SYNTH_MODEL_ARGS = ["--layers", "4", "--hidden", "256", "--heads", "8", "--kv-heads", "2",
                    "--intermediate", "688", "--vocab", "2048", "--dtype", "bf16", "--seed", "7"]
SPEC_VARIANTS = [
    ("layer-skip chain", ["--spec", "layer-skip", "--skip-uniform", "0.2"]),
    ("layer-skip tree", ["--spec", "layer-skip", "--skip-uniform", "0.2", "--tree", "swift"]),
]


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
        rc, _ = s.run([c.program("selfspec"), "make-model", "--out", synth] + SYNTH_MODEL_ARGS,
                      timeout=120)
        if rc != 0:
            s.fail(f"selfspec make-model exited with {rc}")
            return models
    models.append(("synthetic GQA bf16", synth, [], "1,5,900,17,1500,33"))
    return models


def generate(c, s, model, extra, prompt, device="cuda", graphs="on", spec=()):
    """selfspec generate's JSON result (greedy, GEN_TOKENS tokens), or None (the step failed)."""
    key = (model, tuple(extra), prompt, device, graphs, tuple(spec))
    if key in c.gen_cache:
        return c.gen_cache[key]
    args = [c.program("selfspec"), "generate", "--model", model, "--prompt-ids", prompt,
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
    """The first position where the token lists a and b differ, or None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


# The generate checks on the GPU: CUDA graphs on == off, speculative greedy == autoregressive
# (lossless), and GPU vs CPU greedy tokens (information only).

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
    s.note("informational: GPU and CPU reductions differ in order, and with bf16 weights the CPU "
           "rounds activations to bf16 while the GPU keeps them in f32, so greedy runs may part "
           "at a near tie (the logits are compared with tolerances in ctest_backend_vs_cpu)")


# ---- benches ----
# The bench checks: selfspec's decode bench on a LLaMA-2-7B-geometry synthetic bf16 model (with
# and without CUDA graphs, against the device's bandwidth), cuda_kernel_bench and nccl_bench; their
# JSON goes to OUTDIR/raw/, their figures to the report.

TIME_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3}


def fresh_raw_file(c, name):
    """OUTDIR/raw/name, removed if an earlier run left it (a program that fails writes none)."""
    out = os.path.join(c.outdir, "raw", name)
    if os.path.exists(out):
        os.remove(out)
    return out


def read_json(s, path, what):
    """The JSON in path, or None (the step failed: no <what>)."""
    try:
        return json.load(open(path))
    except (OSError, ValueError) as e:
        s.fail(f"no {what} ({e})")
        return None


# -- selfspec bench: decode --

def step_decode_bench(c, s, graphs, pdl=True, verify_cost_max=8, model="llama-2-7b",
                      weights="bf16", gen=128, reps=3, kv_dtype="auto", prompt_len=128,
                      gemv="auto", fuse=True):
    """The decode bench of `model`'s geometry (configs/models/<model>.yaml, synthetic weights in
    `weights`: bf16, or a quantized format such as q4_k, run as stored), and v(gamma) for
    gamma = 1 .. verify_cost_max (0: not measured), with programmatic dependent launch on or
    off, a KV cache of kv_dtype (auto: bf16 on the GPU) after prompt_len prompt tokens, bf16
    GEMVs on the kernel `gemv` names (SELFSPEC_CUDA_GEMV: auto, tensor-cores, cuda-cores), with
    the norm and residual add folded into them or not (SELFSPEC_CUDA_FUSE)."""
    label = f"graphs-{graphs}" + ("" if pdl else "-pdl-off")
    if gemv != "auto":
        label += f"-gemv-{gemv}"
    if not fuse:
        label += "-unfused"
    if kv_dtype != "auto" or prompt_len != 128:
        label += f"-kv-{kv_dtype}-ctx-{prompt_len}"
    short = {"llama-2-7b": "7b", "llama-2-70b": "70b"}.get(model, model)
    out = fresh_raw_file(c, f"bench-{short}-{weights}-{label}.json")
    args = [c.program("selfspec"), "bench", "--architecture",
            os.path.join(REPO, "configs", "models", f"{model}.yaml"), "--weights-dtype", weights,
            "--device", "cuda", "--cuda-graphs", graphs, "--prompt-len", str(prompt_len),
            "--gen", str(gen), "--reps", str(reps), "--kv-dtype", kv_dtype, "--json", "--out", out]
    if verify_cost_max > 0:
        args += ["--verify-cost-max", str(verify_cost_max), "--verify-cost-rounds", "3"]
    else:
        args += ["--verify-cost-rounds", "0"]
    env = {}
    if not pdl:
        env["SELFSPEC_CUDA_PDL"] = "0"
    if gemv != "auto":
        env["SELFSPEC_CUDA_GEMV"] = gemv
    if not fuse:
        env["SELFSPEC_CUDA_FUSE"] = "0"
    rc, _ = s.run(args, capture=True, env=env or None)
    if rc != 0:
        s.fail(f"selfspec bench exited with {rc}")
        return
    r = read_json(s, out, "bench JSON")
    if r is None:
        return
    s.figures.update(decode_figures(r))
    device = r.get("device_bandwidth_gbps")
    if not device:
        s.fail("the bench reports no device bandwidth: it did not run on the GPU")
        return
    s.figures.update(device_bandwidth_figures(r, device))
    s.figures["pdl"] = pdl
    s.figures["gemv"] = gemv
    s.figures["fused"] = fuse
    if not fuse:
        record_speedup(c, s.figures, "bench_7b_graphs_on", "fusion_speedup")
    cost = r.get("verify_cost") or {}
    if cost.get("v"):
        s.figures["v_gamma"] = [round(v, 3) for v in cost["v"]]
    if graphs == "off":
        record_graphs_speedup(c, s.figures)
    if not pdl:
        record_speedup(c, s.figures, "bench_7b_graphs_on", "pdl_speedup")
    if r.get("cuda_graphs") != (graphs == "on"):
        s.fail(f"asked for --cuda-graphs {graphs}, the bench reports cuda_graphs "
               f"{r.get('cuda_graphs')}")


# -- the planted demo on the GPU --

def step_planted_demo(c, s):
    """scripts/demo.sh's comparison on the GPU: the planted-redundancy model (made here by
    make-model), its planted skip set, adaptive and Thompson controllers, autoregressive vs
    self-speculative on the same prompts; the speedups (and losslessness) per controller."""
    model = os.path.join(c.work, "models", "planted")
    if not os.path.isfile(os.path.join(model, "skips.json")):
        rc, _ = s.run([c.program("selfspec"), "make-model", "--out", model, "--preset",
                       "planted-redundancy", "--seed", "1"], timeout=120)
        if rc != 0:
            s.fail(f"selfspec make-model --preset planted-redundancy exited with {rc}")
            return
    out = fresh_raw_file(c, "bench-planted-demo.json")
    rc, _ = s.run([c.program("selfspec"), "bench", "--model", model, "--prompt-len", "64", "--gen",
                   "128", "--prompts", "2", "--spec", "layer-skip", "--skip-config",
                   os.path.join(model, "skips.json"), "--controller", "adaptive,thompson",
                   "--device", "cuda", "--json", "--out", out], capture=True)
    if rc != 0:
        s.fail(f"selfspec bench exited with {rc}")
        return
    r = read_json(s, out, "bench JSON")
    if r is None:
        return
    rows = []
    autoregressive = (r.get("autoregressive") or {}).get("decode_tokens_per_s", 0.0)
    for result in r.get("speculative", []):
        rows.append({"controller": result.get("controller"),
                     "speedup": round(result.get("speedup", 0.0), 3),
                     "acceptance_rate": round(result.get("acceptance_rate", 0.0), 3),
                     "mean_accepted_length": round(result.get("mean_accepted_length", 0.0), 2),
                     "autoregressive_tok_s": round(autoregressive, 1),
                     "speculative_tok_s": round(result.get("decode_tokens_per_s", 0.0), 1),
                     "lossless_prompts": result.get("lossless_prompts"),
                     "prompts": r.get("prompts")})
        if not result.get("lossless"):
            s.fail(f"{result.get('controller')}: {result.get('lossless_prompts')} of "
                   f"{r.get('prompts')} prompts lossless")
    s.figures["runs"] = rows
    if not rows:
        s.fail("the bench reports no speculative result")


def decode_figures(r):
    return {
        "backend": r.get("backend"),
        "parameters": r.get("parameters"),
        "load_s": round(r.get("load_s", 0.0), 1),
        "prefill_tok_s": round(r.get("prefill_tokens_per_s", 0.0), 1),
        "decode_tok_s": round(r.get("decode_tokens_per_s", 0.0), 1),
        "decode_ms_per_token": round(r.get("decode_ms_per_token", 0.0), 3),
        "kv_dtype": r.get("kv_dtype"),
        "kv_bytes_per_token": (r.get("bytes_per_decode_token") or {}).get("rank0_kv_cache"),
        "effective_gbps": round((r.get("effective_bandwidth_gbps") or {}).get("all_ranks", 0.0),
                                1),
    }


def device_bandwidth_figures(r, device):
    """The device's measured copy and peak bandwidth, and the fraction of each decode reached."""
    return {
        "device_copy_gbps": round(device.get("measured_copy_all_ranks", 0.0), 1),
        "device_peak_gbps": round(device.get("peak_all_ranks", 0.0), 1),
        "fraction_of_device_copy_bandwidth": round(
            r.get("decode_fraction_of_device_copy_bandwidth", 0.0), 3),
        "fraction_of_device_peak_bandwidth": round(
            r.get("decode_fraction_of_device_peak_bandwidth", 0.0), 3),
        "cuda_graphs": r.get("cuda_graphs"),
    }


def record_graphs_speedup(c, f):
    """graphs_speedup: decode tokens/s with CUDA graphs (the step before) over without (f)."""
    record_speedup(c, f, "bench_7b_graphs_on", "graphs_speedup")


def record_speedup(c, f, reference_step, name):
    """f[name]: decode tokens/s of reference_step over f's."""
    on = [st for st in c.steps if st["name"] == reference_step and st.get("figures")]
    if on and on[0]["figures"].get("decode_tok_s") and f["decode_tok_s"]:
        f[name] = round(on[0]["figures"]["decode_tok_s"] / f["decode_tok_s"], 3)


# -- cuda_kernel_bench --

def step_kernel_bench(c, s):
    out = fresh_raw_file(c, "cuda_kernel_bench.json")
    args = [c.program("cuda_kernel_bench"), f"--benchmark_out={out}",
            "--benchmark_out_format=json", "--benchmark_min_time=0.05"]
    rc, text = s.run(args, capture=True)
    if "no CUDA device" in text or "cannot query the CUDA device" in text:
        s.fail("cuda_kernel_bench found no usable CUDA device")
        return
    if rc != 0:
        s.fail(f"cuda_kernel_bench exited with {rc}")
    r = read_json(s, out, "benchmark JSON")
    if r is None:
        return
    rows, errors = kernel_rows(r)
    s.figures["device"] = (r.get("context") or {}).get("device")
    s.figures["peak_gbps"] = (r.get("context") or {}).get("peak_bandwidth_GBps")
    s.figures["benchmarks"] = rows
    if errors:
        s.fail(f"{len(errors)} benchmark(s) ended with an error: " + "; ".join(errors[:5]))
    if not rows:
        s.fail("no benchmark result")


def kernel_rows(r):
    """([{name, time_us, GB/s, fraction_of_peak, TFLOP/s}], [errors]) of Google Benchmark JSON."""
    rows = []
    errors = []
    for b in r.get("benchmarks", []):
        if b.get("error_occurred"):
            errors.append(f"{b.get('name')}: {b.get('error_message')}")
            continue
        time_us = b.get("real_time", 0.0) * TIME_UNIT_US.get(b.get("time_unit", "ns"), 1.0)
        row = {"name": b.get("name"), "time_us": round(time_us, 2)}
        if "GB/s" in b:
            row["GB/s"] = round(b["GB/s"], 1)
            if b.get("peak_GB/s"):
                row["fraction_of_peak"] = round(b["GB/s"] / b["peak_GB/s"], 3)
        if "TFLOP/s" in b:
            row["TFLOP/s"] = round(b["TFLOP/s"], 1)
        rows.append(row)
    return rows, errors


# -- nccl_bench --

def step_nccl_bench(c, s):
    out = fresh_raw_file(c, "nccl_bench.json")
    args = [c.program("nccl_bench"), "--iters", "100", "--warmup", "10", "--out", out]
    rc, text = s.run(args, capture=True)
    if "nothing to measure" in text:
        s.fail("nccl_bench found nothing to measure (no usable GPU, or built without CUDA)")
        return
    if rc != 0:
        s.fail(f"nccl_bench exited with {rc}")
        return
    r = read_json(s, out, "nccl_bench JSON")
    if r is None:
        return
    s.figures["nccl_version"] = r.get("nccl_version")
    s.figures["ranks"] = r.get("ranks")
    s.figures["results"] = [{k: row.get(k) for k in ("hidden", "dtype", "tokens", "bytes",
                                                      "stream_us", "graph_us")}
                            for row in r.get("results", [])]
