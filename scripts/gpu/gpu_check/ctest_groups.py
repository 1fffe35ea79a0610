"""The ctest checks: `ctest -L gpu` in groups, riskiest first (the newest and least exercised GPU
code), each a step that fails on a failed, unstarted or (with a GPU present) skipped test."""

import os

from .ctest_results import parse_ctest_stdout, parse_junit

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
    ("ctest_token_count_invariance", "token-count invariance bit for bit (GEMV, attention, rows)",
     r"TokenCountInvariant|QueryIsBitIdenticalAloneOrInABatch|VerificationRowsAreBitIdentical"
     r"|VectorAndScalarLoadPathsAreBitIdentical"),
    ("ctest_backend_vs_cpu", "CUDA backend vs CPU backend (logits, KV rollback, row compaction)",
     r"CudaBackendTest\.(LogitsMatchTheCpuBackend|KvCacheAfterRollback)|CudaKvCacheKeepRows"),
    ("ctest_graph_replay", "CUDA graph replays vs eager launches, bit for bit",
     r"CudaBackendTest\.GraphReplays"),
    ("ctest_speculative_lossless", "self-speculative greedy == autoregressive (backend)",
     r"CudaBackendTest\.SelfSpeculativeGreedy"),
    ("ctest_device_verification",
     "device-side verification: shard-walk kernels vs CPU, decisions vs the host path",
     r"CudaShardWalk\.|CudaBackendTest\.DeviceSideVerification"),
]
CTEST_REST = ("ctest_gpu_rest", "every other test labelled gpu")


def rest_pattern():
    """The regex of every group's tests: CTEST_REST excludes it."""
    return "|".join(f"(?:{r})" for _, _, r in CTEST_GROUPS)


def run_ctest_group(c, s, include=None, exclude=None):
    ctest = c.tools.get("ctest")
    if not ctest:
        s.fail("no ctest")
        return
    junit = os.path.join(c.outdir, "raw", f"{s.name}.xml")
    if os.path.exists(junit):
        os.remove(junit)
    rc, out = s.run(ctest_command(c, ctest, junit, include, exclude), capture=True)
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
