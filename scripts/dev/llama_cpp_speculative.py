#!/usr/bin/env python3
"""llama.cpp's own decoding, plain and speculative, of a GGUF over a set of prompts, one process
per prompt, as one JSON report to set beside selfspec's `bench` on the same prompts (issue 36
item 4: llama.cpp's speculative decoding of the same GGUF, with Qwen2.5-Coder-0.5B as the draft
model, and its draftless n-gram types). Standard library only.

What it measures, per prompt (greedy: --temp 0 --top-k 1 -s 1, --ignore-eos, -c 4096; the prompt
text exactly as in the prompts file, no chat template, given with -f: the file carries one newline
more, which llama.cpp's -f drops, and --no-escape keeps backslashes as they are; stdin is
/dev/null):

  * --config plain: `llama-completion ... -no-cnv`. Its stderr's common_perf_print lines give the
    figures: `prompt eval time = X ms / N tokens` (prefill) and `eval time = X ms / R runs`
    (decode). The eval time leaves out the first generated token, which is sampled from the
    prefill's logits, so -n 64 gives 63 decode tokens: the same count as selfspec bench's
    autoregressive decode figure.
  * --config draft (--draft-model GGUF, `--spec-type draft-simple -md DRAFT`) and --config
    ngram-simple, ngram-mod, ngram-cache, ngram-map-k (`--spec-type NAME`, no draft model):
    `llama-speculative-simple`, whose stderr gives `encoded N tokens in S seconds` (prefill),
    `decoded N tokens in S seconds` (decode), `n_drafted` and `n_accept`.

What it does not measure, or measures differently:

  * llama-speculative-simple's decode time includes the drafting (the draft model's forwards or
    the n-gram lookups) and the verification, and starts with the forward of the prompt's last
    token, which gives the first generated token: its decode token count includes that first
    token, and it overshoots -n (it stops only once more than -n tokens are accepted: -n 16
    decodes 17 or more, 25 seen with ngram-cache). Its "encoded" figure counts all the prompt's
    tokens but its forward covers all but the last; for the draft config it includes the draft
    model's prefill.
    Tokens per second (tokens / seconds) stays comparable; the totals are not equal work.
  * n_drafted counts only drafts that were verified (llama.cpp ignores discarded small drafts);
    the acceptance rate is n_accept / n_drafted, null when nothing was drafted (llama.cpp then
    prints `accept = -nan%`).
  * Load time, the process's start-up and the prompt's tokenization are in wall_s only.
  * "text" is the run's stdout after the echoed prompt (text_prompt_removed says whether the
    prompt was found there), its last 2000 characters: it may end with newlines llama.cpp
    prints after the generation, and the speculative runs' text is longer (the overshoot).
  * llama.cpp decodes from the quantized blocks; selfspec may dequantize at load, so this
    compares engines, not equal work. One run per prompt: no repetitions, no medians; the load
    average before and after each run is recorded to judge the noise.

Run (the llama.cpp build of scripts/dev/llama_cpp_baseline.sh; everything after `--` is appended
to llama.cpp's command line and recorded):

    python3 scripts/dev/llama_cpp_speculative.py \\
        --bin-dir ~/.cache/selfspec/llama.cpp/build/bin \\
        --model ~/.cache/selfspec/models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf \\
        --prompts-file ~/.cache/selfspec/prompts/humaneval.jsonl \\
        --ids-from-bench out/bench.json --gen 64 --threads 4 \\
        --config draft \\
        --draft-model ~/.cache/selfspec/models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf \\
        --out out/llama-draft.json [--log-dir out/llama-draft-logs] [-- --spec-draft-n-max 6]

Prompts: --ids ID1,ID2,... or --ids-from-bench BENCH.json (the ids of a selfspec bench report's
per_prompt, in order). A failing run (non-zero exit, timeout, output without the figures) stops
the script with a message naming the prompt and the run's log (stdout and stderr), kept in
--log-dir if given, else in a temporary folder that is removed only on success. Progress: one
line per prompt on stderr. Tests: tests/scripts/llama_cpp_speculative_test.py.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

kProgram = "llama_cpp_speculative"
kSpecTypes = {"draft": "draft-simple", "ngram-simple": "ngram-simple", "ngram-mod": "ngram-mod",
              "ngram-cache": "ngram-cache", "ngram-map-k": "ngram-map-k"}
kConfigs = ("plain",) + tuple(kSpecTypes)
kCtx = 4096
kTextChars = 2000


class ParseError(ValueError):
    """llama.cpp's output lacks, or repeats, a figure the report needs."""


class Failure(Exception):
    """A run or an input that stops the script; the message says what and where."""


def fail(message):
    """Exits 1 with the message, prefixed with the script's name, on stderr."""
    sys.exit(f"{kProgram}: error: {message}")


kNumber = r"([0-9]+(?:\.[0-9]*)?)"


def _one(pattern, text, what, program):
    """The groups of pattern's one match in text; ParseError unless there is exactly one."""
    found = re.findall(pattern, text, flags=re.MULTILINE)
    if len(found) != 1:
        raise ParseError(f"expected one {what} line in {program}'s stderr, found {len(found)}")
    return found[0]


def parse_completion_stderr(text):
    """llama-completion's figures from its stderr (common_perf_print): prompt_tokens and
    prefill_s from `prompt eval time = X ms / N tokens`, decode_tokens and decode_s from
    `eval time = X ms / R runs`. ParseError if a line is missing or repeated, or no decode ran."""
    program = "llama-completion"
    ms, tokens = _one(r"common_perf_print:\s+prompt eval time =\s*" + kNumber + r" ms /\s*(\d+) "
                      r"tokens", text, "'prompt eval time = ... ms / N tokens'", program)
    figures = {"prompt_tokens": int(tokens), "prefill_s": round(float(ms) / 1000.0, 6)}
    ms, runs = _one(r"common_perf_print:\s+eval time =\s*" + kNumber + r" ms /\s*(\d+) runs",
                    text, "'eval time = ... ms / N runs'", program)
    figures.update(decode_tokens=int(runs), decode_s=round(float(ms) / 1000.0, 6))
    if figures["decode_tokens"] <= 0 or figures["decode_s"] <= 0:
        raise ParseError(f"{program} reports {runs} decode runs in {ms} ms: nothing to measure "
                         "(is --gen at least 2?)")
    return figures


def parse_speculative_stderr(text):
    """llama-speculative-simple's figures from its stderr: prompt_tokens and prefill_s from
    `encoded N tokens in S seconds`, decode_tokens and decode_s from `decoded N tokens in S
    seconds`, drafted and accepted from `n_drafted = N` and `n_accept = N`, and acceptance_rate
    (accepted / drafted, None when nothing was drafted). ParseError if a line is missing or
    repeated, or the figures do not hold together."""
    program = "llama-speculative-simple"
    tokens, s = _one(r"\bencoded\s+(\d+) tokens in\s+" + kNumber + r" seconds", text,
                     "'encoded N tokens in S seconds'", program)
    figures = {"prompt_tokens": int(tokens), "prefill_s": float(s)}
    tokens, s = _one(r"\bdecoded\s+(\d+) tokens in\s+" + kNumber + r" seconds", text,
                     "'decoded N tokens in S seconds'", program)
    figures.update(decode_tokens=int(tokens), decode_s=float(s))
    drafted = int(_one(r"\bn_drafted\s*=\s*(-?\d+)\s*$", text, "'n_drafted = N'", program))
    accepted = int(_one(r"\bn_accept\s*=\s*(-?\d+)\s*$", text, "'n_accept = N'", program))
    if figures["decode_tokens"] <= 0 or figures["decode_s"] <= 0:
        raise ParseError(f"{program} reports {figures['decode_tokens']} tokens decoded in "
                         f"{figures['decode_s']} s: nothing to measure")
    if not 0 <= accepted <= drafted:
        raise ParseError(f"{program} reports n_accept = {accepted} of n_drafted = {drafted}")
    figures.update(drafted=drafted, accepted=accepted,
                   acceptance_rate=accepted / drafted if drafted else None)
    return figures


def load_prompts(path):
    """The prompts file's prompts, {id: prompt text} in file order (JSONL of {"id", "prompt",
    ...}; blank lines skipped). Failure on a bad line, a missing field or a repeated id."""
    prompts = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Failure(f"cannot read the prompts file {path} ({e})") from e
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise Failure(f"{path}:{number}: not JSON ({e})") from e
        if not isinstance(record, dict) or not isinstance(record.get("id"), str) \
                or not isinstance(record.get("prompt"), str):
            raise Failure(f'{path}:{number}: expected an object with string "id" and "prompt"')
        if record["id"] in prompts:
            raise Failure(f"{path}:{number}: prompt id {record['id']!r} appears twice")
        prompts[record["id"]] = record["prompt"]
    return prompts


def read_bench_ids(path):
    """The prompt ids of a selfspec bench report (per_prompt[i]["id"]), in order."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        raise Failure(f"cannot read the bench report {path} as JSON ({e})") from e
    per_prompt = report.get("per_prompt") if isinstance(report, dict) else None
    if not isinstance(per_prompt, list) or not per_prompt:
        raise Failure(f'{path}: expected a selfspec bench report with a non-empty "per_prompt"')
    ids = []
    for i, record in enumerate(per_prompt):
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise Failure(f'{path}: per_prompt[{i}] has no string "id"')
        ids.append(record["id"])
    return ids


def parse_ids(text):
    """--ids's comma-separated ids (spaces around each ignored); Failure if none."""
    ids = [i.strip() for i in text.split(",") if i.strip()]
    if not ids:
        raise Failure(f"--ids {text!r} names no prompt")
    return ids


def select_prompts(prompts, ids, prompts_file="the prompts file"):
    """[(id, prompt text)] for ids, in their order; Failure on an id that is not in prompts or
    one asked twice."""
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise Failure(f"prompt id(s) asked more than once: {', '.join(repeated)}")
    unknown = [i for i in ids if i not in prompts]
    if unknown:
        raise Failure(f"prompt id(s) not in {prompts_file}: {', '.join(unknown)}")
    return [(i, prompts[i]) for i in ids]


def build_command(config, bin_dir, model, prompt_file, gen, threads, draft_model=None,
                  extra_args=()):
    """The argv of one run: llama-completion for plain, llama-speculative-simple otherwise."""
    # --no-escape: the prompt's text as is (llama.cpp would turn a backslash-n in a docstring into
    # a newline).
    common = ["-f", prompt_file, "--no-escape", "-n", str(gen), "-t", str(threads), "--temp", "0",
              "--top-k", "1", "-s", "1", "-c", str(kCtx)]
    if config == "plain":
        argv = [os.path.join(bin_dir, "llama-completion"), "-m", model] + common + \
            ["-no-cnv", "--ignore-eos"]
    elif config in kSpecTypes:
        argv = [os.path.join(bin_dir, "llama-speculative-simple"), "-m", model, "--spec-type",
                kSpecTypes[config]]
        if config == "draft":
            argv += ["-md", draft_model]
        argv += common + ["--ignore-eos"]
    else:
        raise Failure(f"unknown config {config!r} (one of {', '.join(kConfigs)})")
    return argv + list(extra_args)


def generated_text(stdout, prompt):
    """The generation in a run's stdout (llama.cpp echoes the prompt first): what follows the
    prompt's first occurrence, or all of stdout if the prompt is not there; its last
    kTextChars characters. Second value: whether the prompt was found and cut off."""
    at = stdout.find(prompt) if prompt else -1
    text = stdout[at + len(prompt):] if at >= 0 else stdout
    return text[-kTextChars:], at >= 0


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg writes them; None if unreadable."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return None


def cpu_model():
    """lscpu's "Model name" (else /proc/cpuinfo's "model name"); None if neither says."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL, env=dict(os.environ, LC_ALL="C")).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def build_record(bin_dir):
    """BIN_DIR/../selfspec-build.json (the build's package and commit), None if absent."""
    path = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "selfspec-build.json")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"unparsed": text}


def safe_name(prompt_id):
    """A file name for a prompt id (HumanEval/1 -> HumanEval_1)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", prompt_id).strip("._") or "prompt"


def write_log(path, argv, outcome, stdout, stderr):
    """One run's log: its command, how it ended, its stdout and its stderr."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("command: " + " ".join(argv) + "\n" + f"outcome: {outcome}\n")
        f.write("===== stdout =====\n" + stdout + "\n===== stderr =====\n" + stderr)


def prompt_file_text(prompt):
    """What the prompt file holds: llama.cpp's -f drops one trailing newline of the file it reads
    (common/arg.cpp), so the file carries one more, and llama.cpp reads the prompt exactly. (A
    code prompt ending in a newline and the same prompt without it are different prompts: the
    model continues the first with a function body and often restates the second's signature.)"""
    return prompt + "\n"


def run_prompt(config, prompt_id, prompt, argv_for, work_dir, timeout_s):
    """Runs one prompt: writes the prompt file in work_dir, runs argv_for(prompt_file) with
    stdin /dev/null, keeps the log in work_dir and returns (argv, per-prompt record). Failure
    (naming the prompt and the log) on a non-zero exit, a timeout or unparseable output."""
    name = safe_name(prompt_id)
    prompt_file = os.path.join(work_dir, f"{name}.prompt.txt")
    with open(prompt_file, "w", encoding="utf-8", newline="") as f:
        f.write(prompt_file_text(prompt))
    argv = argv_for(prompt_file)
    log = os.path.join(work_dir, f"{name}.{config}.log")
    before = loadavg()
    start = time.monotonic()
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout_s)
        stdout, stderr, outcome = done.stdout, done.stderr, f"exit status {done.returncode}"
    except subprocess.TimeoutExpired as e:
        done, stdout, stderr = None, e.stdout or b"", e.stderr or b""
        outcome = f"killed after the {timeout_s} s timeout"
    except OSError as e:
        raise Failure(f"{prompt_id}: cannot run {argv[0]} ({e})") from e
    wall_s = time.monotonic() - start
    after = loadavg()
    stdout = stdout.decode("utf-8", errors="replace")
    stderr = stderr.decode("utf-8", errors="replace")
    write_log(log, argv, outcome, stdout, stderr)
    if done is None or done.returncode != 0:
        raise Failure(f"{prompt_id}: {os.path.basename(argv[0])} {outcome}; see {log}")
    try:
        if config == "plain":
            figures = parse_completion_stderr(stderr)
            figures.update(drafted=None, accepted=None, acceptance_rate=None)
        else:
            figures = parse_speculative_stderr(stderr)
    except ParseError as e:
        raise Failure(f"{prompt_id}: {e}; see {log}") from e
    text, prompt_cut = generated_text(stdout, prompt)
    record = {"id": prompt_id, **figures,
              "decode_tokens_per_s": figures["decode_tokens"] / figures["decode_s"],
              "loadavg_before": before, "loadavg_after": after, "wall_s": wall_s,
              "text": text, "text_prompt_removed": prompt_cut}
    return argv, record


def overall(per_prompt):
    """The totals over the prompts: decode tokens / decode seconds, and drafted / accepted
    (None for plain decoding; acceptance_rate None when nothing was drafted)."""
    tokens = sum(p["decode_tokens"] for p in per_prompt)
    seconds = sum(p["decode_s"] for p in per_prompt)
    speculative = bool(per_prompt) and all(p["drafted"] is not None for p in per_prompt)
    drafted = sum(p["drafted"] for p in per_prompt) if speculative else None
    accepted = sum(p["accepted"] for p in per_prompt) if speculative else None
    return {"prompts": len(per_prompt),
            "prompt_tokens": sum(p["prompt_tokens"] for p in per_prompt),
            "prefill_s": sum(p["prefill_s"] for p in per_prompt),
            "decode_tokens": tokens, "decode_s": seconds,
            "decode_tokens_per_s": tokens / seconds if seconds > 0 else None,
            "drafted": drafted, "accepted": accepted,
            "acceptance_rate": accepted / drafted if drafted else None}


def progress_line(record):
    """One prompt's progress line."""
    line = (f"{record['id']}: {record['decode_tokens_per_s']:.2f} tok/s ({record['decode_tokens']}"
            f" tokens in {record['decode_s']:.3f} s; prefill {record['prompt_tokens']} tokens in "
            f"{record['prefill_s']:.3f} s)")
    if record["drafted"] is not None:
        rate = record["acceptance_rate"]
        line += (f", drafted {record['drafted']} accepted {record['accepted']}"
                 f" ({'n/a' if rate is None else f'{rate:.1%}'})")
    return line + f", load {record['loadavg_before']} -> {record['loadavg_after']}"


def parse_args(argv):
    """(options, extra llama.cpp args): everything after the first `--` is the latter."""
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(
        prog="llama_cpp_speculative.py",
        description="llama.cpp's plain or speculative decoding of a GGUF over prompts, one "
        "process per prompt, as one JSON report (see the file's top comment).",
        epilog="Arguments after `--` are appended to llama.cpp's command line.")
    parser.add_argument("--bin-dir", required=True, help="llama.cpp's build/bin")
    parser.add_argument("--model", required=True, help="the target GGUF")
    parser.add_argument("--prompts-file", required=True, help='JSONL of {"id", "prompt", ...}')
    ids = parser.add_mutually_exclusive_group(required=True)
    ids.add_argument("--ids", help="comma-separated prompt ids, in the order to run")
    ids.add_argument("--ids-from-bench", metavar="BENCH_JSON",
                     help="the ids of a selfspec bench report's per_prompt, in order")
    parser.add_argument("--gen", type=int, required=True, help="tokens to generate (-n)")
    parser.add_argument("--threads", type=int, required=True, help="threads (-t)")
    parser.add_argument("--config", required=True, choices=kConfigs)
    parser.add_argument("--draft-model", help="the draft GGUF (--config draft only)")
    parser.add_argument("--out", required=True, help="the JSON report to write")
    parser.add_argument("--log-dir", help="keep each run's prompt file and log here")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one run may take (default 300)")
    options = parser.parse_args(argv)
    if options.gen < 2:
        parser.error("--gen must be at least 2 (llama-completion's first token is not decoded)")
    if options.threads < 1:
        parser.error("--threads must be at least 1")
    if options.timeout <= 0:
        parser.error("--timeout must be positive")
    if (options.config == "draft") != (options.draft_model is not None):
        parser.error("--draft-model is needed by --config draft, and only by it")
    return options, extra


def measure(options, extra):
    """Runs every prompt and returns the report; Failure stops it."""
    binary = "llama-completion" if options.config == "plain" else "llama-speculative-simple"
    if not os.access(os.path.join(options.bin_dir, binary), os.X_OK):
        raise Failure(f"no executable {binary} in {options.bin_dir}")
    for what, path in (("--model", options.model), ("--draft-model", options.draft_model)):
        if path is not None and not os.path.isfile(path):
            raise Failure(f"{what} {path}: no such file")
    ids = (read_bench_ids(options.ids_from_bench) if options.ids_from_bench
           else parse_ids(options.ids))
    prompts = select_prompts(load_prompts(options.prompts_file), ids, options.prompts_file)
    model = os.path.abspath(options.model)
    draft = os.path.abspath(options.draft_model) if options.draft_model else None
    bin_dir = os.path.abspath(options.bin_dir)
    build = build_record(bin_dir)
    cpu = cpu_model()
    if options.log_dir:
        os.makedirs(options.log_dir, exist_ok=True)
        work_dir, temporary = os.path.abspath(options.log_dir), False
    else:
        work_dir, temporary = tempfile.mkdtemp(prefix="llama_cpp_speculative."), True
    started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    per_prompt, first_argv = [], None
    try:
        for prompt_id, prompt in prompts:
            argv, record = run_prompt(
                options.config, prompt_id, prompt,
                lambda prompt_file: build_command(options.config, bin_dir, model, prompt_file,
                                                  options.gen, options.threads, draft, extra),
                work_dir, options.timeout)
            first_argv = first_argv or argv
            per_prompt.append(record)
            print(progress_line(record), file=sys.stderr, flush=True)
    except Failure as e:
        if temporary:
            raise Failure(f"{e} (the folder {work_dir} is kept)") from e
        raise
    if temporary:
        shutil.rmtree(work_dir, ignore_errors=True)
    return {"engine": "llama.cpp", "config": options.config, "extra_args": extra,
            "command": first_argv, "model": model, "model_bytes": os.path.getsize(model),
            "draft_model": draft,
            "draft_model_bytes": os.path.getsize(draft) if draft else None,
            "threads": options.threads, "gen": options.gen, "ctx": kCtx,
            "timeout_s": options.timeout,
            "prompts_file": os.path.abspath(options.prompts_file),
            "ids_from_bench": (os.path.abspath(options.ids_from_bench)
                               if options.ids_from_bench else None),
            "per_prompt": per_prompt, "overall": overall(per_prompt),
            "llama_cpp_build": build, "date": started.isoformat().replace("+00:00", "Z"),
            "cpu": cpu, "log_dir": None if temporary else work_dir}


def write_json(path, report):
    """Writes the report (indented, sorted keys) to path through a temporary file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, delete=False,
                                     suffix=".tmp") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(f.name, path)


def main(argv=None):
    """Parses the command line, measures, writes the report and prints its overall line."""
    options, extra = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        report = measure(options, extra)
        write_json(options.out, report)
    except Failure as e:
        fail(str(e))
    except OSError as e:
        fail(f"{e}")
    o = report["overall"]
    line = (f"{options.config}: {o['prompts']} prompt(s), {o['decode_tokens']} decode tokens in "
            f"{o['decode_s']:.3f} s = {o['decode_tokens_per_s']:.2f} tok/s")
    if o["drafted"] is not None:
        rate = o["acceptance_rate"]
        line += (f", drafted {o['drafted']} accepted {o['accepted']} "
                 f"({'n/a' if rate is None else f'{rate:.1%}'})")
    print(f"{line} -> {options.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
