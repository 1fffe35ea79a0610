"""Tests scripts/dev/llama_cpp_speculative.py, llama.cpp's plain and speculative decoding of a GGUF
over prompts, one process per prompt.

The parsers on stderr captured from the pinned llama.cpp (0c1e57098: llama-completion and
llama-speculative-simple on Qwen2.5-Coder-1.5B Q4_K_M, HumanEval/1), including a run that drafted
nothing (`accept = -nan%`, acceptance null) and malformed output (a missing, a repeated line);
the prompts file, the ids of a bench report and the id selection (unknown and repeated ids); the
commands of each config; the generated text and the totals. Then the script itself, offline,
with a fake llama.cpp build (no llama.cpp, no model): the report it writes, the logs it keeps,
a failing run and a run without figures. Standard library only.

    python3 tests/scripts/llama_cpp_speculative_test.py
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kScript = os.path.join(kRepo, "scripts", "dev", "llama_cpp_speculative.py")
sys.path.insert(0, os.path.join(kRepo, "scripts", "dev"))

import llama_cpp_speculative as spec  # noqa: E402

# Captured: the end of `llama-completion -m Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf -f PROMPT -n 16
# -t 1 --temp 0 --top-k 1 -s 1 -c 4096 -no-cnv --ignore-eos`'s stderr.
kCompletionStderr = (
    "0.00.959.336 I generate: n_ctx = 4096, n_batch = 2048, n_predict = 16, n_keep = 0\n"
    "0.00.959.336 I \n"
    "0.02.739.770 I common_perf_print:    sampling time =       2.16 ms\n"
    "0.02.739.772 I common_perf_print:    samplers time =       0.89 ms /   125 tokens\n"
    "0.02.739.774 I common_perf_print:        load time =     724.53 ms\n"
    "0.02.739.776 I common_perf_print: prompt eval time =    1201.60 ms /   109"
    " tokens (   11.02 ms per token,    90.71 tokens per second)\n"
    "0.02.739.777 I common_perf_print:        eval time =     575.74 ms /    15 runs "
    "  (   38.38 ms per token,    26.05 tokens per second)\n"
    "0.02.739.777 I common_perf_print:       total time =    1781.10 ms /   124 tokens\n"
    "0.02.739.778 I common_perf_print: unaccounted time =       1.61 ms /   0.1 %    "
    "  (total - sampling - prompt eval - eval) / (total)\n"
    "0.02.739.778 I common_perf_print:    graphs reused =         14\n"
)

# Captured: `llama-speculative-simple -m ...1.5B... --spec-type draft-simple -md ...0.5B... -f
# PROMPT -n 16 -t 1 --temp 0 --top-k 1 -s 1 -c 4096 --ignore-eos`'s stderr, from the draft
# model's load on. The target's common_perf_print lines are not the figures read.
kDraftStderr = (
    "0.01.114.379 I common_speculative_init_result: loading draft model"
    " '/m/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf'\n"
    "0.01.213.437 W load: control-looking token: 128247 '</s>' was not control-type;"
    " this is probably a bug in the model. its type will be overridden\n"
    "0.04.726.686 I encoded  109 tokens in    1.831 seconds, speed:   59.520 t/s\n"
    "0.04.726.687 I decoded   19 tokens in    1.454 seconds, speed:   13.071 t/s\n"
    "0.04.726.687 I \n"
    "0.04.726.687 I n_draft   = 3\n"
    "0.04.726.687 I n_predict = 19\n"
    "0.04.726.687 I n_drafted = 16\n"
    "0.04.726.688 I n_accept  = 13\n"
    "0.04.726.688 I accept    = 81.250%\n"
    "0.04.726.688 I \n"
    "0.04.726.688 I draft:\n"
    "0.04.726.729 I \n"
    "0.04.726.729 I target:\n"
    "0.04.726.731 I common_perf_print:    sampling time =       3.00 ms\n"
    "0.04.726.732 I common_perf_print:        load time =     703.50 ms\n"
    "0.04.726.733 I common_perf_print: prompt eval time =    2891.07 ms /   132"
    " tokens (   21.90 ms per token,    45.66 tokens per second)\n"
    "0.04.726.734 I common_perf_print:        eval time =       0.00 ms /     1 runs "
    "  (    0.00 ms per token,      inf tokens per second)\n"
    "0.04.726.734 I common_perf_print:       total time =    3612.38 ms /   133 tokens\n"
)

# Captured: `llama-speculative-simple ... --spec-type ngram-simple ... -n 8 -t 2 ...`: nothing was
# drafted, so llama.cpp prints the acceptance as -nan%.
kNothingDraftedStderr = (
    "0.01.936.327 I encoded  109 tokens in    0.605 seconds, speed:  180.311 t/s\n"
    "0.01.936.349 I decoded    9 tokens in    0.253 seconds, speed:   35.591 t/s\n"
    "0.01.936.360 I \n"
    "0.01.936.371 I n_draft   = 3\n"
    "0.01.936.382 I n_predict = 9\n"
    "0.01.936.393 I n_drafted = 0\n"
    "0.01.936.404 I n_accept  = 0\n"
    "0.01.936.415 I accept    = -nan%\n"
    "0.01.936.426 I \n"
    "0.01.936.506 I common_perf_print:    sampling time =       1.43 ms\n"
    "0.01.936.540 I common_perf_print: prompt eval time =     674.84 ms /   111"
    " tokens (    6.08 ms per token,   164.48 tokens per second)\n"
    "0.01.936.552 I common_perf_print:        eval time =     220.84 ms /     8 runs "
    "  (   27.61 ms per token,    36.22 tokens per second)\n"
)


class ParseTest(unittest.TestCase):
    def test_completion(self):
        figures = spec.parse_completion_stderr(kCompletionStderr)
        self.assertEqual(figures, {"prompt_tokens": 109, "prefill_s": 1.2016,
                                   "decode_tokens": 15, "decode_s": 0.57574})

    def test_completion_malformed(self):
        cut = kCompletionStderr.replace("eval time =     575.74 ms /    15 runs",
                                        "eval time = (interrupted)")
        with self.assertRaisesRegex(spec.ParseError, r"expected one 'eval time = \.\.\. ms / N "
                                    r"runs' line in llama-completion's stderr, found 0"):
            spec.parse_completion_stderr(cut)
        with self.assertRaisesRegex(spec.ParseError, "'prompt eval time = .*found 2"):
            spec.parse_completion_stderr(kCompletionStderr + kCompletionStderr)
        with self.assertRaisesRegex(spec.ParseError, "found 0"):
            spec.parse_completion_stderr("")
        zero = kCompletionStderr.replace("575.74 ms /    15 runs", "0.00 ms /     0 runs")
        with self.assertRaisesRegex(spec.ParseError, "0 decode runs in 0.00 ms"):
            spec.parse_completion_stderr(zero)

    def test_speculative(self):
        figures = spec.parse_speculative_stderr(kDraftStderr)
        self.assertEqual(figures, {"prompt_tokens": 109, "prefill_s": 1.831,
                                   "decode_tokens": 19, "decode_s": 1.454, "drafted": 16,
                                   "accepted": 13, "acceptance_rate": 13 / 16})

    def test_speculative_nothing_drafted(self):
        figures = spec.parse_speculative_stderr(kNothingDraftedStderr)
        self.assertEqual((figures["drafted"], figures["accepted"], figures["acceptance_rate"],
                          figures["decode_tokens"], figures["decode_s"]), (0, 0, None, 9, 0.253))

    def test_speculative_malformed(self):
        with self.assertRaisesRegex(spec.ParseError, "expected one 'encoded N tokens in S "
                                    "seconds' line in llama-speculative-simple's stderr, found 0"):
            spec.parse_speculative_stderr(kCompletionStderr)
        no_decoded = kDraftStderr.replace("decoded   19 tokens in    1.454 seconds",
                                          "decoded")
        with self.assertRaisesRegex(spec.ParseError, "'decoded N tokens in S seconds'.*found 0"):
            spec.parse_speculative_stderr(no_decoded)
        no_accept = kDraftStderr.replace("n_accept  = 13", "n_accept  = ?")
        with self.assertRaisesRegex(spec.ParseError, "'n_accept = N'.*found 0"):
            spec.parse_speculative_stderr(no_accept)
        with self.assertRaisesRegex(spec.ParseError, "'encoded N tokens.*found 2"):
            spec.parse_speculative_stderr(kDraftStderr + kDraftStderr)
        too_many = kDraftStderr.replace("n_accept  = 13", "n_accept  = 17")
        with self.assertRaisesRegex(spec.ParseError, "n_accept = 17 of n_drafted = 16"):
            spec.parse_speculative_stderr(too_many)
        nothing = kDraftStderr.replace("decoded   19 tokens", "decoded    0 tokens")
        with self.assertRaisesRegex(spec.ParseError, "0 tokens decoded"):
            spec.parse_speculative_stderr(nothing)


class PromptsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, text, name):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if isinstance(text, str) else json.dumps(text))
        return path

    def test_load_and_select(self):
        path = self.write("".join(json.dumps({"id": f"HumanEval/{i}", "task": "code",
                                              "split": "evaluation", "prompt": f"def f{i}():\n"})
                                  + "\n" for i in range(4)) + "\n", "p.jsonl")
        prompts = spec.load_prompts(path)
        self.assertEqual(list(prompts), [f"HumanEval/{i}" for i in range(4)])
        self.assertEqual(spec.select_prompts(prompts, ["HumanEval/3", "HumanEval/1"]),
                         [("HumanEval/3", "def f3():\n"), ("HumanEval/1", "def f1():\n")])
        with self.assertRaisesRegex(spec.Failure, r"prompt id\(s\) not in p.jsonl: HumanEval/9, x"):
            spec.select_prompts(prompts, ["HumanEval/1", "HumanEval/9", "x"], "p.jsonl")
        with self.assertRaisesRegex(spec.Failure, "more than once: HumanEval/1"):
            spec.select_prompts(prompts, ["HumanEval/1", "HumanEval/2", "HumanEval/1"])
        self.assertEqual(spec.parse_ids(" HumanEval/1, HumanEval/3 ,"),
                         ["HumanEval/1", "HumanEval/3"])
        with self.assertRaisesRegex(spec.Failure, "names no prompt"):
            spec.parse_ids(" , ")

    def test_bad_prompts_file(self):
        with self.assertRaisesRegex(spec.Failure, r"p.jsonl:2: not JSON"):
            spec.load_prompts(self.write('{"id": "a", "prompt": "x"}\n{oops\n', "p.jsonl"))
        with self.assertRaisesRegex(spec.Failure, r':1: expected an object with string "id"'):
            spec.load_prompts(self.write('{"id": "a"}\n', "q.jsonl"))
        with self.assertRaisesRegex(spec.Failure, "'a' appears twice"):
            spec.load_prompts(self.write('{"id": "a", "prompt": "x"}\n' * 2, "r.jsonl"))
        with self.assertRaisesRegex(spec.Failure, "cannot read the prompts file"):
            spec.load_prompts(os.path.join(self.tmp.name, "missing.jsonl"))

    def test_ids_from_bench(self):
        bench = {"gen": 64, "per_prompt": [
            {"id": "HumanEval/1", "prompt_tokens": 109, "autoregressive": {"tokens": 63}},
            {"id": "HumanEval/3", "prompt_tokens": 98, "speculative": []}]}
        self.assertEqual(spec.read_bench_ids(self.write(bench, "bench.json")),
                         ["HumanEval/1", "HumanEval/3"])
        with self.assertRaisesRegex(spec.Failure, 'non-empty "per_prompt"'):
            spec.read_bench_ids(self.write({"per_prompt": []}, "empty.json"))
        with self.assertRaisesRegex(spec.Failure, 'non-empty "per_prompt"'):
            spec.read_bench_ids(self.write([1, 2], "list.json"))
        with self.assertRaisesRegex(spec.Failure, r'per_prompt\[1\] has no string "id"'):
            spec.read_bench_ids(self.write({"per_prompt": [{"id": "a"}, {"id": 3}]}, "bad.json"))
        with self.assertRaisesRegex(spec.Failure, "cannot read the bench report .* as JSON"):
            spec.read_bench_ids(self.write("{", "broken.json"))


class CommandTest(unittest.TestCase):
    def test_prompt_file_compensates_for_the_dropped_newline(self):
        self.assertEqual(spec.prompt_file_text("def f():\n"), "def f():\n\n")
        self.assertEqual(spec.prompt_file_text("x = 1"), "x = 1\n")
        self.assertEqual(spec.prompt_file_text(""), "\n")

    def test_commands(self):
        sampling = ["--no-escape", "-n", "64", "-t", "2", "--temp", "0", "--top-k", "1", "-s",
                    "1", "-c", "4096"]
        self.assertEqual(spec.build_command("plain", "/b", "/m.gguf", "/p.txt", 64, 2),
                         ["/b/llama-completion", "-m", "/m.gguf", "-f", "/p.txt"] + sampling
                         + ["-no-cnv", "--ignore-eos"])
        self.assertEqual(spec.build_command("draft", "/b", "/m.gguf", "/p.txt", 64, 2, "/d.gguf",
                                            ["--spec-draft-n-max", "6"]),
                         ["/b/llama-speculative-simple", "-m", "/m.gguf", "--spec-type",
                          "draft-simple", "-md", "/d.gguf", "-f", "/p.txt"] + sampling
                         + ["--ignore-eos", "--spec-draft-n-max", "6"])
        for config in ("ngram-simple", "ngram-mod", "ngram-cache", "ngram-map-k"):
            self.assertEqual(spec.build_command(config, "/b", "/m.gguf", "/p.txt", 64, 2)[:5],
                             ["/b/llama-speculative-simple", "-m", "/m.gguf", "--spec-type",
                              config])
        with self.assertRaisesRegex(spec.Failure, "unknown config 'eagle'"):
            spec.build_command("eagle", "/b", "/m.gguf", "/p.txt", 64, 2)

    def test_generated_text_and_overall(self):
        self.assertEqual(spec.generated_text("\n\ndef f():\n    return 1\n\n\n\n", "def f():\n"),
                         ("    return 1\n\n\n\n", True))
        self.assertEqual(spec.generated_text("x" * 3000, "def"), ("x" * 2000, False))
        plain = [{"prompt_tokens": 10, "prefill_s": 0.5, "decode_tokens": 15, "decode_s": 0.5,
                  "drafted": None, "accepted": None}] * 2
        self.assertEqual(spec.overall(plain), {
            "prompts": 2, "prompt_tokens": 20, "prefill_s": 1.0, "decode_tokens": 30,
            "decode_s": 1.0, "decode_tokens_per_s": 30.0, "drafted": None, "accepted": None,
            "acceptance_rate": None})
        drafted = [dict(plain[0], drafted=0, accepted=0), dict(plain[0], drafted=8, accepted=6)]
        o = spec.overall(drafted)
        self.assertEqual((o["drafted"], o["accepted"], o["acceptance_rate"]), (8, 6, 0.75))
        o = spec.overall([dict(plain[0], drafted=0, accepted=0)])
        self.assertEqual((o["drafted"], o["accepted"], o["acceptance_rate"]), (0, 0, None))


# A fake llama.cpp binary (llama-completion or llama-speculative-simple, by its name): checks that
# stdin is /dev/null, appends its argv to calls.jsonl, echoes the -f prompt and a generation on
# stdout, and prints the captured stderr for its kind; FAKE_MODE=fail exits 1 on the second call,
# FAKE_MODE=garbled prints no figures.
kFake = r"""#!PYTHON
import json, os, stat, sys
kind = os.path.basename(sys.argv[0])
here = os.path.dirname(os.path.abspath(sys.argv[0]))
assert stat.S_ISCHR(os.fstat(0).st_mode), "stdin is not /dev/null"
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
with open(os.path.join(here, "calls.jsonl")) as f:
    calls = len(f.readlines())
with open(os.path.join(here, "stderr." + kind)) as f:
    err = f.read()
prompt = open(sys.argv[sys.argv.index("-f") + 1]).read()
if prompt.endswith("\n"):  # as llama.cpp's -f does
    prompt = prompt[:-1]
mode = os.environ.get("FAKE_MODE", "")
if mode == "fail" and calls == 2:
    print("fake failure", file=sys.stderr)
    sys.exit(1)
if mode == "garbled":
    err = "no figures here\n"
lead = "" if kind == "llama-completion" else "\n\n"
sys.stdout.write(lead + prompt + "    return 42 # call %d\n" % calls)
sys.stderr.write(err)
"""


class ScriptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        root = self.tmp.name
        self.bin = os.path.join(root, "build", "bin")
        os.makedirs(self.bin)
        for kind, err in (("llama-completion", kCompletionStderr),
                          ("llama-speculative-simple", kDraftStderr)):
            path = os.path.join(self.bin, kind)
            with open(path, "w", encoding="utf-8") as f:
                f.write(kFake.replace("PYTHON", sys.executable, 1))
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
            with open(os.path.join(self.bin, "stderr." + kind), "w", encoding="utf-8") as f:
                f.write(err)
        with open(os.path.join(root, "build", "selfspec-build.json"), "w") as f:
            json.dump({"package": "llama-cpp-python", "version": "0.3.36",
                       "llama_cpp_commit": "0c1e57098"}, f)
        self.model = os.path.join(root, "target.gguf")
        self.draft = os.path.join(root, "draft.gguf")
        for path, size in ((self.model, 1000), (self.draft, 300)):
            with open(path, "wb") as f:
                f.write(b"\0" * size)
        self.prompts = os.path.join(root, "prompts.jsonl")
        with open(self.prompts, "w", encoding="utf-8") as f:
            for i in range(4):
                f.write(json.dumps({"id": f"HumanEval/{i}", "task": "code",
                                    "prompt": f"def f{i}():\n"}) + "\n")
        self.out = os.path.join(root, "out", "report.json")

    def run_script(self, *args, mode=""):
        # TMPDIR: the script's temporary folder, kept after a failing run, stays in self.tmp
        env = dict(os.environ, FAKE_MODE=mode, PYTHONDONTWRITEBYTECODE="1",
                   TMPDIR=self.tmp.name)
        return subprocess.run([sys.executable, kScript, "--bin-dir", self.bin, "--model",
                               self.model, "--prompts-file", self.prompts, "--gen", "16",
                               "--threads", "1", "--out", self.out] + list(args),
                              capture_output=True, text=True, env=env, cwd=self.tmp.name)

    def calls(self):
        with open(os.path.join(self.bin, "calls.jsonl"), encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def test_draft(self):
        logs = os.path.join(self.tmp.name, "logs")
        done = self.run_script("--ids", "HumanEval/3,HumanEval/1", "--config", "draft",
                               "--draft-model", self.draft, "--log-dir", logs, "--",
                               "--spec-draft-n-max", "6")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(self.out, encoding="utf-8") as f:
            report = json.load(f)
        self.assertEqual((report["engine"], report["config"], report["extra_args"],
                          report["model_bytes"], report["draft_model"], report["threads"],
                          report["gen"]),
                         ("llama.cpp", "draft", ["--spec-draft-n-max", "6"], 1000, self.draft,
                          1, 16))
        self.assertEqual(report["llama_cpp_build"]["llama_cpp_commit"], "0c1e57098")
        self.assertTrue(report["date"].endswith("Z"), report["date"])
        self.assertEqual([p["id"] for p in report["per_prompt"]], ["HumanEval/3", "HumanEval/1"])
        first = report["per_prompt"][0]
        self.assertEqual((first["decode_tokens"], first["decode_s"], first["drafted"],
                          first["accepted"], first["prompt_tokens"]), (19, 1.454, 16, 13, 109))
        self.assertEqual(first["text"], "    return 42 # call 1\n")
        self.assertTrue(first["text_prompt_removed"])
        self.assertEqual(len(first["loadavg_before"].split()), 3)
        o = report["overall"]
        self.assertEqual((o["prompts"], o["decode_tokens"], o["drafted"], o["accepted"]),
                         (2, 38, 32, 26))
        self.assertAlmostEqual(o["decode_tokens_per_s"], 38 / 2.908)
        self.assertAlmostEqual(o["acceptance_rate"], 26 / 32)
        calls = self.calls()
        self.assertEqual(report["command"][1:], calls[0])
        self.assertEqual(calls[0][:6], ["-m", self.model, "--spec-type", "draft-simple", "-md",
                                        self.draft])
        self.assertEqual(calls[0][-3:], ["--ignore-eos", "--spec-draft-n-max", "6"])
        with open(calls[0][calls[0].index("-f") + 1], encoding="utf-8") as f:
            # the prompt and the newline llama.cpp's -f drops, kept in --log-dir
            self.assertEqual(f.read(), "def f3():\n\n")
        self.assertIn("HumanEval_3.draft.log", os.listdir(logs))
        self.assertIn("HumanEval/1: 13.07 tok/s (19 tokens in 1.454 s; prefill 109 tokens in "
                      "1.831 s), drafted 16 accepted 13 (81.2%)", done.stderr)
        self.assertIn("draft: 2 prompt(s), 38 decode tokens", done.stderr)

    def test_plain_from_bench(self):
        bench = os.path.join(self.tmp.name, "bench.json")
        with open(bench, "w", encoding="utf-8") as f:
            json.dump({"per_prompt": [{"id": "HumanEval/2"}, {"id": "HumanEval/0"}]}, f)
        done = self.run_script("--ids-from-bench", bench, "--config", "plain")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(self.out, encoding="utf-8") as f:
            report = json.load(f)
        self.assertEqual([p["id"] for p in report["per_prompt"]], ["HumanEval/2", "HumanEval/0"])
        self.assertEqual((report["draft_model"], report["extra_args"], report["log_dir"]),
                         (None, [], None))
        o = report["overall"]
        self.assertEqual((o["decode_tokens"], o["drafted"], o["acceptance_rate"]), (30, None, None))
        self.assertAlmostEqual(o["decode_s"], 2 * 0.57574)
        self.assertEqual(report["per_prompt"][1]["text"], "    return 42 # call 2\n")
        self.assertEqual(self.calls()[0][-2:], ["-no-cnv", "--ignore-eos"])
        # the temporary folder (prompt files, logs) is gone
        prompt_file = self.calls()[0][self.calls()[0].index("-f") + 1]
        self.assertEqual(os.path.dirname(os.path.dirname(prompt_file)), self.tmp.name)
        self.assertFalse(os.path.exists(os.path.dirname(prompt_file)))

    def test_errors(self):
        done = self.run_script("--ids", "HumanEval/1,HumanEval/2", "--config", "ngram-cache",
                               mode="fail")
        self.assertEqual(done.returncode, 1)
        self.assertRegex(done.stderr, r"llama_cpp_speculative: error: HumanEval/2: "
                         r"llama-speculative-simple exit status 1; see (\S+)/HumanEval_2"
                         r"\.ngram-cache\.log \(the folder \1 is kept\)")
        log = done.stderr.split("see ")[1].split(" (")[0]
        self.assertEqual(os.path.dirname(os.path.dirname(log)), self.tmp.name)
        with open(log, encoding="utf-8") as f:
            self.assertIn("fake failure", f.read())
        self.assertFalse(os.path.exists(self.out))
        done = self.run_script("--ids", "HumanEval/1", "--config", "plain", "--log-dir",
                               os.path.join(self.tmp.name, "logs"), mode="garbled")
        self.assertIn("error: HumanEval/1: expected one 'prompt eval time = ... ms / N tokens' "
                      "line in llama-completion's stderr, found 0; see ", done.stderr)
        self.assertIn(os.path.join(self.tmp.name, "logs", "HumanEval_1.plain.log"), done.stderr)
        done = self.run_script("--ids", "HumanEval/1,HumanEval/7", "--config", "plain")
        self.assertIn("prompt id(s) not in", done.stderr)
        self.assertIn(": HumanEval/7", done.stderr)
        done = self.run_script("--ids", "HumanEval/1", "--config", "draft")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--draft-model is needed by --config draft, and only by it", done.stderr)
        done = self.run_script("--ids", "HumanEval/1", "--config", "plain", "--draft-model",
                               self.draft)
        self.assertEqual(done.returncode, 2)
        done = self.run_script("--ids", "HumanEval/1", "--config", "ngram-mod", "--bin-dir",
                               self.tmp.name)
        self.assertIn("no executable llama-speculative-simple in", done.stderr)


if __name__ == "__main__":
    unittest.main()
