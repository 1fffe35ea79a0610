"""Tests scripts/dev/serve_load.py, the load generator for OpenAI-compatible servers.

Its pure parts (the nearest-rank percentile, the figures of a list of request records, the SSE
parsing of completion and chat chunks, VmRSS parsing, the Poisson arrivals, the prompt file),
then whole runs against a fake streaming server on 127.0.0.1 (a ThreadingHTTPServer on port 0
that streams a few chunks with short sleeps, a usage chunk and [DONE], and can answer 503 with
Retry-After): a closed loop at concurrency 2, an open loop at 20 requests/s for 0.5 s with every
third request refused, a refused connection, a request past its deadline, the RSS sampler on this
process, and the command line. Standard library only; loopback only.

    python3 tests/scripts/serve_load_test.py
"""
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kScript = os.path.join(kRepo, "scripts", "dev", "serve_load.py")
sys.path.insert(0, os.path.join(kRepo, "scripts", "dev"))

import serve_load  # noqa: E402


class FakeServer:
    """A fake OpenAI streaming server: each request streams `chunks` text chunks ("t0 ", "t1 ",
    ...) `delay` seconds apart, a finish chunk, a usage chunk (unless usage=False) and [DONE],
    chunked; with overload_every=K the K-th, 2K-th, ... request is answered 503 with
    Retry-After: 1."""

    def __init__(self, chunks=4, delay=0.01, overload_every=0, usage=True):
        self.chunks, self.delay = chunks, delay
        self.overload_every, self.usage = overload_every, usage
        self.lock = threading.Lock()
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies = []
        self.paths = []
        self.auth = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def write_chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def event(self, obj):
                payload = obj if isinstance(obj, str) else json.dumps(obj)
                self.write_chunk(("data: " + payload + "\n\n").encode("utf-8"))

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with fake.lock:
                    fake.count += 1
                    number = fake.count
                    fake.bodies.append(body)
                    fake.paths.append(self.path)
                    fake.auth.append(self.headers.get("Authorization"))
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                self.counted = True
                try:
                    self.answer(body, number)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the deadline test)
                finally:
                    self.leave()

            def leave(self):
                # Leaves the in-flight count before the last bytes go out: a client that has read
                # them may send its next request before this thread runs again.
                if self.counted:
                    self.counted = False
                    with fake.lock:
                        fake.in_flight -= 1

            def answer(self, body, number):
                self.close_connection = True
                if fake.overload_every and number % fake.overload_every == 0:
                    data = b'{"error": {"message": "busy", "type": "server_busy"}}'
                    self.send_response(503)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                    self.leave()
                    self.end_headers()
                    self.wfile.write(data)
                    return
                chat = self.path.endswith("/chat/completions")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": "x", "object": "chat.completion.chunk" if chat else
                        "text_completion", "model": body.get("model")}

                def choice(text, finish=None):
                    if chat:
                        return {"index": 0, "delta": {"content": text} if text else {},
                                "finish_reason": finish}
                    return {"index": 0, "text": text, "finish_reason": finish}

                if chat:
                    self.event(dict(base, choices=[{"index": 0, "delta": {"role": "assistant"},
                                                    "finish_reason": None}]))
                for i in range(fake.chunks):
                    time.sleep(fake.delay)
                    self.event(dict(base, choices=[choice(f"t{i} ")]))
                self.event(dict(base, choices=[choice("", "length")]))
                if fake.usage:
                    self.event(dict(base, choices=[], usage={
                        "prompt_tokens": 7, "completion_tokens": fake.chunks,
                        "total_tokens": 7 + fake.chunks}))
                self.leave()
                self.event("[DONE]")
                self.write_chunk(b"")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


kPrompts = [("p0", "def a():"), ("p1", "def b():"), ("p2", "def c():")]


def free_port():
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PercentileTest(unittest.TestCase):
    def test_nearest_rank(self):
        values = [7, 3, 10, 1, 5, 9, 2, 8, 4, 6]
        self.assertEqual(serve_load.percentile(values, 50), 5)
        self.assertEqual(serve_load.percentile(values, 90), 9)
        self.assertEqual(serve_load.percentile(values, 99), 10)
        self.assertEqual(serve_load.percentile(values, 100), 10)
        self.assertEqual(serve_load.percentile(values, 1), 1)
        self.assertEqual(serve_load.percentile([4.5], 50), 4.5)
        self.assertEqual(serve_load.percentile([1, 2], 50), 1)
        self.assertIsNone(serve_load.percentile([], 50))

    def test_describe(self):
        self.assertEqual(serve_load.describe([1, 2, 3, 4]),
                         {"p50": 2, "p90": 4, "p99": 4, "mean": 2.5})
        self.assertEqual(serve_load.describe([], ("p50", "mean")), {"p50": None, "mean": None})

    def test_summarize(self):
        records = [
            {"outcome": "ok", "send_at": 10.0, "end_at": 11.0, "ttft_s": 0.2, "e2e_s": 1.0,
             "tokens": 5, "chunk_times_s": [0.2, 0.4, 1.0]},
            {"outcome": "ok", "send_at": 10.5, "end_at": 12.0, "ttft_s": 0.5, "e2e_s": 1.5,
             "tokens": 1, "chunk_times_s": [0.5]},
            {"outcome": "overload", "send_at": 10.6, "end_at": 10.7, "tokens": 0},
            {"outcome": "error", "send_at": 10.7, "end_at": 10.8, "tokens": 0},
        ]
        s = serve_load.summarize(records)
        self.assertEqual(s["requests"], 4)
        self.assertEqual(s["outcomes"], {"ok": 2, "overload": 1, "error": 1, "timeout": 0})
        self.assertAlmostEqual(s["wall_s"], 2.0)
        self.assertEqual(s["completion_tokens"], 6)
        self.assertAlmostEqual(s["tokens_per_s"], 3.0)
        self.assertAlmostEqual(s["tpot_s"]["mean"], 0.2)  # (1.0 - 0.2) / 4; the 1-token one skipped
        self.assertAlmostEqual(s["request_tokens_per_s"]["p50"], 5.0)
        self.assertAlmostEqual(s["itl_s"]["mean"], 0.4)  # gaps 0.2 and 0.6
        self.assertAlmostEqual(s["itl_s"]["p90"], 0.6)
        self.assertEqual(s["ttft_s"]["p50"], 0.2)
        self.assertEqual(s["e2e_s"]["p99"], 1.5)
        empty = serve_load.summarize([])
        self.assertIsNone(empty["wall_s"])
        self.assertIsNone(empty["tokens_per_s"])
        self.assertIsNone(empty["ttft_s"]["p50"])


class SseTest(unittest.TestCase):
    def test_lines(self):
        self.assertEqual(serve_load.parse_sse_line(b'data: {"a": 1}\r\n'), ("data", {"a": 1}))
        self.assertEqual(serve_load.parse_sse_line('data:{"a": 2}\n'), ("data", {"a": 2}))
        self.assertEqual(serve_load.parse_sse_line("data: [DONE]\n"), ("done", None))
        self.assertIsNone(serve_load.parse_sse_line("\n"))
        self.assertIsNone(serve_load.parse_sse_line(": keep-alive\n"))
        self.assertIsNone(serve_load.parse_sse_line("event: message\n"))
        with self.assertRaises(ValueError):
            serve_load.parse_sse_line("data: {broken\n")

    def test_completion_stream(self):
        lines = [
            b'data: {"choices": [{"index": 0, "text": "Hel", "finish_reason": null}]}\n', b"\n",
            b'data: {"choices": [{"index": 0, "text": "", "finish_reason": null}]}\n', b"\n",
            b'data: {"choices": [{"index": 0, "text": "lo", "finish_reason": "stop"}]}\n', b"\n",
            b'data: {"choices": [], "usage": {"completion_tokens": 3}}\n', b"\n",
            b"data: [DONE]\n", b'data: {"choices": [{"text": "after"}]}\n']
        times = [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4, 0.5, 0.6]
        r = serve_load.parse_stream(lines, times)
        self.assertEqual(r["text"], "Hello")
        self.assertEqual(r["chunk_times_s"], [0.1, 0.3])
        self.assertEqual(r["ttft_s"], 0.1)
        self.assertEqual(r["tokens"], 3)
        self.assertFalse(r["tokens_estimated"])
        self.assertEqual(r["finish_reason"], "stop")
        self.assertTrue(r["done"])
        self.assertIsNone(r["error"])

    def test_chat_stream_role_first_without_usage(self):
        lines = [
            'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}, '
            '"finish_reason": null}]}',
            'data: {"choices": [{"index": 0, "delta": {"content": "A"}, "finish_reason": null}]}',
            'data: {"choices": [{"index": 0, "delta": {"content": null}, "finish_reason": null}]}',
            'data: {"choices": [{"index": 0, "delta": {"content": "B"}, "finish_reason": null}]}',
            'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}',
            "data: [DONE]"]
        r = serve_load.parse_stream(lines)
        self.assertEqual(r["text"], "AB")
        self.assertEqual(r["chunk_times_s"], [1.0, 3.0])
        self.assertEqual(r["ttft_s"], 1.0)
        self.assertEqual(r["tokens"], 2)
        self.assertTrue(r["tokens_estimated"])
        self.assertEqual(r["finish_reason"], "length")
        self.assertTrue(r["done"])

    def test_errors_in_stream(self):
        r = serve_load.parse_stream(['data: {"error": {"message": "boom"}}', "data: [DONE]"])
        self.assertIn("boom", r["error"])
        r = serve_load.parse_stream(["data: {oops", "data: [DONE]"])
        self.assertIn("bad data line", r["error"])
        r = serve_load.parse_stream(['data: {"choices": [{"text": "x"}]}'])
        self.assertFalse(r["done"])

    def test_request_body(self):
        body = serve_load.request_body("m", "hi", False, 8, 0.0, 3, False)
        self.assertEqual(body, {"model": "m", "stream": True,
                                "stream_options": {"include_usage": True}, "max_tokens": 8,
                                "temperature": 0.0, "seed": 3, "prompt": "hi"})
        body = serve_load.request_body("m", "hi", True, 8, 0.5, 3, True)
        self.assertEqual(body["messages"], [{"role": "user", "content": "hi"}])
        self.assertNotIn("prompt", body)
        self.assertIs(body["ignore_eos"], True)


class HelpersTest(unittest.TestCase):
    def test_vmrss(self):
        text = "Name:\tx\nVmPeak:\t  9999 kB\nVmRSS:\t    2048 kB\nThreads:\t1\n"
        self.assertEqual(serve_load.parse_vmrss_mib(text), 2.0)
        self.assertEqual(serve_load.parse_vmrss_mib("Name:\tkthread\n"), 0.0)
        self.assertGreater(serve_load.rss_mib([os.getpid()]), 0.0)
        gone = 4194304 + 12345  # above any pid_max
        self.assertEqual(serve_load.rss_mib([gone]), 0.0)
        self.assertEqual(serve_load.rss_summary([[0, 1.0], [1, 3.0], [2, 2.0]]),
                         {"samples": [[0, 1.0], [1, 3.0], [2, 2.0]], "first": 1.0, "max": 3.0,
                          "last": 2.0})

    def test_arrivals(self):
        a = serve_load.arrival_times(20, 0.5, 0)
        self.assertEqual(a, serve_load.arrival_times(20, 0.5, 0))
        self.assertNotEqual(a, serve_load.arrival_times(20, 0.5, 1))
        self.assertEqual(a, sorted(a))
        self.assertTrue(all(0 < t < 0.5 for t in a))
        many = serve_load.arrival_times(100, 50, 7)
        self.assertAlmostEqual(len(many) / 50, 100, delta=5)

    def test_load_prompts(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                for i in range(6):
                    split = "calibration" if i % 3 == 0 else "evaluation"
                    f.write(json.dumps({"id": f"H/{i}", "task": "code", "split": split,
                                        "prompt": f"def f{i}():"}) + "\n")
                f.write("\n")
            self.assertEqual([p for p, _ in serve_load.load_prompts(path)],
                             ["H/1", "H/2", "H/4", "H/5"])
            self.assertEqual(serve_load.load_prompts(path, "calibration", 1),
                             [("H/0", "def f0():")])
            self.assertEqual(len(serve_load.load_prompts(path, "all")), 6)
            self.assertEqual(serve_load.load_prompts(path, "nothing"), [])


class RunTest(unittest.TestCase):
    def test_closed_loop(self):
        with FakeServer(chunks=4, delay=0.02) as server:
            result = serve_load.run_load(server.url, "fake", kPrompts, concurrency=2, requests=5,
                                         max_tokens=4, timeout=10, label="closed")
        self.assertEqual(result["mode"], "concurrency")
        self.assertEqual(result["concurrency"], 2)
        self.assertEqual(result["label"], "closed")
        self.assertEqual(result["requests"], 5)
        self.assertEqual(result["outcomes"], {"ok": 5, "overload": 0, "error": 0, "timeout": 0})
        self.assertEqual(result["completion_tokens"], 20)
        self.assertGreater(result["tokens_per_s"], 0)
        self.assertGreater(result["wall_s"], 0)
        self.assertLessEqual(result["ttft_s"]["p99"], result["e2e_s"]["p99"])
        self.assertIsNotNone(result["itl_s"]["p50"])
        self.assertIsNotNone(result["tpot_s"]["mean"])
        self.assertGreater(result["request_tokens_per_s"]["mean"], 0)
        self.assertEqual(len(result["per_request"]), 5)
        self.assertEqual(server.max_in_flight, 2)
        self.assertEqual(sorted(r["prompt_id"] for r in result["per_request"]),
                         ["p0", "p0", "p1", "p1", "p2"])
        for r in result["per_request"]:
            self.assertEqual(r["status"], 200)
            self.assertEqual(r["outcome"], "ok")
            self.assertEqual(r["text"], "t0 t1 t2 t3 ")
            self.assertEqual(r["tokens"], 4)
            self.assertFalse(r["tokens_estimated"])
            self.assertEqual(r["finish_reason"], "length")
            self.assertEqual(len(r["chunk_times_s"]), 4)
            self.assertLessEqual(r["ttft_s"], r["e2e_s"])
            self.assertEqual(r["ttft_s"], r["chunk_times_s"][0])
        self.assertEqual(set(server.paths), {"/v1/completions"})
        body = server.bodies[0]
        self.assertTrue(body["stream"])
        self.assertEqual(body["stream_options"], {"include_usage": True})
        self.assertEqual((body["max_tokens"], body["temperature"], body["seed"]), (4, 0.0, 0))
        self.assertNotIn("ignore_eos", body)

    def test_chat_without_usage(self):
        with FakeServer(chunks=3, delay=0.005, usage=False) as server:
            result = serve_load.run_load(server.url + "/", "fake", kPrompts, concurrency=1,
                                         chat=True, ignore_eos=True, timeout=10)
        self.assertEqual(result["outcomes"]["ok"], 3)
        self.assertEqual(set(server.paths), {"/v1/chat/completions"})
        self.assertEqual(server.bodies[1]["messages"], [{"role": "user", "content": "def b():"}])
        self.assertIs(server.bodies[0]["ignore_eos"], True)
        for r in result["per_request"]:
            self.assertEqual(r["text"], "t0 t1 t2 ")
            self.assertEqual(r["tokens"], 3)
            self.assertTrue(r["tokens_estimated"])

    def test_open_loop_with_overload(self):
        seed = 0
        expected = len(serve_load.arrival_times(20, 0.5, seed))
        self.assertGreaterEqual(expected, 3, "pick a seed with at least 3 arrivals")
        with FakeServer(chunks=3, delay=0.01, overload_every=3) as server:
            start = time.monotonic()
            result = serve_load.run_load(server.url, "fake", kPrompts, rate=20, duration=0.5,
                                         seed=seed, timeout=10)
            # Wall-clock bounds are loose: the suite runs this beside other tests on 2 cores.
            self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(result["mode"], "rate")
        self.assertEqual((result["rate"], result["duration"]), (20, 0.5))
        self.assertNotIn("concurrency", result)
        self.assertEqual(result["requests"], expected)
        overloads = expected // 3
        self.assertEqual(result["outcomes"], {"ok": expected - overloads, "overload": overloads,
                                              "error": 0, "timeout": 0})
        self.assertEqual(result["completion_tokens"], 3 * (expected - overloads))
        refused = [r for r in result["per_request"] if r["outcome"] == "overload"]
        self.assertEqual(len(refused), overloads)
        for r in refused:
            self.assertEqual(r["status"], 503)
            self.assertEqual(r["retry_after"], "1")
            self.assertIn("busy", r["error"])
            self.assertEqual(r["tokens"], 0)
        sends = [r["send_s"] for r in result["per_request"]]
        self.assertEqual(sends, sorted(sends))
        self.assertLess(sends[-1], 0.5 + 3.0)

    def test_refused_connection_is_an_error(self):
        url = f"http://127.0.0.1:{free_port()}"
        result = serve_load.run_load(url, "fake", kPrompts, concurrency=1, requests=2, timeout=5)
        self.assertEqual(result["outcomes"], {"ok": 0, "overload": 0, "error": 2, "timeout": 0})
        self.assertEqual(result["completion_tokens"], 0)
        self.assertIsNone(result["ttft_s"]["p50"])
        for r in result["per_request"]:
            self.assertIsNone(r["status"])
            self.assertIn("Refused", r["error"])
        result = serve_load.run_load(url, "fake", kPrompts, rate=50, duration=0.1, timeout=5)
        self.assertEqual(result["outcomes"]["error"], result["requests"])

    def test_deadline_is_a_timeout(self):
        # The whole stream would take 6 s; the deadline cuts it at 0.4 s (bounds loose: the
        # suite runs this beside other tests on 2 cores).
        with FakeServer(chunks=20, delay=0.3) as server:
            start = time.monotonic()
            result = serve_load.run_load(server.url, "fake", kPrompts[:1], concurrency=1,
                                         timeout=0.4)
            self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(result["outcomes"]["timeout"], 1)
        r = result["per_request"][0]
        self.assertEqual(r["outcome"], "timeout")
        self.assertLess(r["e2e_s"], 4.0)

    def test_rss_sampling(self):
        with FakeServer(chunks=2, delay=0.01) as server:
            result = serve_load.run_load(server.url, "fake", kPrompts[:1], concurrency=1,
                                         pids=[os.getpid()], timeout=10)
        rss = result["rss_mib"]
        self.assertGreaterEqual(len(rss["samples"]), 2)
        for t, mib in rss["samples"]:
            self.assertGreaterEqual(t, 0)
            self.assertGreater(mib, 0)
        self.assertEqual(rss["first"], rss["samples"][0][1])
        self.assertEqual(rss["last"], rss["samples"][-1][1])
        self.assertEqual(rss["max"], max(m for _, m in rss["samples"]))


class CommandLineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.prompts = os.path.join(self.tmp.name, "prompts.jsonl")
        with open(self.prompts, "w", encoding="utf-8") as f:
            for i, split in enumerate(["calibration", "evaluation", "evaluation"]):
                f.write(json.dumps({"id": f"HumanEval/{i}", "task": "code", "split": split,
                                    "prompt": f"def f{i}():"}) + "\n")

    def script(self, *args):
        return subprocess.run([sys.executable, kScript, *args], capture_output=True, text=True,
                              timeout=30)

    def test_writes_out(self):
        out = os.path.join(self.tmp.name, "out.json")
        with FakeServer(chunks=3, delay=0.01) as server:
            run = self.script("--url", server.url, "--model", "fake", "--prompts-file",
                              self.prompts, "--max-prompts", "1", "--concurrency", "1",
                              "--requests", "2", "--max-tokens", "3", "--api-key", "sekret",
                              "--pid", str(os.getpid()), "--label", "cli", "--out", out)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out, encoding="utf-8") as f:
            result = json.load(f)
        for key in ("label", "url", "model", "mode", "concurrency", "max_tokens", "requests",
                    "outcomes", "wall_s", "completion_tokens", "tokens_per_s",
                    "request_tokens_per_s", "ttft_s", "itl_s", "tpot_s", "e2e_s", "rss_mib",
                    "per_request"):
            self.assertIn(key, result)
        self.assertEqual(result["label"], "cli")
        self.assertEqual(result["outcomes"]["ok"], 2)
        self.assertEqual([r["prompt_id"] for r in result["per_request"]],
                         ["HumanEval/1", "HumanEval/1"])
        self.assertEqual(server.auth, ["Bearer sekret"] * 2)
        self.assertEqual(server.bodies[0]["prompt"], "def f1():")
        lines = run.stdout.strip().splitlines()
        self.assertEqual(len(lines), 1)
        summary = json.loads(lines[0])
        self.assertNotIn("per_request", summary)
        self.assertNotIn("samples", summary["rss_mib"])
        self.assertEqual(summary["completion_tokens"], 6)

    def test_bad_arguments(self):
        base = ["--url", "http://127.0.0.1:1", "--model", "m", "--prompts-file", self.prompts]
        for extra in (["--concurrency", "1", "--rate", "2", "--duration", "1"],
                      ["--rate", "2"], [], ["--concurrency", "0"],
                      ["--concurrency", "1", "--duration", "2"]):
            run = self.script(*base, *extra)
            self.assertEqual(run.returncode, 2, extra)
        run = self.script(*base, "--split", "nothing", "--concurrency", "1")
        self.assertEqual(run.returncode, 2)
        self.assertIn("no prompts", run.stderr)


if __name__ == "__main__":
    unittest.main()
