"""Tests scripts/gpu/pack_manifest.py, which writes the manifest.json of scripts/gpu/pack.sh's
GPU kit (pack.sh itself is tested end to end by gpu_pack_script, gpu_pack_test.sh).

On a made-up scratch folder (debs/, kit/ with root.tar.xz, models and nccl.h): sha256, the
os-release parsing, the packages (control fields read by a stand-in; with dpkg-deb, also from a
real .deb it builds), the models' files, the NCCL header's version (and None when a #define is
missing, no entry without a header), the whole manifest and the command line. Standard library
only; the dpkg-deb parts are skipped without dpkg-deb.

    python3 tests/scripts/gpu_pack_manifest_test.py
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
kRepo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
kHelper = os.path.join(kRepo, "scripts", "gpu", "pack_manifest.py")
sys.path.insert(0, os.path.join(kRepo, "scripts", "gpu"))

import pack_manifest  # noqa: E402


def write(path, data):
    """Writes data (bytes or str) to path, making its folders."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def sha(data):
    """The hex sha256 of data (bytes or str)."""
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def fake_field(deb, name):
    """Control fields made from the .deb's file name: NAME_VERSION_ARCH.deb."""
    package, version, arch = os.path.basename(str(deb))[:-4].split("_")
    return {"Package": package, "Version": version, "Architecture": arch}[name]


class PartsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.work = self.tmp.name
        self.kit = os.path.join(self.work, "kit")

    def test_sha256(self):
        path = os.path.join(self.work, "f")
        data = bytes(range(256)) * 5000  # over one read block
        write(path, data)
        self.assertEqual(pack_manifest.sha256(path), sha(data))

    def test_read_os_release(self):
        path = os.path.join(self.work, "os-release")
        write(path, 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n\nEMPTY=\n')
        self.assertEqual(pack_manifest.read_os_release(path),
                         {"PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", "ID": "debian",
                          "EMPTY": ""})
        self.assertEqual(pack_manifest.read_os_release(os.path.join(self.work, "none")), {})

    def test_deb_packages(self):
        debs = os.path.join(self.work, "debs")
        write(os.path.join(debs, "libz_1.0-1_amd64.deb"), b"zz")
        write(os.path.join(debs, "liba_2.0_all.deb"), b"a")
        write(os.path.join(debs, "notes.txt"), b"not a deb")
        self.assertEqual(pack_manifest.deb_packages(debs, fake_field), [
            {"package": "liba", "version": "2.0", "architecture": "all",
             "deb": "liba_2.0_all.deb", "deb_bytes": 1, "deb_sha256": sha(b"a")},
            {"package": "libz", "version": "1.0-1", "architecture": "amd64",
             "deb": "libz_1.0-1_amd64.deb", "deb_bytes": 2, "deb_sha256": sha(b"zz")}])
        self.assertEqual(pack_manifest.deb_packages(os.path.join(self.work, "none")), [])

    @unittest.skipUnless(shutil.which("dpkg-deb"), "no dpkg-deb")
    def test_field_of_a_real_deb(self):
        src = os.path.join(self.work, "pkg")
        write(os.path.join(src, "DEBIAN", "control"),
              "Package: selfspec-fake\nVersion: 1.2-3\nArchitecture: amd64\n"
              "Maintainer: t <t@t>\nDescription: test\n")
        write(os.path.join(src, "usr", "share", "fake", "f.txt"), "x\n")
        deb = os.path.join(self.work, "debs", "fake.deb")
        os.makedirs(os.path.dirname(deb))
        subprocess.run(["dpkg-deb", "--root-owner-group", "--build", src, deb], check=True,
                       capture_output=True, timeout=60)
        (entry,) = pack_manifest.deb_packages(os.path.join(self.work, "debs"))
        self.assertEqual((entry["package"], entry["version"], entry["architecture"],
                          entry["deb"]), ("selfspec-fake", "1.2-3", "amd64", "fake.deb"))

    def test_kit_models(self):
        self.assertEqual(pack_manifest.kit_models(self.kit), [])
        write(os.path.join(self.kit, "models", "tiny", "config.json"), "{}")
        write(os.path.join(self.kit, "models", "tiny", "sub", "w.bin"), b"\x00\x01")
        write(os.path.join(self.kit, "models", "a-model", "config.json"), "{}")
        self.assertEqual(pack_manifest.kit_models(self.kit), [
            {"name": "a-model", "path": "models/a-model", "files": {"config.json": sha("{}")}},
            {"name": "tiny", "path": "models/tiny",
             "files": {"config.json": sha("{}"), "sub/w.bin": sha(b"\x00\x01")}}])

    def test_nccl_header(self):
        self.assertIsNone(pack_manifest.nccl_header(self.kit))
        header = os.path.join(self.kit, "nccl", "include", "nccl.h")
        text = "#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define  NCCL_PATCH\t5\n"
        write(header, text)
        self.assertEqual(pack_manifest.nccl_header(self.kit),
                         {"header": "nccl/include/nccl.h", "sha256": sha(text),
                          "version": "2.21.5"})
        write(header, "#define NCCL_MAJOR 2\n")
        self.assertIsNone(pack_manifest.nccl_header(self.kit)["version"])


class ManifestTest(unittest.TestCase):
    def make_work(self, tmp):
        write(os.path.join(tmp, "debs", "libfoo_1.0_amd64.deb"), b"deb")
        write(os.path.join(tmp, "kit", "root.tar.xz"), b"tarball")
        write(os.path.join(tmp, "kit", "models", "m", "config.json"), "{}")
        return tmp

    def test_make_manifest(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = self.make_work(tmp)
            os_release = os.path.join(tmp, "os-release")
            write(os_release, 'PRETTY_NAME="Made-up OS 1"\n')
            manifest = pack_manifest.make_manifest(work, fake_field, os_release)
            self.assertRegex(manifest.pop("created_utc"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertEqual(list(manifest), ["kit", "made_on", "root_tarball", "multiarch",
                                              "packages", "models", "nccl_header"])
            self.assertEqual(manifest["kit"], "selfspec GPU kit (scripts/gpu/pack.sh)")
            self.assertEqual(manifest["made_on"]["os"], "Made-up OS 1")
            self.assertEqual(manifest["root_tarball"],
                             {"file": "root.tar.xz", "bytes": 7, "sha256": sha(b"tarball")})
            self.assertEqual(manifest["multiarch"], "x86_64-linux-gnu")
            self.assertEqual([p["package"] for p in manifest["packages"]], ["libfoo"])
            self.assertEqual([m["name"] for m in manifest["models"]], ["m"])
            self.assertIsNone(manifest["nccl_header"])
            # without an os-release: the platform's description
            manifest = pack_manifest.make_manifest(work, fake_field, os.path.join(tmp, "none"))
            self.assertTrue(manifest["made_on"]["os"])

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            work = os.path.join(tmp, "work")
            write(os.path.join(work, "kit", "root.tar.xz"), b"tarball")
            os.makedirs(os.path.join(work, "debs"))
            done = subprocess.run([sys.executable, kHelper, work], capture_output=True,
                                  text=True, timeout=60)
            self.assertEqual((done.returncode, done.stdout, done.stderr), (0, "", ""))
            with open(os.path.join(work, "kit", "manifest.json")) as f:
                text = f.read()
            self.assertTrue(text.endswith("}\n"))
            self.assertTrue(re.search(r'\n  "packages": \[\],\n', text))
            self.assertEqual(json.loads(text)["root_tarball"]["bytes"], 7)
            done = subprocess.run([sys.executable, kHelper, os.path.join(tmp, "nothing")],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 1)  # no root.tar.xz: a traceback, as before
            done = subprocess.run([sys.executable, kHelper], capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(done.returncode, 2)


if __name__ == "__main__":
    unittest.main()
