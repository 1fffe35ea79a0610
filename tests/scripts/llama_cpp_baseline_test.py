"""Tests scripts/dev/llama_cpp_baseline.py, the JSON work of scripts/dev/llama_cpp_baseline.sh.

make_record on llama-bench output in the format of `llama-bench -o json` (a made-up token
generation test among others), including the exit when there is not exactly one token-generation
test; summary_line; the command line. Then the script itself, offline, on a made-up GGUF with a
fake llama.cpp build ($SELFSPEC_LLAMACPP_DIR holding a fake llama-bench, so nothing is built):
the record it writes, the summary it prints, from another working directory, and sourcing it
(as llama_cpp_side_by_side.sh does) runs nothing. Standard library only.

    python3 tests/scripts/llama_cpp_baseline_test.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kHelper = os.path.join(kRepo, "scripts", "dev", "llama_cpp_baseline.py")
kScript = os.path.join(kRepo, "scripts", "dev", "llama_cpp_baseline.sh")
sys.path.insert(0, os.path.join(kRepo, "scripts", "dev"))

import llama_cpp_baseline as baseline  # noqa: E402

kBuild = {"package": "llama-cpp-python", "version": "0.3.36", "llama_cpp_commit": "0c1e570"}


def tg_test(n_gen=64, samples=(170.0, 172.0, 174.0)):
    """A token-generation test as llama-bench -o json reports it."""
    return {"build_commit": "0c1e570", "cpu_info": "Made-up CPU", "backends": "CPU",
            "model_type": "llama 256M Q4_1", "model_size": 96576768, "model_n_params": 134515008,
            "n_prompt": 0, "n_gen": n_gen, "test_time": "2026-01-02T03:04:05Z",
            "avg_ts": sum(samples) / len(samples), "stddev_ts": 2.0, "samples_ts": list(samples)}


class RecordTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.gguf = os.path.join(self.tmp.name, "m.gguf")
        with open(self.gguf, "wb") as f:
            f.write(b"GGUF" + bytes(96))
        self.build = self.write("build.json", kBuild)

    def write(self, name, value):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(value, f)
        return path

    def test_make_record(self):
        bench = self.write("bench.json", [{"n_prompt": 512, "n_gen": 0, "avg_ts": 1.0},
                                          tg_test()])
        record = baseline.make_record(bench, self.build, self.gguf, "2", "0.10 0.20 0.30",
                                      "0.40 0.50 0.60")
        self.assertEqual(record["tokens_per_s"], 172.0)
        self.assertEqual(record["tokens_per_s_stddev"], 2.0)
        self.assertEqual(record["tokens_per_s_samples"], [170.0, 172.0, 174.0])
        self.assertEqual((record["n_gen"], record["repetitions"], record["threads"]), (64, 3, 2))
        self.assertEqual(record["model"], {"gguf": os.path.abspath(self.gguf), "file_bytes": 100,
                                           "type": "llama 256M Q4_1", "size_bytes": 96576768,
                                           "n_params": 134515008})
        self.assertEqual(record["llama_cpp"], {"package": "llama-cpp-python==0.3.36",
                                               "commit": "0c1e570", "build_commit": "0c1e570",
                                               "backends": "CPU"})
        self.assertEqual(record["machine"], {"cpu": "Made-up CPU", "nproc": os.cpu_count(),
                                             "loadavg_before": "0.10 0.20 0.30",
                                             "loadavg_after": "0.40 0.50 0.60"})
        self.assertEqual(record["date"], "2026-01-02T03:04:05Z")
        self.assertIn("compares engines, not equal work", record["note"])

    def test_not_one_tg_test(self):
        for tests in ([], [tg_test(), tg_test(n_gen=32)], [{"n_prompt": 8, "n_gen": 0}]):
            bench = self.write("bench.json", tests)
            with self.assertRaises(SystemExit) as caught:
                baseline.make_record(bench, self.build, self.gguf, "1", "a", "b")
            found = sum(1 for t in tests if t.get("n_prompt") == 0)
            self.assertEqual(caught.exception.code,
                             f"{bench}: expected one token-generation result, found {found}")

    def test_summary_line(self):
        bench = self.write("bench.json", [tg_test()])
        record = baseline.make_record(bench, self.build, self.gguf, "1", "0.1 0.2 0.3",
                                      "0.4 0.5 0.6")
        self.assertEqual(baseline.summary_line(record),
                         "llama.cpp 0c1e570: llama 256M Q4_1 172.00 ± 2.00 tokens/s (tg64, 3 "
                         f"runs, 1 threads, Made-up CPU, load 0.1 0.2 0.3 -> 0.4 0.5 0.6) "
                         f"{os.path.abspath(self.gguf)}")

    def test_command_line(self):
        bench = self.write("bench.json", [tg_test()])
        done = subprocess.run([sys.executable, kHelper, "record", bench, self.build, self.gguf,
                               "3", "1 1 1", "2 2 2"], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(done.stdout.endswith("}\n"))
        record_path = os.path.join(self.tmp.name, "record.json")
        with open(record_path, "w", encoding="utf-8") as f:
            f.write(done.stdout)
        self.assertEqual(json.loads(done.stdout)["threads"], 3)
        done = subprocess.run([sys.executable, kHelper, "summary", record_path],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(" 3 threads, ", done.stdout)
        bench = self.write("bench.json", [])
        done = subprocess.run([sys.executable, kHelper, "record", bench, self.build, self.gguf,
                               "3", "a", "b"], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 1)
        self.assertIn("expected one token-generation result, found 0", done.stderr)
        done = subprocess.run([sys.executable, kHelper, "record", bench], capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(done.returncode, 2)


kFakeBench = """#!{python}
# A fake llama-bench: -m GGUF -p 0 -n N -t T -r R -o json prints one token-generation test.
import json, sys
a = sys.argv[1:]
opt = dict(zip(a[0::2], a[1::2]))
samples = [100.0 + i for i in range(int(opt["-r"]))]
print(json.dumps([{"build_commit": "0c1e570", "cpu_info": "Fake CPU", "backends": "CPU",
                   "model_type": "llama 1M Q4_1", "model_size": 1000, "model_n_params": 2000,
                   "n_prompt": int(opt["-p"]), "n_gen": int(opt["-n"]),
                   "n_threads": int(opt["-t"]), "test_time": "2026-01-02T03:04:05Z",
                   "avg_ts": sum(samples) / len(samples), "stddev_ts": 1.0,
                   "samples_ts": samples}]))
print("fake llama-bench log", file=sys.stderr)
"""


def fake_llama_dir(root, python=sys.executable):
    """A $SELFSPEC_LLAMACPP_DIR that ensure_built takes as built: fake tools, the build record."""
    bin_dir = os.path.join(root, "build", "bin")
    os.makedirs(bin_dir)
    with open(os.path.join(bin_dir, "llama-bench"), "w") as f:
        f.write(kFakeBench.replace("{python}", python))
    for tool in ("llama-simple", "llama-tokenize"):
        with open(os.path.join(bin_dir, tool), "w") as f:
            f.write("#!/bin/sh\n")
    for tool in os.listdir(bin_dir):
        os.chmod(os.path.join(bin_dir, tool), 0o755)
    with open(os.path.join(root, "build", "selfspec-build.json"), "w") as f:
        json.dump(kBuild, f)
    return root


class ScriptTest(unittest.TestCase):
    def test_script(self):
        with tempfile.TemporaryDirectory() as tmp:
            gguf, out = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "out.json")
            with open(gguf, "wb") as f:
                f.write(bytes(10))
            env = dict(os.environ, SELFSPEC_LLAMACPP_DIR=fake_llama_dir(os.path.join(tmp, "l")))
            done = subprocess.run(["bash", kScript, gguf, "2", out], capture_output=True,
                                  text=True, cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                  timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(out, encoding="utf-8") as f:
                record = json.load(f)
            self.assertEqual((record["tokens_per_s"], record["n_gen"], record["repetitions"],
                              record["threads"]), (101.0, 64, 3, 2))
            self.assertEqual(record["llama_cpp"]["package"], "llama-cpp-python==0.3.36")
            self.assertEqual(done.stdout, baseline.summary_line(record) + "\n")
            self.assertIn(f"llama_cpp_baseline: wrote {out}", done.stderr)
            done = subprocess.run(["bash", kScript, gguf, "zero"], capture_output=True,
                                  text=True, env=env, timeout=60)
            self.assertEqual(done.returncode, 1)
            self.assertIn("THREADS must be a positive integer, got 'zero'", done.stderr)

    def test_sourcing_runs_nothing(self):
        done = subprocess.run(["bash", "-c", 'source "$1" && type make_record summary_line '
                               '>/dev/null && echo "$kBaselinePy"', "_", kScript],
                              capture_output=True, text=True, cwd="/", timeout=60)
        self.assertEqual((done.returncode, done.stdout), (0, kHelper + "\n"), done.stderr)


if __name__ == "__main__":
    unittest.main()
