"""Tests scripts/gpu/rehearse.py, the JSON work of scripts/gpu/rehearse.sh (which itself needs
root, debootstrap and a CUDA toolkit, so it is only syntax-checked here).

kit-packages on a made-up manifest.json; verify on made-up check.json reports: a passing
rehearsal, and each way one fails (exit status, result, no dependencies, a dependency not from
the kit, a failed step), with what it prints; the command line's exit codes and output.
Standard library only.

    python3 tests/scripts/gpu_rehearse_test.py
"""
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kHelper = os.path.join(kRepo, "scripts", "gpu", "rehearse.py")
kScript = os.path.join(kRepo, "scripts", "gpu", "rehearse.sh")
sys.path.insert(0, os.path.join(kRepo, "scripts", "gpu"))

import rehearse  # noqa: E402


def passing_report():
    """A check.json of a rehearsal that passed."""
    return {"result": "no device", "exit_code": 3,
            "build": {"kit_dependencies": {"fmt": {"in_kit": True, "value": "/k/usr/include"},
                                           "yaml-cpp": {"in_kit": True, "value": "/k/lib"}},
                      "machine_dependencies": {"nccl": "/venv/nvidia/nccl"}},
            "steps": [{"name": "kit", "status": "passed"}, {"name": "build", "status": "passed"},
                      {"name": "gpu", "status": "skipped"}]}


class KitPackagesTest(unittest.TestCase):
    def test_kit_packages(self):
        manifest = {"packages": [{"package": "libfmt-dev", "version": "9"},
                                 {"package": "libssl3", "version": "3"}]}
        self.assertEqual(rehearse.kit_packages(manifest), ["libfmt-dev", "libssl3"])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "manifest.json")
            with open(path, "w") as f:
                json.dump(manifest, f)
            done = subprocess.run([sys.executable, kHelper, "kit-packages", path],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual((done.returncode, done.stdout), (0, "libfmt-dev\nlibssl3\n"))


class VerifyTest(unittest.TestCase):
    def verify(self, report, status=3):
        out = io.StringIO()
        return rehearse.verify(report, status, out), out.getvalue()

    def test_passing(self):
        problems, printed = self.verify(passing_report())
        self.assertEqual(problems, [])
        self.assertEqual(printed, "  fmt                kit  /k/usr/include\n"
                                  "  yaml-cpp           kit  /k/lib\n"
                                  "  nccl               (machine) /venv/nvidia/nccl\n")

    def test_failing(self):
        problems, _ = self.verify(passing_report(), status=0)
        self.assertEqual(problems, ["expected exit 3 / 'no device', got exit 0 / 'no device'"])
        problems, _ = self.verify(dict(passing_report(), result="passed"))
        self.assertEqual(problems, ["expected exit 3 / 'no device', got exit 3 / 'passed'"])
        problems, _ = self.verify(dict(passing_report(), exit_code=4))
        self.assertEqual(len(problems), 1)
        problems, _ = self.verify({"result": "no device", "exit_code": 3})
        self.assertEqual(problems, ["check.json lists no dependencies (did configure run?)"])
        report = passing_report()
        report["build"]["kit_dependencies"]["fmt"] = {"in_kit": False, "value": "/usr/include"}
        report["steps"].append({"name": "link", "status": "failed", "notes": ["a", "b"]})
        report["steps"].append({"name": "bare", "status": "failed"})
        problems, printed = self.verify(report)
        self.assertEqual(problems, ["fmt came from /usr/include, not from the kit",
                                    "step link failed: a; b", "step bare failed: "])
        self.assertIn("  fmt                NOT IN KIT /usr/include\n", printed)

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "check.json")
            with open(path, "w") as f:
                json.dump(passing_report(), f)
            run = [sys.executable, kHelper, "verify", path]
            done = subprocess.run(run + ["3"], capture_output=True, text=True, timeout=60)
            self.assertEqual((done.returncode, done.stderr), (0, ""))
            self.assertTrue(done.stdout.startswith("  fmt "))
            done = subprocess.run(run + ["1"], capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 1)
            self.assertTrue(done.stdout.endswith(
                "rehearse.sh: FAILED:\n  expected exit 3 / 'no device', got exit 1 / "
                "'no device'\n"))
            done = subprocess.run(run, capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 2)


class ScriptTest(unittest.TestCase):
    def test_syntax(self):
        done = subprocess.run(["bash", "-n", kScript], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(kScript) as f:
            text = f.read()
        self.assertIn('"$repo/scripts/gpu/rehearse.py" kit-packages', text)
        self.assertIn('"$repo/scripts/gpu/rehearse.py" verify', text)


if __name__ == "__main__":
    unittest.main()
