#!/usr/bin/env python3
"""A load generator for OpenAI-compatible HTTP servers (streaming completions), to compare
`selfspec serve` with llama.cpp's llama-server (or any server speaking the same API).

    serve_load.py --url http://127.0.0.1:PORT --model NAME --prompts-file FILE.jsonl
        [--split evaluation] [--max-prompts N] [--chat] [--max-tokens 64] [--temperature 0]
        [--seed 0] [--api-key KEY] [--ignore-eos]
        (--concurrency C [--requests N] | --rate R --duration S)
        [--pid PID ...] [--timeout 600] [--label TEXT] [--out OUT.json]

Examples (the HumanEval prompts of `scripts/get-prompts.sh humaneval`; any prompt set of
bench/prompts/README.md's format works):

    build/selfspec serve --model M.gguf --port 8080 --parallel 4 --model-name m &
    python3 scripts/dev/serve_load.py --url http://127.0.0.1:8080 --model m \\
        --prompts-file "$(scripts/get-prompts.sh humaneval)" --concurrency 4 --max-tokens 128 \\
        --pid $! --label selfspec-c4 --out out/load/selfspec-c4.json

    llama-server -m M.gguf --port 8081 -np 4 -c 8192 &
    python3 scripts/dev/serve_load.py --url http://127.0.0.1:8081 --model m \\
        --prompts-file humaneval.jsonl --rate 2 --duration 60 --ignore-eos --pid $! \\
        --label llama-server-r2 --out out/load/llama-server-r2.json

Prompts: the JSON Lines file's records ({"id", "task", "split", "prompt"}) of --split
("evaluation" by default; "all": every line), the first --max-prompts of them, cycled in order
(request i gets prompt i mod count).

Each request is POST /v1/completions (with --chat: /v1/chat/completions, one user message) with
stream=true, stream_options.include_usage=true, max_tokens, temperature and seed (the same seed
for every request); --ignore-eos adds "ignore_eos": true, which `selfspec serve`, llama-server
and vLLM accept (the same token count from every server). The URL's path, if
any, is put before /v1/.... --api-key sends "Authorization: Bearer KEY".

Load:
  * --concurrency C (closed loop): C threads, each sending its next request when its last one
    ended, until --requests N have been sent (default: one per prompt).
  * --rate R --duration S (open loop): requests arrive as a Poisson process of rate R per second
    (exponential gaps drawn from random.Random(--seed)) for S seconds, each on its own thread at
    its time, whatever the server's state; nothing is retried.
Every request has a deadline (--timeout seconds from its send; also the socket timeout); one
past it is a "timeout". Outcomes: "ok" (200 and a stream ending in `data: [DONE]`), "overload"
(HTTP 503; its Retry-After is recorded), "timeout", "error" (refused connection, any other
status, an error object in the stream, a stream without [DONE]).
--pid PID (repeatable) samples the resident memory (VmRSS of /proc/PID/status, MiB, summed over
the pids; a pid that is gone counts 0) once a second during the run.

Output: a one-line JSON summary on stdout (the object below without per_request and the RSS
samples); --out FILE writes the whole object. Times are seconds; percentiles are nearest-rank;
a figure with nothing to measure is null.
  * requests: requests sent; outcomes: {"ok", "overload", "error", "timeout"} counts.
  * wall_s: from the first send to the last request's end (all outcomes).
  * completion_tokens: the sum over ok requests of usage.completion_tokens (where a server sends
    no usage, the text-carrying chunks are counted and the request says "tokens_estimated").
  * tokens_per_s: completion_tokens / wall_s, the aggregate throughput.
  * request_tokens_per_s {p50, mean}: one request's decoding speed, (tokens - 1) / (end - first
    token), over ok requests with at least 2 tokens.
  * ttft_s {p50, p90, p99, mean}: time to first token, from send to the first chunk with text.
  * itl_s {p50, p90, p99, mean}: inter-token latency, every gap between consecutive text chunks
    of ok requests. Like vLLM's benchmark_serving it is measured per streamed chunk: a
    speculative server streams several tokens in one chunk, so its ITL is the time between
    bursts, not per token; compare tpot_s too.
  * tpot_s {p50, mean}: time per output token after the first, (e2e - ttft) / (tokens - 1).
  * e2e_s {p50, p90, p99, mean}: end-to-end latency of ok requests, send to [DONE].
  * rss_mib (with --pid): {"samples": [[seconds since start, MiB], ...], "first", "max", "last"}.
  * per_request: [{"prompt_id", "status", "outcome", "ttft_s", "e2e_s", "tokens",
    "finish_reason", "text", "chunk_times_s" (relative to the send), "send_s" (relative to the
    first send), "tokens_estimated", "retry_after", "error"}] in send order.

Exit status 0 whatever the outcomes; 2: bad arguments or an empty prompt set.
Our tests (tests/scripts/serve_load_test.py) only ever point it at a fake server on 127.0.0.1;
do the same with real servers: this is a benchmark tool, not a client for remote services.
Standard library only.
"""

import argparse
import http.client
import json
import math
import random
import socket
import sys
import threading
import time
import urllib.parse

kOutcomes = ("ok", "overload", "error", "timeout")
kJoinSlack_s = 5.0
kErrorBodyLimit = 2000


# ---------------------------------------------------------------------------------------------
# Statistics (pure)

def percentile(values, p):
    """The nearest-rank p-th percentile (0 < p <= 100) of values; None for an empty list."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def mean(values):
    """The arithmetic mean of values; None for an empty list."""
    return sum(values) / len(values) if values else None


def describe(values, keys=("p50", "p90", "p99", "mean")):
    """{"p50": ..., "mean": ...} of values for the keys asked (pNN or mean); None when empty."""
    out = {}
    for key in keys:
        out[key] = mean(values) if key == "mean" else percentile(values, float(key[1:]))
    return out


def request_figures(record):
    """(ttft, e2e, tokens) of one request record; None where unknown."""
    return record.get("ttft_s"), record.get("e2e_s"), record.get("tokens")


def summarize(records):
    """The aggregate figures of a list of per-request records (see the module docstring)."""
    outcomes = {name: 0 for name in kOutcomes}
    for record in records:
        outcomes[record["outcome"]] = outcomes.get(record["outcome"], 0) + 1
    sends = [r["send_at"] for r in records if r.get("send_at") is not None]
    ends = [r["end_at"] for r in records if r.get("end_at") is not None]
    wall = (max(ends) - min(sends)) if sends and ends else None
    ok = [r for r in records if r["outcome"] == "ok"]
    tokens = sum(r.get("tokens") or 0 for r in ok)
    ttfts, e2es, itls, tpots, speeds = [], [], [], [], []
    for record in ok:
        ttft, e2e, n = request_figures(record)
        if e2e is not None:
            e2es.append(e2e)
        if ttft is not None:
            ttfts.append(ttft)
        times = record.get("chunk_times_s") or []
        itls.extend(b - a for a, b in zip(times, times[1:]))
        if ttft is not None and e2e is not None and n is not None and n >= 2:
            tpots.append((e2e - ttft) / (n - 1))
            if e2e > ttft:
                speeds.append((n - 1) / (e2e - ttft))
    return {
        "requests": len(records),
        "outcomes": outcomes,
        "wall_s": wall,
        "completion_tokens": tokens,
        "tokens_per_s": (tokens / wall) if wall else None,
        "request_tokens_per_s": describe(speeds, ("p50", "mean")),
        "ttft_s": describe(ttfts),
        "itl_s": describe(itls),
        "tpot_s": describe(tpots, ("p50", "mean")),
        "e2e_s": describe(e2es),
    }


def parse_vmrss_mib(status_text):
    """VmRSS of a /proc/PID/status text in MiB; 0.0 when the line is missing."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            fields = line.split()
            if len(fields) >= 2:
                value = float(fields[1])
                unit = fields[2].lower() if len(fields) >= 3 else "kb"
                scale = {"kb": 1024.0, "mb": 1024.0 ** 2, "gb": 1024.0 ** 3}.get(unit, 1024.0)
                return value * scale / (1024.0 ** 2)
    return 0.0


def rss_mib(pids):
    """The summed VmRSS of pids in MiB; a pid that is gone (or unreadable) counts 0."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{int(pid)}/status", encoding="utf-8", errors="replace") as f:
                total += parse_vmrss_mib(f.read())
        except OSError:
            pass
    return total


def rss_summary(samples):
    """{"samples", "first", "max", "last"} of [[t, mib], ...]."""
    values = [mib for _, mib in samples]
    return {"samples": samples, "first": values[0] if values else None,
            "max": max(values) if values else None, "last": values[-1] if values else None}


def arrival_times(rate, duration, seed):
    """The send offsets (seconds) of a Poisson process of rate per second in [0, duration)."""
    rng = random.Random(seed)
    times, t = [], 0.0
    if rate <= 0:
        return times
    while True:
        t += rng.expovariate(rate)
        if t >= duration:
            return times
        times.append(t)


# ---------------------------------------------------------------------------------------------
# Server-sent events (pure)

def parse_sse_line(line):
    """One line of an SSE stream: ("data", object), ("done", None), or None (a blank line, a
    comment, another field). Raises ValueError on a data line that is not JSON."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")
    line = line.rstrip("\r\n")
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if payload == "[DONE]":
        return ("done", None)
    if not payload:
        return None
    return ("data", json.loads(payload))


def chunk_fields(obj):
    """(text, finish_reason, usage) of one completion or chat-completion chunk: text is
    choices[0].text or choices[0].delta.content ("" when none), usage the chunk's usage object
    or None."""
    text, finish = "", None
    choices = obj.get("choices") or []
    if choices and isinstance(choices[0], dict):
        choice = choices[0]
        if isinstance(choice.get("text"), str):
            text = choice["text"]
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str):
            text += delta["content"]
        finish = choice.get("finish_reason")
    usage = obj.get("usage")
    return text, finish, usage if isinstance(usage, dict) else None


class StreamParser:
    """Accumulates one streamed response, line by line, with each line's arrival time (seconds
    since the send)."""

    def __init__(self):
        self.text_parts = []
        self.chunk_times = []
        self.finish_reason = None
        self.usage_tokens = None
        self.done = False
        self.error = None

    def feed(self, line, t):
        """Takes one line received t seconds after the send; returns True at [DONE]."""
        if self.done:
            return True
        try:
            event = parse_sse_line(line)
        except ValueError as e:
            self.error = self.error or f"bad data line: {e}"
            return False
        if event is None:
            return False
        kind, obj = event
        if kind == "done":
            self.done = True
            return True
        if not isinstance(obj, dict):
            self.error = self.error or f"data line is not an object: {obj!r}"[:kErrorBodyLimit]
            return False
        if "error" in obj:
            self.error = self.error or json.dumps(obj["error"])[:kErrorBodyLimit]
            return False
        text, finish, usage = chunk_fields(obj)
        if text:
            self.text_parts.append(text)
            self.chunk_times.append(t)
        if finish is not None:
            self.finish_reason = finish
        if usage is not None and isinstance(usage.get("completion_tokens"), int):
            self.usage_tokens = usage["completion_tokens"]
        return False

    def result(self):
        """{"text", "chunk_times_s", "ttft_s", "tokens", "tokens_estimated", "finish_reason",
        "done", "error"}."""
        estimated = self.usage_tokens is None
        return {
            "text": "".join(self.text_parts),
            "chunk_times_s": list(self.chunk_times),
            "ttft_s": self.chunk_times[0] if self.chunk_times else None,
            "tokens": len(self.chunk_times) if estimated else self.usage_tokens,
            "tokens_estimated": estimated,
            "finish_reason": self.finish_reason,
            "done": self.done,
            "error": self.error,
        }


def parse_stream(lines, times=None):
    """StreamParser's result for a whole list of lines (times: each line's time, default its
    index)."""
    parser = StreamParser()
    for i, line in enumerate(lines):
        if parser.feed(line, times[i] if times is not None else float(i)):
            break
    return parser.result()


# ---------------------------------------------------------------------------------------------
# Requests

def load_prompts(path, split="evaluation", max_prompts=None):
    """[(id, prompt)] of a prompt-set JSONL file: the records of split ("all": every record),
    the first max_prompts of them."""
    prompts = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
                raise ValueError(f"{path}:{number}: not a record with a string 'prompt'")
            if split != "all" and record.get("split") != split:
                continue
            prompts.append((str(record.get("id", f"line-{number}")), record["prompt"]))
    if max_prompts is not None:
        prompts = prompts[:max_prompts]
    return prompts


def request_body(model, prompt, chat, max_tokens, temperature, seed, ignore_eos):
    """The JSON body of one streamed request."""
    body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": max_tokens, "temperature": temperature, "seed": seed}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if ignore_eos:
        body["ignore_eos"] = True
    return body


class Target:
    """Where and how to send: the parsed URL, the endpoint, the fixed request settings."""

    def __init__(self, url, model, chat=False, max_tokens=64, temperature=0.0, seed=0,
                 api_key=None, ignore_eos=False, timeout=600.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"--url {url}: expected http://HOST:PORT")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        endpoint = "/v1/chat/completions" if chat else "/v1/completions"
        self.path = parsed.path.rstrip("/") + endpoint
        self.model, self.chat, self.max_tokens = model, chat, max_tokens
        self.temperature, self.seed, self.ignore_eos = temperature, seed, ignore_eos
        self.api_key, self.timeout = api_key, timeout

    def connection(self, timeout):
        kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=timeout)


def send_request(target, prompt_id, prompt, record, clock=time.monotonic):
    """Sends one request and fills record (a dict already holding "send_at") with its outcome
    and figures; never raises."""
    send = record["send_at"]
    deadline = send + target.timeout
    parser = StreamParser()
    conn = None
    record.update({"prompt_id": prompt_id, "status": None, "retry_after": None, "error": None})

    def remaining():
        return deadline - clock()

    def finish(outcome, error=None):
        end = clock()
        result = parser.result()
        record.update(result)
        record.pop("done", None)
        record["error"] = error if error is not None else record.get("error")
        record["outcome"] = outcome
        record["end_at"] = end
        record["e2e_s"] = end - send

    try:
        body = json.dumps(request_body(target.model, prompt, target.chat, target.max_tokens,
                                       target.temperature, target.seed, target.ignore_eos))
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if target.api_key:
            headers["Authorization"] = f"Bearer {target.api_key}"
        conn = target.connection(max(0.001, remaining()))
        conn.request("POST", target.path, body=body.encode("utf-8"), headers=headers)
        sock = conn.sock
        if sock is not None:
            sock.settimeout(max(0.001, remaining()))
        response = conn.getresponse()
        record["status"] = response.status
        if response.status != 200:
            record["retry_after"] = response.getheader("Retry-After")
            try:
                if sock is not None:
                    sock.settimeout(max(0.001, min(remaining(), 5.0)))
                detail = response.read(kErrorBodyLimit).decode("utf-8", errors="replace")
            except (OSError, http.client.HTTPException):
                detail = ""
            finish("overload" if response.status == 503 else "error",
                   f"HTTP {response.status} {response.reason}: {detail}".strip())
            return record
        while True:
            left = remaining()
            if left <= 0:
                finish("timeout", f"no [DONE] within {target.timeout} s")
                return record
            if sock is not None:
                sock.settimeout(left)
            line = response.readline()
            if not line:
                break
            if parser.feed(line, clock() - send):
                break
        if parser.error is not None:
            finish("error", parser.error)
        elif not parser.done:
            finish("error", "the stream ended without data: [DONE]")
        else:
            finish("ok")
    except (socket.timeout, TimeoutError):
        finish("timeout", f"timed out ({target.timeout} s)")
    except (OSError, http.client.HTTPException, ValueError) as e:
        finish("error", f"{type(e).__name__}: {e}")
    except Exception as e:  # a record for anything else too; the run must go on
        finish("error", f"{type(e).__name__}: {e}")
    finally:
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
    return record


# ---------------------------------------------------------------------------------------------
# The run

class Recorder:
    """The records of a run, in send order, under a lock."""

    def __init__(self, clock=time.monotonic):
        self.lock = threading.Lock()
        self.records = []
        self.clock = clock

    def start(self, prompt_id):
        record = {"prompt_id": prompt_id, "outcome": None, "send_at": self.clock()}
        with self.lock:
            self.records.append(record)
        return record

    def finished(self, deadline_error):
        """The records; one still unfinished becomes a "timeout" (its thread missed the join
        deadline)."""
        with self.lock:
            records = list(self.records)
        now = self.clock()
        for record in records:
            if record.get("outcome") is None:
                record.update({"outcome": "timeout", "error": deadline_error, "end_at": now,
                               "e2e_s": now - record["send_at"]})
                record.setdefault("status", None)
        return records


class RssSampler(threading.Thread):
    """Samples the summed VmRSS of pids once per interval until stop() (first sample at once,
    a last one at stop)."""

    def __init__(self, pids, start_at, interval=1.0, clock=time.monotonic):
        super().__init__(daemon=True)
        self.pids, self.start_at, self.interval, self.clock = list(pids), start_at, interval, clock
        self.samples = []
        self.stopping = threading.Event()

    def sample(self):
        self.samples.append([round(self.clock() - self.start_at, 3), rss_mib(self.pids)])

    def run(self):
        self.sample()
        while not self.stopping.wait(self.interval):
            self.sample()

    def stop(self):
        self.stopping.set()
        self.join(timeout=kJoinSlack_s)
        self.sample()
        return self.samples


def join_all(threads, deadline):
    """Joins threads until deadline (monotonic); returns how many are still alive."""
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return sum(thread.is_alive() for thread in threads)


def run_closed(target, prompts, concurrency, requests, recorder):
    """C workers, each sending its next request when its last ended, until requests sent."""
    counter = {"next": 0}
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = counter["next"]
                if i >= requests:
                    return
                counter["next"] = i + 1
            prompt_id, prompt = prompts[i % len(prompts)]
            send_request(target, prompt_id, prompt, recorder.start(prompt_id))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    rounds = math.ceil(requests / concurrency) if concurrency else 0
    deadline = time.monotonic() + rounds * (target.timeout + 1.0) + kJoinSlack_s
    join_all(threads, deadline)


def run_open(target, prompts, rate, duration, seed, recorder):
    """A request at each arrival of a Poisson process, each on its own thread."""
    start = time.monotonic()
    threads = []
    for i, offset in enumerate(arrival_times(rate, duration, seed)):
        delay = start + offset - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        prompt_id, prompt = prompts[i % len(prompts)]
        record = recorder.start(prompt_id)
        thread = threading.Thread(target=send_request, args=(target, prompt_id, prompt, record),
                                  daemon=True)
        thread.start()
        threads.append(thread)
    join_all(threads, time.monotonic() + target.timeout + kJoinSlack_s)


def public_record(record, origin):
    """A per-request record as written out (times relative to its send / the run's start)."""
    return {
        "prompt_id": record.get("prompt_id"),
        "status": record.get("status"),
        "outcome": record.get("outcome"),
        "ttft_s": record.get("ttft_s"),
        "e2e_s": record.get("e2e_s"),
        "tokens": record.get("tokens"),
        "finish_reason": record.get("finish_reason"),
        "text": record.get("text", ""),
        "chunk_times_s": record.get("chunk_times_s", []),
        "send_s": (record["send_at"] - origin) if origin is not None else None,
        "tokens_estimated": record.get("tokens_estimated"),
        "retry_after": record.get("retry_after"),
        "error": record.get("error"),
    }


def run_load(url, model, prompts, concurrency=None, requests=None, rate=None, duration=None,
             chat=False, max_tokens=64, temperature=0.0, seed=0, api_key=None, ignore_eos=False,
             pids=(), timeout=600.0, label=None, rss_interval=1.0):
    """Runs one load (closed loop with concurrency, else open loop with rate and duration) on
    prompts ([(id, text)]) and returns the result object of the module docstring."""
    if not prompts:
        raise ValueError("no prompts")
    if (concurrency is None) == (rate is None):
        raise ValueError("give either concurrency or rate (with duration)")
    target = Target(url, model, chat=chat, max_tokens=max_tokens, temperature=temperature,
                    seed=seed, api_key=api_key, ignore_eos=ignore_eos, timeout=timeout)
    recorder = Recorder()
    start = time.monotonic()
    sampler = None
    if pids:
        sampler = RssSampler(pids, start, interval=rss_interval)
        sampler.start()
    try:
        if concurrency is not None:
            if concurrency < 1:
                raise ValueError("concurrency must be at least 1")
            total = len(prompts) if requests is None else requests
            run_closed(target, prompts, concurrency, total, recorder)
        else:
            if duration is None or duration <= 0 or rate <= 0:
                raise ValueError("rate and duration must be positive")
            run_open(target, prompts, rate, duration, seed, recorder)
    finally:
        samples = sampler.stop() if sampler is not None else None
    records = recorder.finished("unfinished at the join deadline")
    result = {"label": label, "url": url, "model": model}
    if concurrency is not None:
        result.update({"mode": "concurrency", "concurrency": concurrency})
    else:
        result.update({"mode": "rate", "rate": rate, "duration": duration})
    result.update({"chat": chat, "max_tokens": max_tokens, "temperature": temperature,
                   "seed": seed, "ignore_eos": ignore_eos, "timeout": timeout})
    result.update(summarize(records))
    if samples is not None:
        result["rss_mib"] = rss_summary(samples)
    origin = min((r["send_at"] for r in records), default=None)
    result["per_request"] = [public_record(r, origin) for r in records]
    return result


def summary_line(result):
    """The one-line stdout summary: the result without per_request and the RSS samples."""
    short = {k: v for k, v in result.items() if k != "per_request"}
    if "rss_mib" in short:
        short["rss_mib"] = {k: v for k, v in short["rss_mib"].items() if k != "samples"}
    return json.dumps(short, sort_keys=False)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Load generator for OpenAI-compatible streaming servers (see the docstring).")
    parser.add_argument("--url", required=True, help="http://HOST:PORT of the server")
    parser.add_argument("--model", required=True, help="the model name to send")
    parser.add_argument("--prompts-file", required=True, help="prompt-set JSON Lines file")
    parser.add_argument("--split", default="evaluation",
                        help="split of the prompts to use (default evaluation; all: every line)")
    parser.add_argument("--max-prompts", type=int, default=None, help="use the first N prompts")
    parser.add_argument("--chat", action="store_true", help="use /v1/chat/completions")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0,
                        help="the requests' seed and the arrival process's")
    parser.add_argument("--api-key", default=None, help="sent as Authorization: Bearer KEY")
    parser.add_argument("--ignore-eos", action="store_true",
                        help='send "ignore_eos": true (llama-server, vLLM)')
    load = parser.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", type=int, help="closed loop with C workers")
    load.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    parser.add_argument("--requests", type=int, default=None,
                        help="closed loop: requests in all (default: one per prompt)")
    parser.add_argument("--duration", type=float, default=None,
                        help="open loop: seconds of arrivals")
    parser.add_argument("--pid", type=int, action="append", default=[],
                        help="sample this process's VmRSS (repeatable; summed)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per-request deadline, s")
    parser.add_argument("--label", default=None, help="free text copied to the output")
    parser.add_argument("--out", default=None, help="write the whole result JSON here")
    args = parser.parse_args(argv)
    if args.concurrency is not None:
        if args.concurrency < 1:
            parser.error("--concurrency must be at least 1")
        if args.duration is not None:
            parser.error("--duration goes with --rate")
        if args.requests is not None and args.requests < 1:
            parser.error("--requests must be at least 1")
    else:
        if args.rate <= 0:
            parser.error("--rate must be positive")
        if args.duration is None or args.duration <= 0:
            parser.error("--rate needs a positive --duration")
        if args.requests is not None:
            parser.error("--requests goes with --concurrency")
    if args.max_prompts is not None and args.max_prompts < 1:
        parser.error("--max-prompts must be at least 1")
    if args.max_tokens < 0:
        parser.error("--max-tokens must not be negative")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        prompts = load_prompts(args.prompts_file, args.split, args.max_prompts)
    except (OSError, ValueError) as e:
        print(f"serve_load.py: {e}", file=sys.stderr)
        return 2
    if not prompts:
        print(f"serve_load.py: {args.prompts_file}: no prompts of split '{args.split}'",
              file=sys.stderr)
        return 2
    try:
        result = run_load(args.url, args.model, prompts, concurrency=args.concurrency,
                          requests=args.requests, rate=args.rate, duration=args.duration,
                          chat=args.chat, max_tokens=args.max_tokens,
                          temperature=args.temperature, seed=args.seed, api_key=args.api_key,
                          ignore_eos=args.ignore_eos, pids=args.pid, timeout=args.timeout,
                          label=args.label)
    except ValueError as e:
        print(f"serve_load.py: {e}", file=sys.stderr)
        return 2
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    print(summary_line(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
