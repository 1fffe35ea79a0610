#!/usr/bin/env python3
"""Writes the GPU kit's manifest.json: what the kit holds, with checksums (check.sh verifies the
tarball's).

scripts/gpu/pack.sh runs this on the packing machine (this machine's python3), once the kit is
complete in its scratch folder:

    pack_manifest.py WORK

WORK/debs/*.deb are the packages that went into the kit (read with dpkg-deb -f), WORK/kit the kit:
root.tar.xz, models/<name>/ (when carried) and nccl/include/nccl.h (when carried).
WORK/kit/manifest.json gets the packages (name, version, architecture, .deb file, size and
SHA-256), the models (SHA-256 of every file), the tarball's size and SHA-256, the NCCL header's
SHA-256 and version, and where and when the kit was made. Nothing of this runs on the GPU
machine: only manifest.json travels in the kit.
"""
import argparse
import hashlib
import json
import os
import pathlib
import platform
import re
import subprocess
import time


def sha256(path):
    """The SHA-256 of the file at path, as hex digits."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def field(deb, name):
    """The control field name of the .deb file deb (dpkg-deb -f)."""
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], check=True, capture_output=True,
                          text=True).stdout.strip()


def read_os_release(path="/etc/os-release"):
    """The KEY=value pairs of an os-release file (quotes taken off); {} when there is none."""
    os_release = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key:
                    os_release[key] = value.strip('"')
    return os_release


def deb_packages(debs, read_field=field):
    """One entry per .deb file in the folder debs, by file name: package, version, architecture,
    the file's name, size and SHA-256. read_field(deb, name) reads a control field."""
    packages = []
    for deb in sorted(pathlib.Path(debs).glob("*.deb")):
        packages.append({"package": read_field(deb, "Package"),
                         "version": read_field(deb, "Version"),
                         "architecture": read_field(deb, "Architecture"), "deb": deb.name,
                         "deb_bytes": deb.stat().st_size, "deb_sha256": sha256(deb)})
    return packages


def kit_models(kit):
    """One entry per folder in kit/models (none without it): its name, path in the kit and the
    SHA-256 of every file in it, by path relative to the model's folder."""
    models = []
    kit = pathlib.Path(kit)
    for model in sorted((kit / "models").glob("*")) if (kit / "models").exists() else []:
        files = {str(p.relative_to(model)): sha256(p)
                 for p in sorted(model.rglob("*")) if p.is_file()}
        models.append({"name": model.name, "path": f"models/{model.name}", "files": files})
    return models


def nccl_header(kit):
    """The carried nccl.h (kit/nccl/include/nccl.h): its path in the kit, SHA-256 and version
    (NCCL_MAJOR.NCCL_MINOR.NCCL_PATCH, None when a #define is missing); None without one."""
    header = pathlib.Path(kit) / "nccl" / "include" / "nccl.h"
    if not header.exists():
        return None
    text = header.read_text(errors="replace")
    parts = [re.search(rf"#define\s+NCCL_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return {"header": "nccl/include/nccl.h", "sha256": sha256(header),
            "version": ".".join(m.group(1) for m in parts) if all(parts) else None}


def make_manifest(work, read_field=field, os_release_path="/etc/os-release"):
    """The manifest (a dict) of the kit in work/kit, whose packages are work/debs/*.deb."""
    work = pathlib.Path(work)
    kit = work / "kit"
    os_release = read_os_release(os_release_path)
    packages = deb_packages(work / "debs", read_field)
    models = kit_models(kit)
    tarball = kit / "root.tar.xz"
    nccl = nccl_header(kit)
    return {
        "kit": "selfspec GPU kit (scripts/gpu/pack.sh)",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "made_on": {"os": os_release.get("PRETTY_NAME", platform.platform()),
                    "machine": platform.machine()},
        "root_tarball": {"file": tarball.name, "bytes": tarball.stat().st_size,
                         "sha256": sha256(tarball)},
        "multiarch": "x86_64-linux-gnu",
        "packages": packages,
        "models": models,
        "nccl_header": nccl,
    }


def main(argv=None):
    """Writes WORK/kit/manifest.json (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="pack_manifest.py",
                                     description="Writes the GPU kit's manifest.json "
                                                 "(scripts/gpu/pack.sh).")
    parser.add_argument("work", help="pack.sh's scratch folder: debs/ and kit/")
    args = parser.parse_args(argv)
    manifest = make_manifest(args.work)
    (pathlib.Path(args.work) / "kit" / "manifest.json").write_text(
        json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
