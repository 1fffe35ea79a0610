#!/usr/bin/env python3
"""`selfspec serve` with real clients: the `openai` package from PyPI, curl and raw sockets.

A random 4-layer model with the GPT-2-style test tokenizer and a ChatML template (as
chat_cli_test makes it) is served on 127.0.0.1 at a free port; every request loop is bounded and
every wait has a deadline. What is checked:
  * every endpoint through the openai client (models, completions, chat, streams with usage);
  * 32 concurrent greedy requests, speculating with a layer-skip draft, each equal to
    `selfspec generate` of the same request; a stream equal to the whole response; stop strings;
    the `speculative` extension (off, a max draft, an unknown configuration);
  * 24 kinds of bad request, each an OpenAI error object with its status, and a malformed HTTP
    request; the server keeps serving after all of them; /metrics in Prometheus text;
  * /health 503 while the model loads, --api-key (401), a full queue (503 with Retry-After, nothing lost), a client leaving a stream
    (its slot frees within a step), SIGTERM (503 to new requests, the running one finishes, exit
    0), and under mpirun: TP 2 equal to `generate` at TP 2, and a rank that dies ending the
    server with an error instead of a hang.

Environment: SELFSPEC_BIN (the binary), SELFSPEC_SOURCE_DIR, SELFSPEC_MPIEXEC and
SELFSPEC_MPIEXEC_FLAGS (empty: no MPI, the TP tests skip), SELFSPEC_OPENAI_PATH (where
scripts/get-openai-client.sh put the openai package), CURL (default: curl).
"""

import concurrent.futures
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

BIN = os.environ.get("SELFSPEC_BIN", "selfspec")
SOURCE = os.environ.get("SELFSPEC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MPIEXEC = os.environ.get("SELFSPEC_MPIEXEC", "")
MPIEXEC_FLAGS = shlex.split(os.environ.get("SELFSPEC_MPIEXEC_FLAGS", ""))
CURL = os.environ.get("CURL", "curl")
if os.environ.get("SELFSPEC_OPENAI_PATH"):
    sys.path.insert(0, os.environ["SELFSPEC_OPENAI_PATH"])
import openai  # noqa: E402  (after the path above)

MODEL_NAME = "tiny"
SPEC = ["--spec", "layer-skip", "--skip-attn", "1,2", "--skip-mlp", "2"]
TOKENIZER_DATA = os.path.join(SOURCE, "tests", "data", "tokenizer")
DEADLINE_S = 90


def run(args, timeout=120, ranks=1):
    cmd = [BIN] + args
    if ranks > 1:
        cmd = [MPIEXEC, "-np", str(ranks)] + MPIEXEC_FLAGS + ["--timeout", "100"] + cmd
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def make_model(directory, name="model", layers=4, hidden=64, intermediate=96):
    path = os.path.join(directory, name)
    run(["make-model", "--out", path, "--layers", str(layers), "--hidden", str(hidden), "--heads",
         "8", "--kv-heads", "2", "--intermediate", str(intermediate), "--vocab", "1300", "--seed",
         "5"])
    shutil.copy(os.path.join(TOKENIZER_DATA, "gpt2_style.tokenizer.json"),
                os.path.join(path, "tokenizer.json"))
    with open(os.path.join(TOKENIZER_DATA, "chat_templates", "chatml.jinja")) as f:
        template = f.read()
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": template}, f)
    return path


def generate(model, prompt, max_tokens, chat=False, ranks=1, extra=()):
    args = ["generate", "--model", model, "--prompt", prompt, "--max-new-tokens", str(max_tokens),
            "--threads", "1", "--json"] + SPEC + list(extra)
    if chat:
        args.append("--chat")
    out = json.loads(run(args, ranks=ranks).stdout.strip().splitlines()[-1])
    return out


class Server:
    """A `selfspec serve` process on a free loopback port, stopped (and its group killed) on exit."""

    def __init__(self, model, *args, ranks=1, env=None, ctx=512):
        cmd = [BIN, "serve"] + (["--model", model] if model else []) + [
            "--model-name", MODEL_NAME, "--port", "0", "--threads", "1", "--ctx-size",
            str(ctx)] + list(args)
        env = dict(env or {})
        if ranks > 1:
            cmd = [MPIEXEC, "-np", str(ranks)] + MPIEXEC_FLAGS + ["--timeout", "240"] + cmd
            # mpirun forwards SIGTERM, then SIGKILLs the ranks after this many seconds: the
            # drain's window.
            env.setdefault("OMPI_MCA_odls_base_sigkill_timeout", "20")
        self.lines = []
        self.port = None
        self._seen_port = threading.Event()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True,
                                     env=dict(os.environ, **env))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                self._seen_port.set()
        self._seen_port.set()

    def model_marker(self):
        """The --model argument, to tell this server's processes from others'."""
        args = self.proc.args
        return args[args.index("--model") + 1].encode() if "--model" in args else b""

    def log(self):
        return "".join(self.lines[-60:])

    def wait_listening(self):
        self._seen_port.wait(DEADLINE_S)
        assert self.port, f"no listening line:\n{self.log()}"
        return self

    def wait_ready(self):
        deadline = time.monotonic() + DEADLINE_S
        self.wait_listening()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                status, _, _ = request(self.port, "GET", "/health", timeout=5)
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server not ready in {DEADLINE_S} s:\n{self.log()}")

    def client(self, **kwargs):
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1",
                             api_key=kwargs.pop("api_key", "none"), max_retries=0, timeout=60,
                             **kwargs)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self):
        return self.wait_ready()

    def __exit__(self, *exc):
        self.kill()


def request(port, method, path, body=None, headers=None, timeout=60):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def metrics(port):
    status, _, text = request(port, "GET", "/metrics", timeout=10)
    assert status == 200
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return text, values


def sse_events(text):
    return [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]


class ServeApiTest(unittest.TestCase):
    """One speculating server for the API, identity and bad-input tests."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = make_model(cls.tmp.name)
        cls.server = Server(cls.model, "--parallel", "4", *SPEC).wait_ready()
        cls.client = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.tmp.cleanup()
        assert code == 0, f"server exit {code}:\n{cls.server.log()}"

    def complete(self, prompt, max_tokens=12, **kwargs):
        return self.client.completions.create(model=MODEL_NAME, prompt=prompt,
                                              max_tokens=max_tokens, temperature=0, **kwargs)

    def test_models_health_and_both_endpoints_with_the_openai_client(self):
        models = self.client.models.list()
        self.assertEqual([m.id for m in models.data], [MODEL_NAME])
        self.assertEqual(request(self.server.port, "GET", "/health")[0], 200)
        c = self.complete("Hello world", max_tokens=8)
        self.assertEqual(c.object, "text_completion")
        self.assertEqual(c.usage.prompt_tokens + c.usage.completion_tokens, c.usage.total_tokens)
        self.assertIn(c.choices[0].finish_reason, ("stop", "length"))
        chat = self.client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "Hi there"}],
            max_tokens=8, temperature=0)
        self.assertEqual(chat.object, "chat.completion")
        self.assertEqual(chat.choices[0].message.role, "assistant")
        self.assertGreater(chat.usage.prompt_tokens, 5)

    def test_32_concurrent_greedy_requests_each_equal_generate(self):
        prompts = ["The quick brown fox", "def add(a, b):", "Once upon a time", "1, 2, 3, 4,",
                   "Hello there", "import numpy as np", "the the the the", "Dear Sir,"]
        expected = {}
        for i, prompt in enumerate(prompts):
            chat = i % 2 == 1
            expected[(prompt, chat)] = generate(self.model, prompt, 10 + i, chat=chat)

        def one(k):
            i = k % len(prompts)
            prompt, chat = prompts[i], i % 2 == 1
            if chat:
                r = self.client.chat.completions.create(
                    model=MODEL_NAME, messages=[{"role": "user", "content": prompt}],
                    max_tokens=10 + i, temperature=0)
                return (prompt, chat), r.choices[0].message.content, r.usage.completion_tokens
            r = self.complete(prompt, max_tokens=10 + i)
            return (prompt, chat), r.choices[0].text, r.usage.completion_tokens

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            results = list(pool.map(one, range(32), timeout=DEADLINE_S * 2))
        for key, text, tokens in results:
            self.assertEqual(text, expected[key]["text"], key)
            self.assertEqual(tokens, expected[key]["n_generated"], key)
        _, values = metrics(self.server.port)
        self.assertGreater(values["selfspec_spec_draft_tokens_total"], 0)

    def test_a_stream_carries_the_whole_responses_text(self):
        for chat in (False, True):
            if chat:
                kwargs = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "Tell me"}],
                              max_tokens=20, temperature=0)
                whole = self.client.chat.completions.create(**kwargs)
                chunks = list(self.client.chat.completions.create(
                    stream=True, stream_options={"include_usage": True}, **kwargs))
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                whole_text = whole.choices[0].message.content
                self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
            else:
                whole = self.complete("A stream of", max_tokens=20)
                chunks = list(self.complete("A stream of", max_tokens=20, stream=True,
                                            stream_options={"include_usage": True}))
                text = "".join(c.choices[0].text for c in chunks if c.choices)
                whole_text = whole.choices[0].text
            self.assertEqual(text, whole_text)
            finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
            self.assertEqual(finishes[-1], whole.choices[0].finish_reason)
            self.assertEqual(chunks[-1].usage.completion_tokens, whole.usage.completion_tokens)

    def test_stop_strings_cut_the_text_in_a_stream_and_whole(self):
        full = self.complete("Stop me if", max_tokens=24).choices[0].text
        self.assertGreater(len(full), 8, full)
        stop = full[4:7]
        cut = full[:full.index(stop)]
        whole = self.complete("Stop me if", max_tokens=24, stop=[stop, "\u2603never"])
        self.assertEqual(whole.choices[0].text, cut)
        self.assertEqual(whole.choices[0].finish_reason, "stop")
        streamed = "".join(c.choices[0].text for c in self.complete(
            "Stop me if", max_tokens=24, stop=[stop], stream=True))
        self.assertEqual(streamed, cut)

    def test_the_speculative_extension(self):
        base = self.complete("Extension test", max_tokens=16)
        off = self.complete("Extension test", max_tokens=16, extra_body={"speculative": False})
        self.assertEqual(off.choices[0].text, base.choices[0].text)
        self.assertEqual(off.model_extra["speculation"]["drafted"], 0)
        self.assertFalse(off.model_extra["speculation"]["enabled"])
        self.assertGreater(base.model_extra["speculation"]["drafted"], 0)
        capped = self.complete("Extension test", max_tokens=16,
                               extra_body={"speculative": {"max_draft": 1}})
        self.assertEqual(capped.choices[0].text, base.choices[0].text)
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete("x", extra_body={"speculative": {"config": "no-such"}})
        self.assertIn("no-such", str(raised.exception))

    def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(self):
        good = {"model": MODEL_NAME, "prompt": "hi", "max_tokens": 4}
        chat = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}]}
        long_prompt = " ".join(["word"] * 700)
        cases = [
            ("/v1/completions", "{not json", 400, None),
            ("/v1/completions", "[1, 2]", 400, None),
            ("/v1/completions", {"prompt": "hi"}, 400, "model"),
            ("/v1/completions", dict(good, model="other"), 404, None),
            ("/v1/completions", dict(good, prompt=""), 400, "prompt"),
            ("/v1/completions", dict(good, prompt=[1, 2, 3]), 400, "prompt"),
            ("/v1/completions", dict(good, prompt=["a", "b"]), 400, "prompt"),
            ("/v1/completions", dict(good, max_tokens=0), 400, "max_tokens"),
            ("/v1/completions", dict(good, max_tokens="10"), 400, "max_tokens"),
            ("/v1/completions", dict(good, max_tokens=100000), 400, "max_tokens"),
            ("/v1/completions", dict(good, prompt=long_prompt), 400, "prompt"),
            ("/v1/completions", dict(good, temperature=3), 400, "temperature"),
            ("/v1/completions", dict(good, top_p=0), 400, "top_p"),
            ("/v1/completions", dict(good, n=2), 400, "n"),
            ("/v1/completions", dict(good, stop=["a", "b", "c", "d", "e"]), 400, "stop"),
            ("/v1/completions", dict(good, stop=[""]), 400, None),
            ("/v1/completions", dict(good, logprobs=3), 400, "logprobs"),
            ("/v1/completions", dict(good, frobnicate=1), 400, "frobnicate"),
            ("/v1/completions", dict(good, stream="yes"), 400, "stream"),
            ("/v1/completions", dict(good, stream_options={"include_usage": True}), 400, None),
            ("/v1/completions", dict(good, speculative={"max_draft": 99}), 400, None),
            ("/v1/chat/completions", dict(chat, messages=[]), 400, "messages"),
            ("/v1/chat/completions", dict(chat, messages=[{"role": "tool", "content": "x"}]), 400,
             None),
            ("/v1/chat/completions",
             dict(chat, messages=[{"role": "user", "content": [{"type": "image_url",
                                                                 "image_url": {"url": "x"}}]}]),
             400, None),
            ("/v1/chat/completions", dict(chat, tools=[{"type": "function"}]), 400, "tools"),
            ("/v1/chat/completions", dict(chat, prompt="hi"), 400, None),
        ]
        self.assertGreaterEqual(len(cases), 20)
        for path, body, status, param in cases:
            got, _, text = request(self.server.port, "POST", path, body)
            self.assertEqual(got, status, f"{path} {body!r:.80}: {text}")
            error = json.loads(text)["error"]
            self.assertTrue(error["message"], text)
            self.assertIn("type", error)
            if param is not None:
                self.assertEqual(error["param"], param, text)
        self.assertEqual(request(self.server.port, "GET", "/v1/nothing")[0], 404)
        self.assertEqual(request(self.server.port, "POST", "/v1/completions",
                                 "x" * (5 << 20))[0], 413)
        # A malformed HTTP request line, then a good request on a new connection.
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            s.sendall(b"GARBAGE / HTTP/9\r\n\xff\xfe\r\n\r\n")
            reply = s.recv(4096)
        self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 4"), reply[:80])
        self.assertEqual(self.complete("still serving", max_tokens=3).usage.completion_tokens, 3)
        _, values = metrics(self.server.port)
        self.assertGreaterEqual(
            values['selfspec_requests_total{endpoint="/v1/completions",outcome="client_error"}'], 18)

    def test_curl_whole_and_streamed(self):
        url = f"http://127.0.0.1:{self.server.port}/v1/completions"
        body = json.dumps({"model": MODEL_NAME, "prompt": "curl says", "max_tokens": 6,
                           "temperature": 0})
        whole = subprocess.run([CURL, "-sS", "--max-time", "60", "-H",
                                "Content-Type: application/json", "-d", body, url],
                               capture_output=True, text=True, timeout=90)
        self.assertEqual(whole.returncode, 0, whole.stderr)
        text = json.loads(whole.stdout)["choices"][0]["text"]
        streamed = subprocess.run([CURL, "-sSN", "--max-time", "60", "-d",
                                   json.dumps(dict(json.loads(body), stream=True)), url],
                                  capture_output=True, text=True, timeout=90)
        events = sse_events(streamed.stdout)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual("".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]), text)

    def test_metrics_in_prometheus_text(self):
        self.complete("metrics please", max_tokens=6)
        text, values = metrics(self.server.port)
        for family in ("selfspec_requests_total", "selfspec_prompt_tokens_total",
                       "selfspec_generation_tokens_total", "selfspec_requests_running",
                       "selfspec_requests_queued", "selfspec_kv_slots_used",
                       "selfspec_time_to_first_token_seconds",
                       "selfspec_inter_token_latency_seconds",
                       "selfspec_e2e_request_latency_seconds", "selfspec_spec_draft_tokens_total",
                       "selfspec_spec_accepted_tokens_total", "selfspec_spec_acceptance_rate",
                       "selfspec_spec_accepted_length"):
            self.assertIn(f"# TYPE {family} ", text)
        self.assertGreater(values["selfspec_generation_tokens_total"], 0)
        self.assertGreater(values["selfspec_spec_accepted_length_count"], 0)
        self.assertEqual(values["selfspec_ready"], 1)


class ServeFaultTest(unittest.TestCase):
    """Servers of their own: keys, overload, cancellation, SIGTERM, TP 2 and a dying rank."""

    # A request of this many tokens on the slower model runs for seconds (about 500 tokens/s at
    # the start on one thread, slower as its context grows).
    LONG = 3000

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = make_model(cls.tmp.name)
        cls.slow_model = make_model(cls.tmp.name, "slow", layers=12, hidden=512, intermediate=1536)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_health_is_503_while_the_model_loads(self):
        # LLaMA-2-7B's geometry with three layers of seeded q4_0 weights: seconds of loading.
        server = Server(None, "--architecture",
                        os.path.join(SOURCE, "configs", "models", "llama-2-7b.yaml"), "--layers",
                        "3", "--weights-dtype", "q4_0", "--tokenizer",
                        os.path.join(TOKENIZER_DATA, "gpt2_style.tokenizer.json"))
        try:
            server.wait_listening()
            status, _, text = request(server.port, "GET", "/health", timeout=10)
            self.assertEqual((status, json.loads(text)["status"]), (503, "loading"), text)
            status, _, text = request(server.port, "POST", "/v1/completions",
                                      {"model": MODEL_NAME, "prompt": "early", "max_tokens": 2})
            self.assertEqual(status, 503, text)
            server.wait_ready()
            self.assertEqual(request(server.port, "GET", "/health")[0], 200)
            self.assertEqual(server.stop(), 0)
        finally:
            server.kill()

    def test_api_key(self):
        with Server(self.model, "--api-key", "sekrit") as server:
            with self.assertRaises(openai.AuthenticationError):
                server.client(api_key="wrong").completions.create(model=MODEL_NAME, prompt="x",
                                                                  max_tokens=2)
            r = server.client(api_key="sekrit").completions.create(model=MODEL_NAME, prompt="x",
                                                                   max_tokens=2)
            self.assertEqual(r.usage.completion_tokens, 2)
            self.assertEqual(request(server.port, "GET", "/v1/models")[0], 401)
            self.assertEqual(server.stop(), 0)

    def test_a_full_queue_answers_503_and_loses_nothing(self):
        with Server(self.model, "--parallel", "1", "--max-queued", "1") as server:
            body = {"model": MODEL_NAME, "prompt": "load", "max_tokens": 400, "temperature": 0,
                    "ignore_eos": True}

            def one(_):
                status, headers, text = request(server.port, "POST", "/v1/completions", body,
                                                timeout=DEADLINE_S)
                return status, headers.get("Retry-After"), text

            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                results = list(pool.map(one, range(6), timeout=DEADLINE_S * 2))
            statuses = sorted(r[0] for r in results)
            self.assertTrue(set(statuses) <= {200, 503}, statuses)
            self.assertIn(503, statuses)
            self.assertGreaterEqual(statuses.count(200), 2)
            for status, retry_after, text in results:
                if status == 503:
                    self.assertEqual(retry_after, "1")
                    self.assertIn("capacity", json.loads(text)["error"]["message"])
                else:
                    self.assertEqual(json.loads(text)["usage"]["completion_tokens"], 400)
            self.assertEqual(server.stop(), 0)

    def test_a_client_leaving_a_stream_frees_its_slot(self):
        with Server(self.slow_model, "--parallel", "1", ctx=4096) as server:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            connection.request("POST", "/v1/completions", json.dumps(
                {"model": MODEL_NAME, "prompt": "go on", "max_tokens": self.LONG, "stream": True}))
            response = connection.getresponse()
            self.assertEqual(response.status, 200)
            response.fp.readline()  # the first event
            connection.sock.shutdown(socket.SHUT_RDWR)
            connection.close()
            # Sooner than the request's own end: 3000 tokens take over 6 s here unloaded.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                _, values = metrics(server.port)
                if values["selfspec_requests_running"] == 0:
                    break
                time.sleep(0.05)
            self.assertEqual(values["selfspec_requests_running"], 0)
            self.assertEqual(
                values.get('selfspec_requests_total{endpoint="/v1/completions",outcome="cancelled"}'),
                1)
            r = server.client().completions.create(model=MODEL_NAME, prompt="next", max_tokens=3)
            self.assertEqual(r.usage.completion_tokens, 3)
            self.assertEqual(server.stop(), 0)

    def test_sigterm_finishes_the_running_request_refuses_new_ones_and_exits_0(self):
        with Server(self.slow_model, "--parallel", "1", ctx=4096) as server:
            body = {"model": MODEL_NAME, "prompt": "drain", "max_tokens": self.LONG,
                    "temperature": 0, "ignore_eos": True}
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                running = pool.submit(request, server.port, "POST", "/v1/completions", body)
                deadline = time.monotonic() + 20
                while metrics(server.port)[1]["selfspec_requests_running"] == 0:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.02)
                server.proc.send_signal(signal.SIGTERM)
                # Draining starts within a poll of the signal (20 ms; more on a loaded machine).
                deadline = time.monotonic() + 10
                while request(server.port, "GET", "/health")[0] != 503:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.02)
                status, headers, text = request(server.port, "POST", "/v1/completions", body)
                self.assertEqual(status, 503, text)
                status, _, text = running.result(DEADLINE_S)
            self.assertEqual(status, 200, text)
            self.assertEqual(json.loads(text)["usage"]["completion_tokens"], self.LONG)
            self.assertEqual(server.proc.wait(30), 0, server.log())

    @unittest.skipUnless(MPIEXEC, "needs MPI (mpirun and several ranks)")
    def test_tp2_requests_equal_generate_at_tp2(self):
        prompts = ["Tensor parallel", "two ranks", "one answer", "def f(x):"]
        expected = [generate(self.model, p, 12, ranks=2) for p in prompts]
        with Server(self.model, "--parallel", "4", *SPEC, ranks=2) as server:
            client = server.client()

            def one(p):
                return client.completions.create(model=MODEL_NAME, prompt=p, max_tokens=12,
                                                 temperature=0).choices[0].text

            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                texts = list(pool.map(one, prompts, timeout=DEADLINE_S * 2))
            self.assertEqual(texts, [e["text"] for e in expected])
            # mpirun forwards SIGTERM to every rank; rank 0 drains and both end at once (mpirun's
            # own status after a forwarded signal is not 0).
            self.assertNotEqual(server.stop(), 124)
            self.assertIn("serve: drained; exiting", server.log())

    @unittest.skipUnless(MPIEXEC, "needs MPI (mpirun and several ranks)")
    def test_a_dying_rank_ends_the_server_with_an_error_not_a_hang(self):
        with Server(self.model, "--parallel", "1", ranks=2,
                    env={"SELFSPEC_COMM_TIMEOUT_S": "10"}) as server:
            follower = self.rank_pid(server, 1)
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            connection.request("POST", "/v1/completions", json.dumps(
                {"model": MODEL_NAME, "prompt": "doomed", "max_tokens": 490, "stream": True}))
            response = connection.getresponse()
            response.fp.readline()
            os.kill(follower, signal.SIGKILL)
            start = time.monotonic()
            try:
                while response.fp.readline():
                    self.assertLess(time.monotonic() - start, 60)
            except OSError:
                pass  # the connection was cut: an error, not a hang
            code = server.proc.wait(60)
            self.assertNotEqual(code, 0, server.log())
            self.assertLess(time.monotonic() - start, 60)

    @staticmethod
    def rank_pid(server, rank):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        environ = f.read().split(b"\0")
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                if (b"serve" in cmdline and b"mpirun" not in cmdline
                        and f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ
                        and server.model_marker() in cmdline):
                    return int(entry)
            time.sleep(0.2)
        raise AssertionError(f"no rank {rank} process found")


if __name__ == "__main__":
    unittest.main(verbosity=2)
