"""Tests scripts/plot_sweep.py and scripts/slurm/bench_sweep.sbatch.

PlotSweepTest builds a results directory as bench_sweep.sbatch leaves it (summary.jsonl and the
runs' bench JSON, in the format `selfspec bench --json` writes: the templates below are real
outputs with their figures replaced) with two node counts, a failed, an interrupted and a skipped
run, runs plot_sweep.py on it and checks report.json / report.md (tokens/s, speedup over the
autoregressive run at the same TP and node count, communication ms per token) and the PNG files;
ErrorTest the non-zero exit naming the file on missing or malformed input. SweepScriptTest checks
the batch script's syntax (`bash -n`) and runs it outside Slurm, with a fake srun (checks the
placement it is given) and a fake selfspec (`plan` fits, `bench` prints a result and the ranks'
start lines), on a 2 x 2-rank and a 2 x 8-rank allocation: which runs on how many nodes, the
summary's nodes / node_list / comm_ms_per_token, requeue-resume, and plot_sweep.py on the result.
Exits 77 (ctest: skipped) when matplotlib is not importable.

    /usr/bin/python3 tests/scripts/plot_sweep_test.py
"""

import copy
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

try:
    import matplotlib  # noqa: F401  (plot_sweep.py's dependency; skipped without it)
except ImportError as missing:
    print(f"SKIP: {missing} (install python3-matplotlib with scripts/setup.sh; "
          "run /usr/bin/python3)")
    sys.exit(77)

kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kScript = os.path.join(kRepo, "scripts", "plot_sweep.py")
kSbatch = os.path.join(kRepo, "scripts", "slurm", "bench_sweep.sbatch")
sys.path.insert(0, os.path.join(kRepo, "scripts"))

import plot_sweep  # noqa: E402

# `selfspec bench --json` outputs (TP 2, CPU, a 2-layer model): autoregressive, and layer-skip
# with one controller.
kArTemplate = json.loads(
    '{"backend":"cpu (avx2, 1 threads)","bytes_per_decode_token":{"all_ranks":750592.0,'
    '"rank0_kv_cache":12032.0,"rank0_weights":363264},"completed_runs":2,'
    '"decode_fraction_of_measured_read_bandwidth":0.61,"decode_ms_per_token":0.0471,'
    '"decode_tokens_per_s":21312.96,"effective_bandwidth_gbps":{"all_ranks":15.93,"rank0":7.96},'
    '"gen":16,"interrupted":false,"isa":"avx2","load_s":0.001,"measured_bandwidth_gbps":'
    '{"buffer_bytes_per_rank":1073741824,"copy_all_ranks":44.5,"read_all_ranks":26.0,'
    '"read_per_rank":13.0},"model":"/tmp/m","parameters":426624,"prefill_tokens_per_s":40579.0,'
    '"prompt_len":16,"prompts":1,"reduction":"rank-order","reps":2,"sampling":{"seed":0,'
    '"temperature":0.0,"top_k":0,"top_p":1.0},"threads_per_rank":1,"tp":2,"verification":'
    '{"gather":"host","local":"host"},"weight_dtype":"bf16","autoregressive":'
    '{"comm_ms_per_token":0.05,"decode_tokens_per_s":21312.96,"forward_ms":0.0469,'
    '"phases_s":{"comm":0.0015,"control":0.0,"draft":0.0,"verify":0.0014},"tokens":30}}')
kSpecTemplate = json.loads(
    '{"autoregressive":{"comm_ms_per_token":0.07,"decode_tokens_per_s":20499.67,'
    '"forward_ms":0.0401,"tokens":30},'
    '"backend":"cpu (avx2, 1 threads)","bytes_per_decode_token":{"all_ranks":750592.0,'
    '"rank0_kv_cache":12032.0,"rank0_weights":363264},"completed_runs":4,'
    '"decode_fraction_of_measured_read_bandwidth":1.11,"decode_ms_per_token":0.0487,'
    '"decode_tokens_per_s":20505.75,"effective_bandwidth_gbps":{"all_ranks":15.38,"rank0":7.69},'
    '"gen":16,"interrupted":false,"isa":"avx2","load_s":0.0319,"measured_bandwidth_gbps":'
    '{"buffer_bytes_per_rank":1073741824,"copy_all_ranks":15.1,"read_all_ranks":13.7,'
    '"read_per_rank":12.0},"model":"/tmp/m","parameters":426624,"prefill_tokens_per_s":24549.5,'
    '"prompt_len":16,"prompts":2,"reduction":"rank-order","reps":2,"sampling":{"seed":0,'
    '"temperature":0.0,"top_k":0,"top_p":1.0},"spec":{"drafter":"layer-skip","max_draft":12,'
    '"skip_fraction":0.5,"skip_set":{"attention":[1],"mlp":[0],"name":"uniform-r0.5",'
    '"num_layers":2,"source":"SWIFT"},"skipped_sublayers":2,"tree":"none"},"speculative":'
    '[{"acceptance_rate":0.526,"accepted":10,"alternatives":0,"alternatives_accepted":0,'
    '"controller":"adaptive","controller_state_last_prompt":{"ar":0.97,"gamma":0.601,'
    '"rounds":9},"cost_ratio_c":0.584,"decode_tokens_per_s":12935.08,"draft_forwards":19,'
    '"draft_vocab":0,"drafted":19,"efficiency":0.654,"expected_speedup_eq6":0.964,'
    '"logits":"local","lossless":true,"lossless_prompts":2,"mean_accepted_length":1.5,'
    '"phases_s":{"comm":0.000844,"control":5.8e-05,"draft":0.000289,"verify":0.0011},'
    '"score_forward_s":0.0,"score_forwards":0,"speedup":0.631,"verify_cost_ratio":1.787,'
    '"verify_forwards":20}],"threads_per_rank":1,"tp":2,"verification":{"gather":"host",'
    '"local":"host"},"weight_dtype":"bf16"}')


def ar_result(tp, tokens_per_s, comm_ms_per_token=0.05):
    result = copy.deepcopy(kArTemplate)
    result.update(tp=tp, decode_tokens_per_s=tokens_per_s)
    result["autoregressive"]["comm_ms_per_token"] = comm_ms_per_token
    return result


def spec_result(tp, controller, tokens_per_s, comm_s, tokens, paired_speedup):
    result = copy.deepcopy(kSpecTemplate)
    result["tp"] = tp
    result["autoregressive"]["tokens"] = tokens
    entry = result["speculative"][0]
    entry.update(controller=controller, decode_tokens_per_s=tokens_per_s, speedup=paired_speedup)
    entry["phases_s"]["comm"] = comm_s
    return result


def summary_line(tp, nodes, method, controller, status, hosts=None, note=""):
    """A summary line as bench_sweep.sbatch writes it (without the embedded result)."""
    name = f"tp{tp}-n{nodes}-" + ("autoregressive" if method == "autoregressive"
                                  else f"{method}-{controller}")
    return {"job_id": "77", "run": name, "tp": tp, "nodes": nodes,
            "ranks_per_node": -(-tp // nodes), "node_list": hosts, "method": method,
            "controller": controller, "status": status,
            "exit_code": 0 if status == "ok" else (None if status == "skipped" else 1),
            "seconds": 5 if status != "skipped" else 0, "comm_ms_per_token": None, "note": note,
            "result_file": f"{name}.json" if status == "ok" else None, "result": None}


def write_results(directory, runs):
    """runs: [(summary line, bench result or None)]: the run files and summary.jsonl."""
    with open(os.path.join(directory, "summary.jsonl"), "w", encoding="utf-8") as f:
        for line, result in runs:
            if result is not None:
                with open(os.path.join(directory, line["result_file"]), "w",
                          encoding="utf-8") as out:
                    json.dump(result, out, indent=2)
            f.write(json.dumps(line) + "\n")


def run_script(*args):
    return subprocess.run([sys.executable, kScript, *args], capture_output=True, text=True,
                          timeout=120)


def png_size(path):
    """(width, height) of a PNG file; fails the test unless it is one (signature, IHDR CRC)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise AssertionError(f"{path}: not a PNG file")
    length, = struct.unpack(">I", data[8:12])
    crc, = struct.unpack(">I", data[16 + length:20 + length])
    if zlib.crc32(data[12:16 + length]) != crc or b"IEND" not in data[-12:]:
        raise AssertionError(f"{path}: damaged PNG file")
    return struct.unpack(">II", data[16:24])


class PlotSweepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="plot_sweep_test.")
        cls.results = os.path.join(cls.tmp, "results")
        os.makedirs(cls.results)
        h1, h2 = ["node-a"], ["node-a", "node-b"]
        write_results(cls.results, [
            (summary_line(1, 1, "autoregressive", None, "ok", h1), ar_result(1, 1000.0)),
            (summary_line(1, 1, "layer-skip", "adaptive", "ok", h1),
             spec_result(1, "adaptive", 1500.0, 0.0, 30, 1.4)),
            (summary_line(2, 1, "autoregressive", None, "ok", h1), ar_result(2, 1800.0)),
            (summary_line(2, 1, "layer-skip", "adaptive", "ok", h1),
             spec_result(2, "adaptive", 2700.0, 0.006, 60, 1.45)),
            (summary_line(2, 2, "autoregressive", None, "ok", h2), ar_result(2, 1200.0)),
            (summary_line(2, 2, "layer-skip", "adaptive", "ok", h2),
             spec_result(2, "adaptive", 1500.0, 0.024, 60, 1.2)),
            (summary_line(2, 2, "layer-skip", "thompson", "failed", h2,
                          note="error: rank 1 died"), None),
            (summary_line(4, 2, "autoregressive", None, "interrupted", h2,
                          note="SIGTERM (time limit or preemption)"), None),
            (summary_line(4, 2, "layer-skip", "adaptive", "ok", h2),
             spec_result(4, "adaptive", 2000.0, 0.012, 30, 1.1)),
            (summary_line(8, 4, "autoregressive", None, "skipped",
                          note="TP 8 needs more than the allocation's 4 tasks"), None),
        ])
        with open(os.path.join(cls.results, "job.json"), "w", encoding="utf-8") as f:
            json.dump({"job_id": "77", "job_name": "selfspec-sweep", "nodes": "node-[a-b]",
                       "num_nodes": 2, "ranks_per_node": 2, "model": "/tmp/m",
                       "status": "failed", "runs_ok": 7, "runs_failed": 2,
                       "runs_skipped": 1}, f)
        cls.out = os.path.join(cls.tmp, "report")
        cls.process = run_script(cls.results, "--out", cls.out)
        with open(os.path.join(cls.out, "report.json"), encoding="utf-8") as f:
            cls.report = json.load(f)
        cls.rows = {row["run"]: row for row in cls.report["runs"]}
        with open(os.path.join(cls.out, "report.md"), encoding="utf-8") as f:
            cls.markdown = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_runs(self):
        self.assertEqual(self.process.returncode, 0, self.process.stderr)
        self.assertEqual(len(self.report["runs"]), 10)
        self.assertEqual(self.report["job"]["job_id"], "77")
        statuses = [row["status"] for row in self.report["runs"]]
        self.assertEqual(statuses.count("ok"), 7)
        self.assertEqual(self.rows["tp2-n2-layer-skip-thompson"]["status"], "failed")
        self.assertEqual(self.rows["tp4-n2-autoregressive"]["status"], "interrupted")
        self.assertEqual(self.rows["tp8-n4-autoregressive"]["status"], "skipped")

    def test_tokens_per_s(self):
        self.assertEqual(self.rows["tp2-n1-autoregressive"]["decode_tokens_per_s"], 1800.0)
        # A self-speculative run's tokens/s is its "speculative" entry's, not the paired
        # autoregressive figure at the top of the same result.
        self.assertEqual(self.rows["tp2-n2-layer-skip-adaptive"]["decode_tokens_per_s"], 1500.0)
        self.assertIsNone(self.rows["tp2-n2-layer-skip-thompson"]["decode_tokens_per_s"])

    def test_speedup_over_autoregressive_at_same_tp_and_nodes(self):
        self.assertAlmostEqual(self.rows["tp1-n1-layer-skip-adaptive"]["speedup"], 1.5)
        self.assertAlmostEqual(self.rows["tp2-n1-layer-skip-adaptive"]["speedup"], 2700 / 1800)
        self.assertAlmostEqual(self.rows["tp2-n2-layer-skip-adaptive"]["speedup"], 1500 / 1200)
        self.assertAlmostEqual(self.rows["tp2-n2-layer-skip-adaptive"]["bench_speedup"], 1.2)
        # The autoregressive run of TP 4 was interrupted: no speedup to compute.
        self.assertIsNone(self.rows["tp4-n2-layer-skip-adaptive"]["speedup"])
        self.assertIsNone(self.rows["tp2-n1-autoregressive"]["speedup"])

    def test_comm_ms_per_token(self):
        self.assertAlmostEqual(self.rows["tp2-n1-layer-skip-adaptive"]["comm_ms_per_token"], 0.1)
        self.assertAlmostEqual(self.rows["tp2-n2-layer-skip-adaptive"]["comm_ms_per_token"], 0.4)
        self.assertAlmostEqual(self.rows["tp4-n2-layer-skip-adaptive"]["comm_ms_per_token"], 0.4)
        # autoregressive runs: bench's own figure (spec runs: their entry's, not this one)
        self.assertAlmostEqual(self.rows["tp2-n1-autoregressive"]["comm_ms_per_token"], 0.05)

    def test_nodes(self):
        row = self.rows["tp2-n2-layer-skip-adaptive"]
        self.assertEqual((row["nodes"], row["ranks_per_node"]), (2, 1))
        self.assertEqual(row["node_list"], ["node-a", "node-b"])

    def test_markdown(self):
        self.assertIn("| tp2-n2-layer-skip-adaptive | 2 | 2 | 1 | node-a, node-b | "
                      "layer-skip + adaptive | ok | 1500.0 | 1.25x | 1.20x | 0.526 | 0.4000 |",
                      self.markdown)
        self.assertIn("| tp2-n2-layer-skip-thompson | 2 | 2 | 1 | node-a, node-b | "
                      "layer-skip + thompson | failed | – |", self.markdown)
        self.assertIn("error: rank 1 died", self.markdown)
        self.assertIn("| interrupted |", self.markdown)
        self.assertIn("TP 8 needs more than the allocation's 4 tasks", self.markdown)
        self.assertIn("Runs: 1 failed, 1 interrupted, 7 ok, 1 skipped.", self.markdown)
        for png in ("tokens_per_s.png", "speedup.png", "comm_per_token.png"):
            self.assertIn(f"({png})", self.markdown)

    def test_pngs(self):
        self.assertEqual(sorted(self.report["plots"]),
                         ["comm_per_token.png", "speedup.png", "tokens_per_s.png"])
        for png in self.report["plots"]:
            width, height = png_size(os.path.join(self.out, png))
            self.assertGreater(width, 100)
            self.assertGreater(height, 100)

    def test_only_ok_runs_are_plotted(self):
        rows = self.report["runs"]
        tokens = plot_sweep.series(rows, "decode_tokens_per_s")
        self.assertEqual(tokens[("autoregressive", 2)], [(2, 1200.0)])  # not the interrupted TP 4
        self.assertNotIn(("layer-skip + thompson", 2), tokens)
        self.assertEqual(plot_sweep.series(rows, "speedup")[("layer-skip + adaptive", 1)],
                         [(1, 1.5), (2, 1.5)])

    def test_default_out_is_the_results_directory(self):
        results = os.path.join(self.tmp, "copy")
        shutil.copytree(self.results, results)
        run = run_script(results)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertTrue(os.path.exists(os.path.join(results, "report.md")))


class ErrorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="plot_sweep_error.")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_error(self, naming):
        run = run_script(self.tmp, "--out", os.path.join(self.tmp, "report"))
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("plot_sweep: error:", run.stderr)
        self.assertIn(naming, run.stderr)
        self.assertNotIn("Traceback", run.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "report", "report.md")))

    def write_summary(self, text):
        with open(os.path.join(self.tmp, "summary.jsonl"), "w", encoding="utf-8") as f:
            f.write(text)

    def test_no_directory(self):
        run = run_script(os.path.join(self.tmp, "nowhere"))
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("nowhere: no such directory", run.stderr)

    def test_no_summary(self):
        self.assert_error(os.path.join(self.tmp, "summary.jsonl") + ": not found")

    def test_malformed_line(self):
        line = summary_line(1, 1, "autoregressive", None, "skipped")
        self.write_summary(json.dumps(line) + "\n{not json\n")
        self.assert_error("summary.jsonl:2: not a JSON line")

    def test_missing_field(self):
        line = summary_line(1, 1, "autoregressive", None, "skipped")
        del line["nodes"]
        self.write_summary(json.dumps(line) + "\n")
        self.assert_error("summary.jsonl:1: missing nodes")

    def test_empty(self):
        self.write_summary("\n")
        self.assert_error("summary.jsonl: no runs")

    def test_missing_result_file(self):
        line = summary_line(2, 1, "autoregressive", None, "ok")
        self.write_summary(json.dumps(line) + "\n")
        self.assert_error(os.path.join(self.tmp, "tp2-n1-autoregressive.json"))

    def test_malformed_result_file(self):
        line = summary_line(2, 1, "layer-skip", "adaptive", "ok")
        self.write_summary(json.dumps(line) + "\n")
        with open(os.path.join(self.tmp, line["result_file"]), "w", encoding="utf-8") as f:
            f.write('{"decode_tokens_per_s": 3')
        self.assert_error("tp2-n1-layer-skip-adaptive.json: not readable JSON")

    def test_result_without_speculative_entries(self):
        line = summary_line(2, 1, "layer-skip", "adaptive", "ok")
        write_results(self.tmp, [(line, ar_result(2, 100.0))])
        self.assert_error("tp2-n1-layer-skip-adaptive.json: run tp2-n1-layer-skip-adaptive is "
                          "layer-skip but its bench result has no \"speculative\" entries")


# A stand-in for srun: checks that --nodes x --ntasks-per-node = --ntasks and runs the command
# once (as rank 0, which logs every rank's start line) with the placement in the environment.
kFakeSrun = r"""#!/usr/bin/env bash
nodes= ntasks= per_node=
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes=*) nodes=${1#*=} ;;
    --ntasks=*) ntasks=${1#*=} ;;
    --ntasks-per-node=*) per_node=${1#*=} ;;
    --*) ;;
    *) break ;;
  esac
  shift
done
if [ -z "$nodes" ] || [ -z "$ntasks" ] || [ -z "$per_node" ] ||
   [ $(( nodes * per_node )) -ne "$ntasks" ]; then
  echo "fake srun: bad placement --nodes=$nodes --ntasks=$ntasks --ntasks-per-node=$per_node" >&2
  exit 9
fi
FAKE_NODES=$nodes FAKE_NTASKS=$ntasks FAKE_PER_NODE=$per_node exec "$@"
"""

# A stand-in for selfspec: `plan` fits; `bench` logs the start lines of FAKE_NTASKS ranks on
# FAKE_NODES hosts and prints a bench result (tokens/s 100 x TP; autoregressive comm 0.0TP ms per
# token, speculative comm 1 ms per rank over 10 tokens) as its last stdout line; FAKE_FAIL_TP
# makes the runs of that TP fail.
kFakeSelfspec = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_CALLS"
command=$1
shift
case "$command" in
  plan) echo '{"fits":true}'; exit 0 ;;
  bench) ;;
  *) exit 2 ;;
esac
tp= spec=none controller= out=
while [ $# -gt 0 ]; do
  case "$1" in
    --tp) tp=$2; shift ;;
    --spec) spec=$2; shift ;;
    --controller) controller=$2; shift ;;
    --out) out=$2; shift ;;
  esac
  shift
done
[ "$tp" = "$FAKE_NTASKS" ] || { echo "error: --tp $tp but $FAKE_NTASKS ranks" >&2; exit 3; }
for (( r = 0; r < FAKE_NTASKS; r++ )); do
  echo "start [rank $r/$FAKE_NTASKS host$(( r / FAKE_PER_NODE ))] pid 1, local rank 0/1"
done >&2
if [ "$tp" = "${FAKE_FAIL_TP:-}" ]; then echo "error: made to fail" >&2; exit 1; fi
tps=$(( 100 * tp ))
result="{\"decode_tokens_per_s\":$tps,\"tp\":$tp"
result+=",\"autoregressive\":{\"comm_ms_per_token\":0.0$tp,\"decode_tokens_per_s\":$tps"
result+=",\"forward_ms\":1.0,\"phases_s\":{\"comm\":0.0001,\"verify\":0.01},\"tokens\":10}"
if [ "$spec" != none ]; then
  result+=",\"speculative\":[{\"controller\":\"$controller\",\"decode_tokens_per_s\":$(( 2 * tps ))"
  result+=",\"phases_s\":{\"comm\":0.00$tp,\"draft\":0.1},\"speedup\":2.0}]"
fi
result+="}"
echo "bench done"
echo "$result" | tee "$out"
"""


class SweepScriptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bench_sweep_test.")
        bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(bin_dir)
        for name, text in (("srun", kFakeSrun), ("selfspec", kFakeSelfspec),
                           ("scancel", "#!/bin/sh\nexit 0\n")):
            with open(os.path.join(bin_dir, name), "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(os.path.join(bin_dir, name), 0o755)
        model = os.path.join(self.tmp, "model")
        os.makedirs(model)
        with open(os.path.join(model, "config.json"), "w", encoding="utf-8") as f:
            f.write("{}\n")
        self.calls = os.path.join(self.tmp, "calls")
        self.env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": self.tmp, "SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "sweep",
                    "SLURM_SUBMIT_DIR": kRepo, "SLURM_JOB_NODELIST": "host[0-1]",
                    "SELFSPEC_BIN": os.path.join(bin_dir, "selfspec"),
                    "SELFSPEC_RESULTS": os.path.join(self.tmp, "results"),
                    "SELFSPEC_MODEL": model, "FAKE_CALLS": self.calls}
        self.out = os.path.join(self.tmp, "results", "sweep-4242")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sweep(self, nodes, per_node, tps, **extra):
        env = dict(self.env, SLURM_JOB_NUM_NODES=str(nodes), SLURM_NTASKS=str(nodes * per_node),
                   SLURM_NTASKS_PER_NODE=str(per_node),
                   SLURM_TASKS_PER_NODE=f"{per_node}(x{nodes})", SWEEP_TP=tps, **extra)
        return subprocess.run(["bash", kSbatch], env=env, capture_output=True, text=True,
                              timeout=120)

    def summary(self):
        with open(os.path.join(self.out, "summary.jsonl"), encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def test_syntax(self):
        run = subprocess.run(["bash", "-n", kSbatch], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_two_nodes_of_two_ranks(self):
        run = self.sweep(2, 2, "1 2 4 8", SWEEP_METHODS="autoregressive adaptive")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        lines = self.summary()
        self.assertEqual([(s["run"], s["status"]) for s in lines], [
            ("tp1-n1-autoregressive", "ok"), ("tp1-n1-layer-skip-adaptive", "ok"),
            ("tp2-n1-autoregressive", "ok"), ("tp2-n1-layer-skip-adaptive", "ok"),
            ("tp2-n2-autoregressive", "ok"), ("tp2-n2-layer-skip-adaptive", "ok"),
            ("tp4-n2-autoregressive", "ok"), ("tp4-n2-layer-skip-adaptive", "ok"),
            ("tp8-n4-autoregressive", "skipped"), ("tp8-n4-layer-skip-adaptive", "skipped")])
        by_run = {s["run"]: s for s in lines}
        spread = by_run["tp2-n2-layer-skip-adaptive"]
        self.assertEqual((spread["nodes"], spread["ranks_per_node"]), (2, 1))
        self.assertEqual(spread["node_list"], ["host0", "host1"])
        self.assertAlmostEqual(spread["comm_ms_per_token"], 1e3 * 0.002 / 10)
        self.assertEqual(spread["result_file"], "tp2-n2-layer-skip-adaptive.json")
        self.assertEqual(spread["result"]["speculative"][0]["controller"], "adaptive")
        self.assertEqual(by_run["tp2-n1-layer-skip-adaptive"]["node_list"], ["host0"])
        self.assertEqual(by_run["tp4-n2-autoregressive"]["node_list"], ["host0", "host1"])
        self.assertAlmostEqual(by_run["tp4-n2-autoregressive"]["comm_ms_per_token"], 0.04)
        self.assertIsNone(by_run["tp8-n4-autoregressive"]["node_list"])
        self.assertIn("needs more than the allocation's 4 tasks",
                      by_run["tp8-n4-autoregressive"]["note"])
        with open(os.path.join(self.out, "job.json"), encoding="utf-8") as f:
            job = json.load(f)
        self.assertEqual((job["num_nodes"], job["ranks_per_node"], job["sweep_nodes"]),
                         (2, 2, [1, 2]))
        self.assertEqual((job["status"], job["runs_ok"], job["runs_skipped"]), ("ok", 8, 2))

        # The report of the sweep it left.
        report = run_script(self.out)
        self.assertEqual(report.returncode, 0, report.stderr)
        with open(os.path.join(self.out, "report.json"), encoding="utf-8") as f:
            rows = {row["run"]: row for row in json.load(f)["runs"]}
        self.assertAlmostEqual(rows["tp4-n2-layer-skip-adaptive"]["speedup"], 2.0)
        self.assertAlmostEqual(rows["tp4-n2-layer-skip-adaptive"]["comm_ms_per_token"], 0.4)

        # Requeued (same job id, same directory): the ok runs are kept, nothing runs again.
        with open(self.calls, encoding="utf-8") as f:
            calls = len(f.readlines())
        run = self.sweep(2, 2, "1 2 4 8", SWEEP_METHODS="autoregressive adaptive")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("tp4-n2-layer-skip-adaptive: done in an earlier attempt of this job, kept",
                      run.stdout)
        with open(self.calls, encoding="utf-8") as f:
            self.assertEqual([c for c in f.readlines()[calls:] if c.startswith("bench")], [])
        self.assertEqual(len(self.summary()), 10)

    def test_two_nodes_of_eight_ranks(self):
        run = self.sweep(2, 8, "1 2 4 8 16", SWEEP_METHODS="autoregressive", FAKE_FAIL_TP="4")
        self.assertNotEqual(run.returncode, 0)  # a failed run fails the job
        self.assertEqual([(s["tp"], s["nodes"], s["ranks_per_node"], s["status"])
                          for s in self.summary()],
                         [(1, 1, 1, "ok"), (2, 1, 2, "ok"), (2, 2, 1, "ok"), (4, 1, 4, "failed"),
                          (4, 2, 2, "failed"), (8, 1, 8, "ok"), (8, 2, 4, "ok"),
                          (16, 2, 8, "ok")])
        failed = self.summary()[3]
        self.assertEqual(failed["note"], "error: made to fail")
        self.assertEqual(failed["node_list"], ["host0"])
        self.assertIsNone(failed["result_file"])

    def test_sweep_nodes(self):
        # SWEEP_NODES="1 4" on 4 x 2 ranks: "1" stands for the fewest nodes that hold TP (TP 4 on
        # 2, TP 8 on 4); "4" only where TP splits evenly over 4 nodes (not TP 2).
        run = self.sweep(4, 2, "2 4 8", SWEEP_METHODS="autoregressive", SWEEP_NODES="1 4")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual([(s["tp"], s["nodes"]) for s in self.summary()],
                         [(2, 1), (4, 2), (4, 4), (8, 4)])
        run = self.sweep(2, 2, "2", SWEEP_NODES="x")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("SWEEP_NODES='x'", run.stderr)


if __name__ == "__main__":
    unittest.main()
