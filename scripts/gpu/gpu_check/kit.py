"""The kit step: the kit of scripts/gpu/pack.sh checked against its manifest (SHA-256 of the
tarball and the models) and unpacked into <build>/kit-root, whose pkg-config must run here."""

import hashlib
import json
import os
import shutil
import tarfile
import time


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def step_kit(c, s):
    manifest_path = os.path.join(c.kit, "manifest.json")
    tarball = os.path.join(c.kit, "root.tar.xz")
    if not os.path.isfile(manifest_path) or not os.path.isfile(tarball):
        s.fail(f"no kit at {c.kit} (needs manifest.json and root.tar.xz): run "
               "scripts/gpu/pack.sh on a Debian machine and bring .gpu-kit along")
        return
    manifest = json.load(open(manifest_path))
    digest = sha256_file(tarball)
    expected = manifest.get("root_tarball", {}).get("sha256")
    c.kit_info.update(describe_kit(c, manifest, tarball))
    if digest != expected:
        s.fail(f"root.tar.xz has SHA-256 {digest}, the manifest says {expected}: a damaged or "
               "mixed-up kit")
        return
    unpack(c, s, tarball, digest)
    check_models(c, s, manifest)
    check_pkg_config(c, s)
    s.figures.update({"packages": len(c.kit_info["packages"]),
                      "tarball_mib": round(c.kit_info["tarball_bytes"] / 2**20, 1),
                      "models": ", ".join(c.kit_info["models"]) or "none"})


def describe_kit(c, manifest, tarball):
    """check.json's "kit": where it is and is unpacked, where it was made, what it holds."""
    return {
        "dir": c.kit,
        "root": c.kit_root,
        "made_on": manifest.get("made_on"),
        "created_utc": manifest.get("created_utc"),
        "tarball_bytes": os.path.getsize(tarball),
        "packages": {p["package"]: p["version"] for p in manifest.get("packages", [])},
        "models": [m["name"] for m in manifest.get("models", [])],
    }


def unpack(c, s, tarball, digest):
    """Unpacks the tarball into the kit root, unless this tarball (digest) is unpacked there."""
    stamp = os.path.join(c.kit_root, ".kit-sha256")
    if os.path.isfile(stamp) and open(stamp).read().strip() == digest:
        s.note(f"already unpacked in {c.kit_root}")
        return
    shutil.rmtree(c.kit_root, ignore_errors=True)
    os.makedirs(c.kit_root)
    t0 = time.monotonic()
    with tarfile.open(tarball, "r:xz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(c.kit_root, filter="data")
        else:
            tar.extractall(c.kit_root)
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    s.figures["unpack_s"] = round(time.monotonic() - t0, 1)


def check_models(c, s, manifest):
    for model in manifest.get("models", []):
        for rel, sha in model.get("files", {}).items():
            path = os.path.join(c.kit, model["path"], rel)
            if not os.path.isfile(path) or sha256_file(path) != sha:
                s.fail(f"kit model file {model['path']}/{rel} is missing or damaged")


def check_pkg_config(c, s):
    pkgconfig = os.path.join(c.kit_root, "bin", "pkg-config")
    rc, out = s.run([pkgconfig, "--modversion", "sentencepiece", "libpcre2-8"], capture=True,
                    timeout=20)
    if rc != 0:
        s.fail(f"the kit's pkg-config does not run here (exit {rc})")
