#!/usr/bin/env python3
"""The demo's report (scripts/demo.sh), from the JSON that selfspec wrote.

  summary.py bench BENCH.json
      a table of plain vs self-speculative decoding per prompt and overall (bench's medians over
      prompts); exit 1 when bench found a prompt whose speculative tokens differ from plain
      decoding's.
  summary.py identical PLAIN.json SPECULATIVE.json
      compares the tokens of two `selfspec generate --json` runs (the JSON object is the last line
      of each file), prints the speculative run's text and its figures; exit 1 when they differ.

Standard library only (the demo needs no jq).
"""

import json
import sys


def last_json_line(path):
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    if not lines:
        sys.exit(f"summary.py: {path} is empty")
    return json.loads(lines[-1])


def bench(path):
    with open(path, encoding="utf-8") as f:
        b = json.load(f)
    if not b.get("results"):
        sys.exit(f"summary.py: {path} has no self-speculative results (was --spec given?)")
    res = b["results"][0]
    overall = res["overall"]
    ctrl = res["controller"]
    rows = []
    for p in b["per_prompt"]:
        s = next(x for x in p["speculative"] if x["controller"] == ctrl)
        rows.append((p["id"], p["generated_tokens"], p["autoregressive"]["decode_tokens_per_s"],
                     s["decode_tokens_per_s"], s["speedup"], s["acceptance_rate"],
                     s["mean_accepted_length"], "yes" if s["lossless"] else "NO"))
    print(f"{'prompt':<14}{'tokens':>7}{'plain tok/s':>13}{'spec tok/s':>12}{'speedup':>9}"
          f"{'alpha':>8}{'M':>7}  identical")
    for r in rows:
        print(f"{r[0]:<14}{r[1]:>7}{r[2]:>13.1f}{r[3]:>12.1f}{r[4]:>8.2f}x{r[5]:>8.3f}{r[6]:>7.2f}"
              f"  {r[7]}")
    lossless, measured = overall["lossless_prompts"], overall["prompts"]
    print(f"{'median':<14}{'':>7}{overall['autoregressive_tokens_per_s']:>13.1f}"
          f"{overall['speculative_tokens_per_s']:>12.1f}{overall['speedup']:>8.2f}x"
          f"{overall['acceptance_rate']:>8.3f}{overall['mean_accepted_length']:>7.2f}"
          f"  {lossless}/{measured}")
    print(f"(tp {b['tp']} x {b['threads_per_rank']} thread(s) per rank, {b['backend']}; "
          f"alpha: share of drafted tokens accepted; M: tokens emitted per verification forward; "
          f"speedup: spec/plain tok/s of each prompt, plain and speculative run back to back)")
    if lossless != measured or b.get("lossless_mismatches", 0):
        print(f"error: self-speculative tokens differ from plain decoding on "
              f"{measured - lossless} of {measured} prompt(s)", file=sys.stderr)
        return 1
    return 0


def identical(plain_path, spec_path):
    plain, spec = last_json_line(plain_path), last_json_line(spec_path)
    a, s = plain["tokens"], spec["tokens"]
    print(spec["text"].rstrip())
    print("-" * 60)
    pt, st = plain["timings"], spec["timings"]
    print(f"tp {spec['tp']}: plain {pt['decode_tokens_per_s']:.1f} tok/s, self-speculative "
          f"{st['decode_tokens_per_s']:.1f} tok/s (alpha {spec['acceptance_rate']:.3f}, "
          f"M {spec['mean_accepted_length']:.2f}); {len(s)} tokens generated")
    if a == s:
        print(f"tokens identical to plain decoding ({len(a)} of {len(a)})")
        return 0
    first = next((i for i, (x, y) in enumerate(zip(a, s)) if x != y), min(len(a), len(s)))
    print(f"error: self-speculative tokens differ from plain decoding at token {first} "
          f"({len(a)} plain, {len(s)} speculative tokens)", file=sys.stderr)
    return 1


def main(argv):
    if len(argv) == 2 and argv[0] == "bench":
        return bench(argv[1])
    if len(argv) == 3 and argv[0] == "identical":
        return identical(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
