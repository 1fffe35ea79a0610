"""Tests scripts/dev/llama_cpp_batched_bench.py, the parsing and JSON work of
scripts/dev/llama_cpp_batched_bench.sh.

The parser on output captured from the pinned llama-batched-bench (SmolLM2-135M Q4_1, 2 threads,
128 prompt and 32 generated tokens per sequence), and each way record refuses output that is not
the row asked for (another B, threads or prompt, a shared prompt, no row or two, a broken or
incomplete JSON line, a speed that disagrees with its tokens and time, a zero time); summary;
meta; report on two rounds at two batch sizes (medians, the gain over B=1, the load warning, the
markdown table); the command line. Then the script itself, offline, with a fake llama.cpp build
(no llama.cpp, no model): the runs in alternating order, the files it writes and the table it
prints, and its errors (a missing GGUF, a failing run, output without the row). Standard library
only.

    python3 tests/scripts/llama_cpp_batched_bench_test.py
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kHelper = os.path.join(kRepo, "scripts", "dev", "llama_cpp_batched_bench.py")
kScript = os.path.join(kRepo, "scripts", "dev", "llama_cpp_batched_bench.sh")
sys.path.insert(0, os.path.join(kRepo, "scripts", "dev"))

import llama_cpp_batched_bench as bb  # noqa: E402

kBuild = {"package": "llama-cpp-python", "version": "0.3.36", "llama_cpp_commit": "0c1e57098"}

# Captured: the stdout of `llama-batched-bench -m SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -npp 128
# -ntg 32 -npl 2 -c 512 --output-format jsonl` (llama.cpp 0c1e57098), its row and the blank line
# after it, on a loaded machine.
kCapturedB2 = (
    '{"n_kv_max": 512, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1, "is_pp_shared": 0, '
    '"n_gpu_layers": -1, "n_threads": 2, "n_threads_batch": 2, "pp": 128, "tg": 32, "pl": 2, '
    '"n_kv": 320, "t_pp": 2.766910, "speed_pp": 92.521980, "t_tg": 2.362672, '
    '"speed_tg": 27.087975, "t": 5.129582, "speed": 62.383247}\n'
    "\n")
# The same with -npl 8 -c 2048.
kCapturedB8 = (
    '{"n_kv_max": 2048, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1, "is_pp_shared": 0, '
    '"n_gpu_layers": -1, "n_threads": 2, "n_threads_batch": 2, "pp": 128, "tg": 32, "pl": 8, '
    '"n_kv": 1280, "t_pp": 9.064001, "speed_pp": 112.974388, "t_tg": 12.297583, '
    '"speed_tg": 20.817099, "t": 21.361584, "speed": 59.920650}\n'
    "\n")


def make_row(b, pp=8, tg=4, threads=2, t_pp=0.5, t_tg=2.0, **changes):
    """A llama-batched-bench JSONL row whose speeds agree with its tokens and times."""
    row = {"n_kv_max": b * 256, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1,
           "is_pp_shared": 0, "n_gpu_layers": -1, "n_threads": threads,
           "n_threads_batch": threads, "pp": pp, "tg": tg, "pl": b, "n_kv": b * (pp + tg),
           "t_pp": t_pp, "speed_pp": b * pp / t_pp, "t_tg": t_tg, "speed_tg": b * tg / t_tg,
           "t": t_pp + t_tg, "speed": b * (pp + tg) / (t_pp + t_tg)}
    row.update(changes)
    return row


def captured(function, *args):
    """function(*args)'s stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function(*args)
    return out.getvalue()


class RecordTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, text, name="raw.jsonl"):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def record(self, text, b=2, threads=2, prompt=128, gen=32):
        raw = self.write(text)
        line = captured(bb.record, raw, "1", str(b), str(threads), str(prompt), str(gen),
                        "0.5 0.4 0.3", "0.6 0.5 0.4", "2026-01-02T03:04:05Z", "5.250")
        return json.loads(line), line

    def refused(self, text, **kwargs):
        with self.assertRaises(SystemExit) as caught:
            self.record(text, **kwargs)
        message = caught.exception.code
        self.assertTrue(message.startswith("llama_cpp_batched_bench: error: "), message)
        return message

    def test_parse_captured(self):
        rows = bb.parse_rows("some log line\n" + kCapturedB2 + kCapturedB8, "sample")
        self.assertEqual([r["pl"] for r in rows], [2, 8])
        self.assertEqual(rows[0]["speed_tg"], 27.087975)
        self.assertEqual(bb.parse_rows("\n\nno rows here\n", "empty"), [])

    def test_record_captured(self):
        run, line = self.record(kCapturedB2)
        self.assertEqual(line, json.dumps(run, sort_keys=True) + "\n")
        self.assertEqual((run["round"], run["concurrency"], run["threads"], run["prompt_tokens"],
                          run["gen_tokens"], run["n_kv"], run["wall_s"], run["started"]),
                         (1, 2, 2, 128, 32, 320, 5.25, "2026-01-02T03:04:05Z"))
        self.assertEqual((run["prefill_s"], run["prefill_tokens_per_s"], run["gen_s"],
                          run["gen_tokens_per_s"], run["total_s"], run["total_tokens_per_s"]),
                         (2.76691, 92.52198, 2.362672, 27.087975, 5.129582, 62.383247))
        self.assertAlmostEqual(run["gen_tokens_per_s_per_sequence"], 27.087975 / 2)
        self.assertAlmostEqual(run["gen_tokens_per_s_incl_prefill"], 64 / 5.129582)
        self.assertEqual(run["raw_file"], os.path.join(self.tmp.name, "raw.jsonl"))
        self.assertEqual(run["row"], json.loads(kCapturedB2))
        self.assertEqual((run["loadavg_before"], run["loadavg_after"]),
                         ("0.5 0.4 0.3", "0.6 0.5 0.4"))
        run, _ = self.record(kCapturedB8, b=8)
        self.assertAlmostEqual(run["gen_tokens_per_s_per_sequence"], 20.817099 / 8)

    def test_refusals(self):
        self.assertIn("the row has pl = 2, asked 4", self.refused(kCapturedB2, b=4))
        self.assertIn("the row has n_threads = 2, asked 1", self.refused(kCapturedB2, threads=1))
        self.assertIn("the row has pp = 128, asked 64", self.refused(kCapturedB2, prompt=64))
        self.assertIn("the row has tg = 32, asked 16", self.refused(kCapturedB2, gen=16))
        self.assertIn("the row has is_pp_shared = 1, asked 0",
                      self.refused(json.dumps(make_row(2, is_pp_shared=1)), prompt=8, gen=4))
        self.assertIn("expected one result row, found 0", self.refused("\n"))
        self.assertIn("expected one result row, found 2",
                      self.refused(kCapturedB2 + kCapturedB2))
        self.assertIn("line 1 is not JSON", self.refused('{"n_kv_max": 512,\n'))
        self.assertIn("line 1 lacks n_kv_max", self.refused('{"pl": 2}'))
        self.assertIn("lacks speed_tg, t, speed", self.refused(
            json.dumps({k: v for k, v in make_row(2).items()
                        if k not in ("speed_tg", "t", "speed")})))
        self.assertIn("gen_tokens_per_s is 9.0, but 8 tokens in 2.0 s make 4.000",
                      self.refused(json.dumps(make_row(2, speed_tg=9.0)), prompt=8, gen=4))
        self.assertIn("t_tg is 0, expected a positive number",
                      self.refused(json.dumps(dict(make_row(2), t_tg=0)), prompt=8, gen=4))
        self.assertIn("cannot read the output",
                      self.refused_missing_file())

    def refused_missing_file(self):
        with self.assertRaises(SystemExit) as caught:
            captured(bb.record, os.path.join(self.tmp.name, "none"), "1", "2", "2", "8", "4",
                     "0 0 0", "0 0 0", "t", "1")
        return caught.exception.code

    def test_summary(self):
        _, line = self.record(kCapturedB2)
        self.assertEqual(captured(bb.summary, line),
                         "round 1 B=2: prefill 92.5 tok/s, generation 27.09 tok/s aggregate "
                         "(13.54 per sequence) (load 0.5 0.4 0.3 -> 0.6 0.5 0.4, 5.2 s)\n")

    def test_stats(self):
        self.assertEqual(bb.stats([3.0, 1.0, 2.0]),
                         {"median": 2.0, "min": 1.0, "max": 3.0, "samples": [3.0, 1.0, 2.0]})


class ReportTest(unittest.TestCase):
    def test_meta_and_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            gguf, build = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "build.json")
            with open(gguf, "wb") as f:
                f.write(bytes(3 * 2**20))
            with open(build, "w") as f:
                json.dump(kBuild, f)
            meta = os.path.join(tmp, "meta.json")
            bb.meta(meta, build, gguf, "2", "1,2", "2", "8", "4", "/l/llama-batched-bench",
                    "-Made-up CPU", "batched_bench.sh m.gguf out", "2026-01-02T03:04:05Z")
            with open(meta, encoding="utf-8") as f:
                description = json.load(f)
            self.assertEqual((description["threads"], description["concurrency"],
                              description["rounds"], description["prompt"], description["gen"],
                              description["gguf_bytes"], description["nproc"],
                              description["cpu"]),
                             (2, [1, 2], 2, 8, 4, 3 * 2**20, os.cpu_count(), "-Made-up CPU"))
            self.assertEqual(description["llama_cpp_build"], kBuild)
            description["nproc"] = 4  # the load below passes it: the warning
            with open(meta, "w") as f:
                json.dump(description, f)

            runs = []
            for round_ in (1, 2):
                for b in (1, 2):
                    # generation: 4 s for B=1, 2 s (round 1) or 4 s (round 2) for B=2
                    t_tg = 4.0 if b == 1 else 2.0 * round_
                    raw = os.path.join(tmp, f"r{round_}-b{b}.jsonl")
                    with open(raw, "w") as f:
                        f.write(json.dumps(make_row(b, t_tg=t_tg)) + "\n\n")
                    load = "5.00 1 1" if round_ == 2 else "0.50 1 1"
                    runs.append(captured(bb.record, raw, str(round_), str(b), "2", "8", "4",
                                         load, load, "t", "1.0"))
            runs_jsonl = os.path.join(tmp, "runs.jsonl")
            with open(runs_jsonl, "w") as f:
                f.write("".join(runs))
            bb.report(runs_jsonl, tmp, meta)
            with open(os.path.join(tmp, "batched_bench.json"), encoding="utf-8") as f:
                result = json.load(f)
            row = result["rows"][1]
            self.assertEqual((row["concurrency"], row["prompt_tokens"], row["gen_tokens"],
                              row["n_kv"]), (2, 8, 4, 24))
            # S_TG = 2*4/2 = 4 and 2*4/4 = 2: median 3; each figure's median is its own (the
            # incl. prefill one of 8/2.5 and 8/4.5, not 8 over the median total time)
            self.assertEqual(row["gen_tokens_per_s"],
                             {"median": 3.0, "min": 2.0, "max": 4.0, "samples": [4.0, 2.0]})
            self.assertEqual(row["gen_tokens_per_s_per_sequence"]["median"], 1.5)
            self.assertEqual(row["gen_tokens_per_s_over_b1"], 3.0)
            self.assertEqual(result["rows"][0]["gen_tokens_per_s_over_b1"], 1.0)
            self.assertEqual(result["machine"], {"cpu": "-Made-up CPU", "nproc": 4,
                                                 "loadavg_1min_min": 0.5,
                                                 "loadavg_1min_max": 5.0, "loaded": True})
            self.assertEqual(result["model"], {"gguf": gguf, "file_name": "m.gguf",
                                               "file_bytes": 3 * 2**20})
            self.assertEqual(result["llama_cpp"]["commit"], "0c1e57098")
            self.assertEqual(result["settings"]["ctx_per_sequence"], 256)
            self.assertEqual(result["settings"]["n_kv_max"], [256, 512])
            self.assertEqual(len(result["runs"]), 4)
            with open(os.path.join(tmp, "batched_bench.md"), encoding="utf-8") as f:
                markdown = f.read()
            self.assertTrue(markdown.startswith(
                "## llama.cpp batched decoding (llama-batched-bench)\n"))
            self.assertIn("- model: `m.gguf` (3.0 MiB, 3145728 bytes;", markdown)
            self.assertIn("commit 0c1e57098 (llama-cpp-python==0.3.36), `llama-batched-bench "
                          "-t 2 -npp 8 -ntg 4 -npl B -c B*256 --output-format jsonl`", markdown)
            self.assertIn("**warning**: the 1-minute load average reached 5.00 on 4 CPUs",
                          markdown)
            self.assertIn("| 1 | 0.500 | 16.00 | 4.000 | 1.00 | 1.00 | 1.00 | 0.89 | 4.500 "
                          "| 2.67 |", markdown)
            self.assertTrue(markdown.endswith(
                "| 2 | 0.500 | 32.00 | 3.000 | 3.00 | 1.50 | 3.00 | 2.49 | 3.500 | 7.47 |\n"),
                markdown)

            # without B=1 there is no gain column; a missing run makes report refuse
            description["concurrency"] = [2]
            with open(meta, "w") as f:
                json.dump(description, f)
            with open(runs_jsonl, "w") as f:
                f.write(runs[1] + runs[3])
            bb.report(runs_jsonl, tmp, meta)
            with open(os.path.join(tmp, "batched_bench.md"), encoding="utf-8") as f:
                self.assertIn("| 3.00 | 1.50 | - | 2.49 |", f.read())
            with open(runs_jsonl, "w") as f:
                f.write(runs[1])
            with self.assertRaises(SystemExit) as caught:
                bb.report(runs_jsonl, tmp, meta)
            self.assertEqual(caught.exception.code,
                             "llama_cpp_batched_bench: error: B=2: 1 runs, expected 2")


class CommandLineTest(unittest.TestCase):
    def run_helper(self, *args):
        return subprocess.run([sys.executable, kHelper, *args], capture_output=True, text=True,
                              timeout=60)

    def test_errors(self):
        done = self.run_helper("plot")
        self.assertEqual((done.returncode, done.stderr),
                         (1, "llama_cpp_batched_bench: error: unknown command plot\n"))
        done = self.run_helper("summary")
        self.assertEqual(done.returncode, 1)
        self.assertIn("summary takes 1 arguments, got 0", done.stderr)
        done = self.run_helper()
        self.assertEqual(done.returncode, 1)
        self.assertIn("no command", done.stderr)


kFakeBatchedBench = """#!{python}
# A fake llama-batched-bench: -m GGUF -t T -npp P -ntg G -npl B -c C --output-format jsonl prints
# one row (and a blank line) on stdout, a log line on stderr. $FAKE_MODE: "fail" exits 3,
# "norow" prints no row.
import json, os, sys
a = sys.argv[1:]
opt = dict(zip(a[0::2], a[1::2]))
assert opt["--output-format"] == "jsonl", a
t, pp, tg, b, c = (int(opt[k]) for k in ("-t", "-npp", "-ntg", "-npl", "-c"))
print("fake llama-batched-bench log", file=sys.stderr)
mode = os.environ.get("FAKE_MODE", "")
if mode == "fail":
    sys.exit(3)
if mode != "norow":
    t_pp, t_tg = 0.5, 4.0 / b ** 0.5
    print(json.dumps({"n_kv_max": c, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1,
                      "is_pp_shared": 0, "n_gpu_layers": -1, "n_threads": t,
                      "n_threads_batch": t, "pp": pp, "tg": tg, "pl": b, "n_kv": b * (pp + tg),
                      "t_pp": t_pp, "speed_pp": b * pp / t_pp, "t_tg": t_tg,
                      "speed_tg": b * tg / t_tg, "t": t_pp + t_tg,
                      "speed": b * (pp + tg) / (t_pp + t_tg)}))
print()
"""


class ScriptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        tmp = self.tmp.name
        bin_dir = os.path.join(tmp, "llama", "build", "bin")
        os.makedirs(bin_dir)
        tools = {"llama-batched-bench": kFakeBatchedBench, "llama-bench": "#!/bin/sh\n",
                 "llama-simple": "#!/bin/sh\n", "llama-tokenize": "#!/bin/sh\n"}
        for name, text in tools.items():
            path = os.path.join(bin_dir, name)
            with open(path, "w") as f:
                f.write(text.replace("{python}", sys.executable))
            os.chmod(path, 0o755)
        with open(os.path.join(tmp, "llama", "build", "selfspec-build.json"), "w") as f:
            json.dump(kBuild, f)
        with open(os.path.join(tmp, "m.gguf"), "wb") as f:
            f.write(bytes(100))

    def run_script(self, *args, mode=""):
        env = dict(os.environ, SELFSPEC_LLAMACPP_DIR=os.path.join(self.tmp.name, "llama"),
                   FAKE_MODE=mode)
        return subprocess.run(["bash", kScript, *args], capture_output=True, text=True,
                              cwd=self.tmp.name, env=env, stdin=subprocess.DEVNULL, timeout=120)

    def test_script(self):
        done = self.run_script("m.gguf", "out", "--threads", "3", "--concurrency", "1,2,4",
                               "--rounds", "2", "--prompt", "8", "--gen", "4")
        self.assertEqual(done.returncode, 0, done.stderr)
        out = os.path.join(self.tmp.name, "out")
        with open(os.path.join(out, "batched_bench.md"), encoding="utf-8") as f:
            self.assertEqual(done.stdout, f.read())
        self.assertIn("`llama-batched-bench -t 3 -npp 8 -ntg 4 -npl B -c B*256 --output-format "
                      "jsonl`", done.stdout)
        # S_TG = B*4/(4/sqrt(B)): 1, 2.83, 8
        self.assertIn("| 4 | 0.500 | 64.00 | 2.000 | 8.00 | 2.00 | 8.00 | 6.40 | 2.500 "
                      "| 19.20 |", done.stdout)
        with open(os.path.join(out, "batched_bench.json"), encoding="utf-8") as f:
            result = json.load(f)
        self.assertEqual({k: result["settings"][k] for k in
                          ("threads", "concurrency", "rounds", "prompt", "gen")},
                         {"threads": 3, "concurrency": [1, 2, 4], "rounds": 2, "prompt": 8,
                          "gen": 4})
        self.assertEqual(result["model"]["file_name"], "m.gguf")
        self.assertEqual(result["model"]["file_bytes"], 100)
        # B ascending in round 1, descending in round 2; -c is B x 256 (8 + 4 padded)
        order = [(r["round"], r["concurrency"]) for r in result["runs"]]
        self.assertEqual(order, [(1, 1), (1, 2), (1, 4), (2, 4), (2, 2), (2, 1)])
        self.assertEqual([r["row"]["n_kv_max"] for r in result["runs"][:3]], [256, 512, 1024])
        files = sorted(os.listdir(os.path.join(out, "runs")))
        self.assertEqual(len(files), 6 * 2 + 2)
        self.assertIn("r2-b4.jsonl", files)
        with open(os.path.join(out, "runs", "r2-b4.log"), encoding="utf-8") as f:
            log = f.read()
        self.assertIn(" -t 3 -npp 8 -ntg 4 -npl 4 -c 1024 --output-format jsonl", log)
        self.assertIn("fake llama-batched-bench log", log)
        self.assertIn("round 2 B=4: prefill 64.0 tok/s, generation 8.00 tok/s aggregate",
                      done.stderr)

    def test_errors(self):
        done = self.run_script("missing.gguf", "out")
        self.assertEqual(done.returncode, 1)
        self.assertIn("llama_cpp_batched_bench: error: GGUF missing.gguf: no such file",
                      done.stderr)
        done = self.run_script("m.gguf", "out", "--concurrency", "1,0")
        self.assertEqual(done.returncode, 1)
        self.assertIn("--concurrency entry must be a positive integer, got '0'", done.stderr)
        done = self.run_script("m.gguf", "out", "--concurrency", "2,2")
        self.assertEqual(done.returncode, 1)
        self.assertIn("repeats a value", done.stderr)
        done = self.run_script("m.gguf", "out", "--bogus", "1")
        self.assertEqual(done.returncode, 1)
        self.assertIn("unknown option --bogus", done.stderr)
        done = self.run_script("m.gguf")
        self.assertEqual(done.returncode, 2)
        self.assertIn("usage:", done.stderr)
        done = self.run_script("m.gguf", "out", "--concurrency", "1", mode="fail")
        self.assertEqual(done.returncode, 1)
        self.assertIn("llama-batched-bench failed (round 1, B=1), exit 3; see ", done.stderr)
        done = self.run_script("m.gguf", "out", "--concurrency", "1", mode="norow")
        self.assertEqual(done.returncode, 1)
        self.assertIn("expected one result row, found 0", done.stderr)
        self.assertIn("cannot parse llama-batched-bench's output (round 1, B=1)", done.stderr)


if __name__ == "__main__":
    unittest.main()
