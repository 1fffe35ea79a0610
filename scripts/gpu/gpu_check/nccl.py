"""Where the build's NCCL is: --nccl-include/--nccl-library, then $NCCL_ROOT, then PyTorch's pip
package (nvidia-nccl-cu12/-cu13; with the kit's nccl.h where the package has none), then beside
the CUDA toolkit or in the system (left to CMakeLists.txt's own search)."""

import glob
import os
import re

from .pythons import python_site_dirs


def find_nccl(c, pythons):
    """{source, include_dir, library, version, ...}; include_dir set when CMake must be told."""
    a = c.args
    if a.nccl_include or a.nccl_library:
        return from_options(a)
    kit_header = os.path.join(c.kit, "nccl", "include", "nccl.h")
    return (from_nccl_root(os.environ.get("NCCL_ROOT"))
            or from_pip_packages(pythons, kit_header)
            or beside_toolkit(c.tools.get("nvcc"))
            or from_system()
            or not_found())


def nccl_version_of(header):
    try:
        text = open(header, errors="replace").read()
    except OSError:
        return None
    parts = []
    for key in ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"):
        m = re.search(rf"#define\s+{key}\s+(\d+)", text)
        if not m:
            return None
        parts.append(m.group(1))
    return ".".join(parts)


def pick_nccl_library(libdir):
    for name in ("libnccl.so", "libnccl.so.2"):
        if os.path.isfile(os.path.join(libdir, name)):
            return os.path.join(libdir, name)
    others = sorted(glob.glob(os.path.join(libdir, "libnccl.so.*")))
    return others[-1] if others else None


def from_options(a):
    if not (a.nccl_include and a.nccl_library):
        return {"source": "options", "error": "give both --nccl-include and --nccl-library"}
    return {"source": "options", "include_dir": a.nccl_include, "library": a.nccl_library,
            "version": nccl_version_of(os.path.join(a.nccl_include, "nccl.h"))}


def from_nccl_root(root):
    if not root:
        return None
    lib = pick_nccl_library(os.path.join(root, "lib")) or pick_nccl_library(
        os.path.join(root, "lib64"))
    inc = os.path.join(root, "include")
    if lib and os.path.isfile(os.path.join(inc, "nccl.h")):
        return {"source": "NCCL_ROOT", "include_dir": inc, "library": lib,
                "version": nccl_version_of(os.path.join(inc, "nccl.h"))}
    return None


def from_pip_packages(pythons, kit_header):
    """The first libnccl.so* in a site-packages' nvidia/ folder, with the package's nccl.h:
    nvidia/nccl/{include/nccl.h,lib/libnccl.so.2}; or the kit's, for a package without one."""
    for py in pythons:
        for site in python_site_dirs(py):
            libs = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libnccl.so*"),
                                    recursive=True))
            for libdir in sorted({os.path.dirname(x) for x in libs}):
                lib = pick_nccl_library(libdir)
                header = os.path.join(os.path.dirname(libdir), "include", "nccl.h")
                found = {"source": f"pip package ({py})", "library": lib}
                if os.path.isfile(header):
                    found.update(include_dir=os.path.dirname(header),
                                 version=nccl_version_of(header))
                    return found
                if os.path.isfile(kit_header):
                    found.update(include_dir=os.path.dirname(kit_header),
                                 version=nccl_version_of(kit_header),
                                 note=f"the pip package has no nccl.h: the kit's (NCCL "
                                      f"{nccl_version_of(kit_header)}) with the package's library")
                    return found
    return None


def beside_toolkit(nvcc):
    if not nvcc:
        return None
    top = os.path.dirname(os.path.dirname(nvcc))
    header = os.path.join(top, "include", "nccl.h")
    for libdir in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
        lib = pick_nccl_library(os.path.join(top, libdir))
        if lib and os.path.isfile(header):
            return {"source": "beside the CUDA toolkit (CMakeLists.txt finds it)",
                    "include_dir": None, "library": None, "found": lib,
                    "version": nccl_version_of(header)}
    return None


def from_system():
    if not os.path.isfile("/usr/include/nccl.h"):
        return None
    return {"source": "system (CMakeLists.txt finds it)", "include_dir": None,
            "library": None, "version": nccl_version_of("/usr/include/nccl.h")}


def not_found():
    return {"source": "not found", "include_dir": None, "library": None, "version": None,
            "error": "no nccl.h with libnccl.so* in PyTorch's site-packages (nvidia/...), "
                     "beside nvcc or in /usr/include; pass --nccl-include DIR --nccl-library FILE"}
