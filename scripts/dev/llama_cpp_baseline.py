#!/usr/bin/env python3
"""The JSON work of scripts/dev/llama_cpp_baseline.sh, which runs this file with python3:

    llama_cpp_baseline.py record BENCH_JSON BUILD_JSON GGUF THREADS LOAD_BEFORE LOAD_AFTER
        merges llama-bench's JSON (`-o json`: a list of tests; exactly one must be a
        token-generation test, n_prompt 0 and n_gen > 0, else exit 1), the build record
        (selfspec-build.json) and the machine's state into one JSON record on stdout
    llama_cpp_baseline.py summary RECORD_JSON
        the record's one-line summary on stdout
"""
import argparse
import json
import os
import platform
import sys


def make_record(bench_json, build_json, gguf, threads, load_before, load_after):
    """The baseline record (a dict) of llama-bench's output, the build and the machine."""
    with open(bench_json, encoding="utf-8") as f:
        runs = json.load(f)
    tg = [r for r in runs if r.get("n_prompt") == 0 and r.get("n_gen", 0) > 0]
    if len(tg) != 1:
        sys.exit(f"{bench_json}: expected one token-generation result, found {len(tg)}")
    run = tg[0]
    with open(build_json, encoding="utf-8") as f:
        build = json.load(f)
    cpu = run.get("cpu_info") or platform.processor()
    return {
        "engine": "llama.cpp llama-bench (plain decoding, CPU, quantized weights as in the file)",
        "tokens_per_s": run["avg_ts"],
        "tokens_per_s_stddev": run["stddev_ts"],
        "tokens_per_s_samples": run.get("samples_ts"),
        "n_gen": run["n_gen"],
        "repetitions": len(run.get("samples_ts") or []),
        "threads": int(threads),
        "model": {
            "gguf": os.path.abspath(gguf),
            "file_bytes": os.path.getsize(gguf),
            "type": run.get("model_type"),
            "size_bytes": run.get("model_size"),
            "n_params": run.get("model_n_params"),
        },
        "llama_cpp": {
            "package": f'{build["package"]}=={build["version"]}',
            "commit": build["llama_cpp_commit"],
            "build_commit": run.get("build_commit"),
            "backends": run.get("backends"),
        },
        "machine": {
            "cpu": cpu,
            "nproc": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
        },
        "date": run.get("test_time"),
        "note": "llama.cpp decodes from the quantized blocks; selfspec dequantizes at load into "
        "bf16/f32, so this compares engines, not equal work",
    }


def summary_line(record):
    """The record's one-line summary: commit, model type, tokens/s and the conditions."""
    r, m = record, record["machine"]
    return (f'llama.cpp {r["llama_cpp"]["commit"]}: {r["model"]["type"]} '
            f'{r["tokens_per_s"]:.2f} ± {r["tokens_per_s_stddev"]:.2f} tokens/s (tg{r["n_gen"]}, '
            f'{r["repetitions"]} runs, {r["threads"]} threads, {m["cpu"]}, load '
            f'{m["loadavg_before"]} -> {m["loadavg_after"]}) {r["model"]["gguf"]}')


def main(argv=None):
    """Runs one command (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="llama_cpp_baseline.py",
                                     description="The JSON work of llama_cpp_baseline.sh.")
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help="the baseline record, as JSON on stdout")
    for name in ("bench_json", "build_json", "gguf", "threads", "load_before", "load_after"):
        record.add_argument(name)
    summary = commands.add_parser("summary", help="a record's one-line summary")
    summary.add_argument("record_json")
    args = parser.parse_args(argv)
    if args.command == "record":
        json.dump(make_record(args.bench_json, args.build_json, args.gguf, args.threads,
                              args.load_before, args.load_after), sys.stdout, indent=2)
        print()
    else:
        with open(args.record_json, encoding="utf-8") as f:
            print(summary_line(json.load(f)))


if __name__ == "__main__":
    main()
