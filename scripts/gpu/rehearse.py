#!/usr/bin/env python3
"""The JSON work of scripts/gpu/rehearse.sh, which runs this file with this machine's python3 (not
the chroot's):

    rehearse.py kit-packages MANIFEST_JSON
        the kit's packages (manifest.json of scripts/gpu/pack.sh), one name a line
    rehearse.py verify CHECK_JSON STATUS
        step 4 of the rehearsal: check.sh's report (check.json) and exit status STATUS must say
        "no device" (exit 3) with every dependency taken from the kit and no step failed. Prints
        the dependencies; exits 1 after printing "rehearse.sh: FAILED:" and the problems if not.
"""
import argparse
import json
import sys


def kit_packages(manifest):
    """The package names of a kit's manifest (a dict), in its order."""
    return [p["package"] for p in manifest["packages"]]


def verify(report, status, out=sys.stdout):
    """The problems (a list of strings, empty if none) of a rehearsal whose check.sh exited with
    status and wrote report (check.json, a dict); prints each dependency and where it came from
    to out."""
    problems = []
    if status != 3 or report.get("result") != "no device" or report.get("exit_code") != 3:
        problems.append(f"expected exit 3 / 'no device', got exit {status} / "
                        f"{report.get('result')!r}")
    deps = report.get("build", {}).get("kit_dependencies", {})
    if not deps:
        problems.append("check.json lists no dependencies (did configure run?)")
    for name, d in deps.items():
        print(f"  {name:18} {'kit ' if d['in_kit'] else 'NOT IN KIT'} {d['value']}", file=out)
        if not d["in_kit"]:
            problems.append(f"{name} came from {d['value']}, not from the kit")
    for name, value in report.get("build", {}).get("machine_dependencies", {}).items():
        print(f"  {name:18} (machine) {value}", file=out)
    for step in report.get("steps", []):
        if step["status"] == "failed":
            problems.append(f"step {step['name']} failed: {'; '.join(step.get('notes', []))}")
    return problems


def load_json(path):
    """The JSON in the file at path."""
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    """Runs one command (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="rehearse.py",
                                     description="The JSON work of scripts/gpu/rehearse.sh.")
    commands = parser.add_subparsers(dest="command", required=True)
    packages = commands.add_parser("kit-packages", help="the kit's package names, one a line")
    packages.add_argument("manifest_json")
    check = commands.add_parser("verify", help="check.sh's report and exit status, checked")
    check.add_argument("check_json")
    check.add_argument("status", type=int)
    args = parser.parse_args(argv)
    if args.command == "kit-packages":
        for name in kit_packages(load_json(args.manifest_json)):
            print(name)
        return
    problems = verify(load_json(args.check_json), args.status)
    if problems:
        print("rehearse.sh: FAILED:\n  " + "\n  ".join(problems))
        sys.exit(1)


if __name__ == "__main__":
    main()
