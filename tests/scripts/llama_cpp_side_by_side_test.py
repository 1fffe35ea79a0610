"""Tests scripts/dev/llama_cpp_side_by_side.py, the JSON work of
scripts/dev/llama_cpp_side_by_side.sh.

record on made-up llama-bench (a pp and a tg test) and selfspec bench output, and each way it
refuses output that is not what was asked (threads, test counts, an interrupted run, missing or
non-positive figures, unreadable JSON, an unknown engine); summary; meta; report on two rounds
at two thread counts (medians, ratios, the load warning, the markdown table); the command line
(unknown command, wrong argument count, a label starting with a dash). Then the script itself,
offline, with a fake llama.cpp build and a fake selfspec: two interleaved rounds, the files it
writes and the table it prints, from another working directory. Standard library only.

    python3 tests/scripts/llama_cpp_side_by_side_test.py
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
kHelper = os.path.join(kRepo, "scripts", "dev", "llama_cpp_side_by_side.py")
kScript = os.path.join(kRepo, "scripts", "dev", "llama_cpp_side_by_side.sh")
sys.path.insert(0, os.path.join(kRepo, "scripts", "dev"))

import llama_cpp_side_by_side as sbs  # noqa: E402

kBuild = {"package": "llama-cpp-python", "version": "0.3.36", "llama_cpp_commit": "abc123"}


def llama_report(threads, prompt=8, gen=4, scale=1.0):
    """llama-bench -o json output: a pp and a tg test."""
    common = {"build_commit": "abc123", "backends": "CPU", "model_type": "llama 1M Q4_1",
              "model_size": 1000, "model_n_params": 2000, "n_threads": threads}
    return [dict(common, n_prompt=prompt, n_gen=0, avg_ts=scale * 100.0 * threads),
            dict(common, n_prompt=0, n_gen=gen, avg_ts=scale * 10.0 * threads)]


def selfspec_report(threads, scale=1.0):
    """selfspec bench --out JSON, the fields the side-by-side reads."""
    return {"interrupted": False, "threads_per_rank": threads,
            "prefill_tokens_per_s": scale * 90.0 * threads,
            "decode_tokens_per_s": scale * 12.0 * threads,
            "decode_fraction_of_measured_read_bandwidth": 0.5,
            "measured_bandwidth_gbps": {"read_all_ranks": 20.0}, "isa": "avx2",
            "backend": "cpu", "weight_dtype": "auto",
            "weight_bytes_by_format": {"q4_1": 900000, "f32": 1000},
            "bytes_per_decode_token": 123456, "parameters": 2000}


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

    def write(self, value, name="raw.json"):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(value if isinstance(value, str) else json.dumps(value))
        return path

    def record(self, engine, report, threads=2):
        raw = self.write(report)
        line = captured(sbs.record, engine, raw, "1", str(threads), "2", "0.5 0.4 0.3",
                        "0.6 0.5 0.4", "2026-01-02T03:04:05Z", "1.250", "8", "4")
        return json.loads(line), line

    def refused(self, engine, report, threads=2):
        with self.assertRaises(SystemExit) as caught:
            self.record(engine, report, threads)
        message = caught.exception.code
        self.assertTrue(message.startswith("llama_cpp_side_by_side: error: "), message)
        return message

    def test_llama(self):
        run, line = self.record("llama.cpp", llama_report(2))
        self.assertEqual(line, json.dumps(run, sort_keys=True) + "\n")
        self.assertEqual(run["prefill_tokens_per_s"], 200.0)
        self.assertEqual(run["decode_tokens_per_s"], 20.0)
        self.assertEqual((run["engine"], run["round"], run["threads"], run["position_in_round"],
                          run["wall_s"], run["started"]),
                         ("llama.cpp", 1, 2, 2, 1.25, "2026-01-02T03:04:05Z"))
        self.assertEqual(run["raw_file"], os.path.join(self.tmp.name, "raw.json"))
        self.assertEqual(run["report"], llama_report(2))

    def test_selfspec(self):
        run, _ = self.record("selfspec", selfspec_report(2))
        self.assertEqual((run["prefill_tokens_per_s"], run["decode_tokens_per_s"],
                          run["decode_fraction_of_measured_read_bandwidth"],
                          run["measured_read_bandwidth_gbps"]), (180.0, 24.0, 0.5, 20.0))

    def test_refusals(self):
        self.assertIn("llama-bench ran 1 threads, asked 2",
                      self.refused("llama.cpp", llama_report(1)))
        self.assertIn("expected one pp8 and one tg4 test, found 1 and 0",
                      self.refused("llama.cpp", llama_report(2, gen=5)))
        self.assertIn("expected llama-bench's JSON list",
                      self.refused("llama.cpp", selfspec_report(2)))
        self.assertIn("pp avg_ts is 0.0, expected a positive number",
                      self.refused("llama.cpp", llama_report(2, scale=0.0)))
        self.assertIn("expected selfspec bench's JSON object",
                      self.refused("selfspec", llama_report(2)))
        self.assertIn("selfspec ran 2 threads, asked 3",
                      self.refused("selfspec", selfspec_report(2), threads=3))
        self.assertIn("reports an interrupted run",
                      self.refused("selfspec", dict(selfspec_report(2), interrupted=True)))
        report = selfspec_report(2)
        del report["measured_bandwidth_gbps"]
        self.assertIn("measured_bandwidth_gbps.read_all_ranks is None",
                      self.refused("selfspec", report))
        self.assertIn("decode_tokens_per_s is True",
                      self.refused("selfspec", dict(selfspec_report(2),
                                                    decode_tokens_per_s=True)))
        self.assertIn("cannot read", self.refused("selfspec", "{not json"))
        self.assertIn("unknown engine vllm", self.refused("vllm", selfspec_report(2)))

    def test_summary(self):
        _, line = self.record("selfspec", selfspec_report(2))
        self.assertEqual(captured(sbs.summary, line),
                         "round 1 selfspec  T=2: prefill 180.0 tok/s, decode 24.00 tok/s, 50% of "
                         "20.0 GB/s (load 0.5 0.4 0.3 -> 0.6 0.5 0.4, 1.2 s)\n")
        _, line = self.record("llama.cpp", llama_report(2))
        self.assertEqual(captured(sbs.summary, line),
                         "round 1 llama.cpp T=2: prefill 200.0 tok/s, decode 20.00 tok/s "
                         "(load 0.5 0.4 0.3 -> 0.6 0.5 0.4, 1.2 s)\n")

    def test_stats(self):
        self.assertEqual(sbs.stats([3.0, 1.0, 2.0]),
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
            sbs.meta(meta, build, "-O3 test", gguf, "1,2", "2", "8", "4", "/bin/selfspec",
                     "selfspec 1.0", "abc-dirty", "/l/llama-bench", "Made-up CPU",
                     "side_by_side.sh m.gguf out", "2026-01-02T03:04:05Z")
            with open(meta, encoding="utf-8") as f:
                description = json.load(f)
            self.assertEqual(description["threads"], [1, 2])
            self.assertEqual((description["rounds"], description["prompt"], description["gen"],
                              description["gguf_bytes"], description["nproc"]),
                             (2, 8, 4, 3 * 2**20, os.cpu_count()))
            self.assertEqual(description["llama_cpp_build"], kBuild)
            self.assertEqual(description["label"], "-O3 test")
            description["nproc"] = 4  # the load below passes it: the warning
            with open(meta, "w") as f:
                json.dump(description, f)

            runs = []
            for round_ in (1, 2):
                for threads in (1, 2):
                    for engine, report in (("llama.cpp", llama_report(threads, scale=round_)),
                                           ("selfspec", selfspec_report(threads, scale=round_))):
                        raw = os.path.join(tmp, f"r{round_}-t{threads}-{engine}.json")
                        with open(raw, "w") as f:
                            json.dump(report, f)
                        load = "5.00 1 1" if round_ == 2 else "0.50 1 1"
                        runs.append(captured(sbs.record, engine, raw, str(round_), str(threads),
                                             "1", load, load, "t", "1.0", "8", "4"))
            runs_jsonl = os.path.join(tmp, "runs.jsonl")
            with open(runs_jsonl, "w") as f:
                f.write("".join(runs))
            sbs.report(runs_jsonl, tmp, meta)
            with open(os.path.join(tmp, "side_by_side.json"), encoding="utf-8") as f:
                result = json.load(f)
            row = result["rows"][1]
            self.assertEqual(row["threads"], 2)
            self.assertEqual(row["llama.cpp"]["prefill_tokens_per_s"],
                             {"median": 300.0, "min": 200.0, "max": 400.0,
                              "samples": [200.0, 400.0]})
            self.assertAlmostEqual(row["prefill_ratio_selfspec_over_llama_cpp"], 0.9)
            self.assertAlmostEqual(row["decode_ratio_selfspec_over_llama_cpp"], 1.2)
            self.assertEqual(result["machine"], {"cpu": "Made-up CPU", "nproc": 4,
                                                 "loadavg_1min_min": 0.5,
                                                 "loadavg_1min_max": 5.0, "loaded": True})
            self.assertEqual(len(result["runs"]), 8)
            self.assertEqual(result["llama_cpp"]["package"], "llama-cpp-python==0.3.36")
            self.assertEqual(result["selfspec"]["git"], "abc-dirty")
            with open(os.path.join(tmp, "side_by_side.md"), encoding="utf-8") as f:
                markdown = f.read()
            self.assertTrue(markdown.startswith("## llama.cpp vs selfspec: -O3 test\n"))
            self.assertIn("(3.0 MiB, 3145728 bytes; llama.cpp: llama 1M Q4_1)", markdown)
            self.assertIn("weights auto (q4_1 0.90 MB, f32 0.00 MB)", markdown)
            self.assertIn("**warning**: the 1-minute load average reached 5.00 on 4 CPUs",
                          markdown)
            self.assertIn("| 1 | 150.0 | 135.0 | 0.90 | 15.00 | 18.00 | 1.20 | 50% of 20.0 GB/s |",
                          markdown)
            self.assertTrue(markdown.endswith(
                "| 2 | 300.0 | 270.0 | 0.90 | 30.00 | 36.00 | 1.20 | 50% of 20.0 GB/s |\n"))

            # a missing run: report refuses
            with open(runs_jsonl, "w") as f:
                f.write("".join(runs[:-1]))
            with self.assertRaises(SystemExit) as caught:
                sbs.report(runs_jsonl, tmp, meta)
            self.assertEqual(caught.exception.code, "llama_cpp_side_by_side: error: selfspec "
                                                    "at 2 thread(s): 1 runs, expected 2")


class CommandLineTest(unittest.TestCase):
    def run_helper(self, *args):
        return subprocess.run([sys.executable, kHelper, *args], capture_output=True, text=True,
                              timeout=60)

    def test_errors(self):
        done = self.run_helper("plot")
        self.assertEqual((done.returncode, done.stderr),
                         (1, "llama_cpp_side_by_side: error: unknown command plot\n"))
        done = self.run_helper("summary")
        self.assertEqual(done.returncode, 1)
        self.assertIn("summary takes 1 arguments, got 0", done.stderr)
        done = self.run_helper()
        self.assertEqual(done.returncode, 1)
        self.assertIn("no command", done.stderr)

    def test_summary(self):
        line = json.dumps({"round": 3, "engine": "llama.cpp", "threads": 1,
                           "prefill_tokens_per_s": 1.0, "decode_tokens_per_s": 2.0,
                           "loadavg_before": "-1", "loadavg_after": "-2", "wall_s": 0.5})
        done = self.run_helper("summary", line)
        self.assertEqual((done.returncode, done.stdout),
                         (0, "round 3 llama.cpp T=1: prefill 1.0 tok/s, decode 2.00 tok/s "
                             "(load -1 -> -2, 0.5 s)\n"), done.stderr)


kFakeBench = """#!{python}
# A fake llama-bench: -m GGUF -p P -n N -t T -r 1 -o json prints a pp and a tg test.
import json, sys
a = sys.argv[1:]
opt = dict(zip(a[0::2], a[1::2]))
p, n, t = int(opt["-p"]), int(opt["-n"]), int(opt["-t"])
common = {"build_commit": "abc123", "backends": "CPU", "model_type": "llama 1M Q4_1",
          "model_size": 1000, "model_n_params": 2000, "n_threads": t}
print(json.dumps([dict(common, n_prompt=p, n_gen=0, avg_ts=100.0 * t),
                  dict(common, n_prompt=0, n_gen=n, avg_ts=10.0 * t)]))
print("fake llama-bench log", file=sys.stderr)
"""

kFakeSelfspec = """#!{python}
# A fake selfspec: --version, and bench ... --threads T --out RAW writes a report.
import json, sys
a = sys.argv[1:]
if a == ["--version"]:
    print("selfspec 9.9 (fake)")
    sys.exit(0)
opt = dict(zip(a[1::2], a[2::2]))
t = int(opt["--threads"])
report = {"interrupted": False, "threads_per_rank": t, "prefill_tokens_per_s": 90.0 * t,
          "decode_tokens_per_s": 12.0 * t, "decode_fraction_of_measured_read_bandwidth": 0.5,
          "measured_bandwidth_gbps": {"read_all_ranks": 20.0}, "isa": "avx2", "backend": "cpu",
          "weight_dtype": "auto", "weight_bytes_by_format": {"q4_1": 900000},
          "bytes_per_decode_token": 1, "parameters": 2000, "prompt_len": int(opt["--prompt-len"])}
with open(opt["--out"], "w") as f:
    json.dump(report, f)
print("fake selfspec log")
"""


class ScriptTest(unittest.TestCase):
    def test_script(self):
        with tempfile.TemporaryDirectory() as tmp:
            bin_dir = os.path.join(tmp, "llama", "build", "bin")
            os.makedirs(bin_dir)
            tools = {os.path.join(bin_dir, "llama-bench"): kFakeBench,
                     os.path.join(bin_dir, "llama-simple"): "#!/bin/sh\n",
                     os.path.join(bin_dir, "llama-tokenize"): "#!/bin/sh\n",
                     os.path.join(tmp, "selfspec"): kFakeSelfspec}
            for path, text in tools.items():
                with open(path, "w") as f:
                    f.write(text.replace("{python}", sys.executable))
                os.chmod(path, 0o755)
            with open(os.path.join(tmp, "llama", "build", "selfspec-build.json"), "w") as f:
                json.dump(kBuild, f)
            with open(os.path.join(tmp, "m.gguf"), "wb") as f:
                f.write(bytes(100))
            env = dict(os.environ, SELFSPEC_LLAMACPP_DIR=os.path.join(tmp, "llama"))
            done = subprocess.run(
                ["bash", kScript, "m.gguf", "out", "--threads", "1,2", "--rounds", "2",
                 "--prompt", "8", "--gen", "4", "--selfspec", os.path.join(tmp, "selfspec"),
                 "--label", "-fake"], capture_output=True, text=True, cwd=tmp, env=env,
                stdin=subprocess.DEVNULL, timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            out = os.path.join(tmp, "out")
            with open(os.path.join(out, "side_by_side.md"), encoding="utf-8") as f:
                self.assertEqual(done.stdout, f.read())
            self.assertTrue(done.stdout.startswith("## llama.cpp vs selfspec: -fake\n"))
            self.assertIn("| 2 | 200.0 | 180.0 | 0.90 | 20.00 | 24.00 | 1.20 | 50% of 20.0 GB/s |",
                          done.stdout)
            with open(os.path.join(out, "side_by_side.json"), encoding="utf-8") as f:
                result = json.load(f)
            self.assertEqual(result["settings"], {"threads": [1, 2], "rounds": 2, "prompt": 8,
                                                  "gen": 4})
            self.assertEqual(result["selfspec"]["version"], "selfspec 9.9 (fake)")
            # the engines alternate: llama.cpp first in round 1, selfspec first in round 2
            order = [(r["round"], r["engine"], r["position_in_round"]) for r in result["runs"]]
            self.assertEqual(order[:2], [(1, "llama.cpp", 1), (1, "selfspec", 2)])
            self.assertEqual(order[4:6], [(2, "selfspec", 1), (2, "llama.cpp", 2)])
            self.assertEqual(len(os.listdir(os.path.join(out, "runs"))), 8 * 2 + 2)
            self.assertIn("round 2 selfspec  T=2: prefill 180.0 tok/s", done.stderr)


if __name__ == "__main__":
    unittest.main()
