#!/usr/bin/env python3
"""The GPU check: scripts/gpu/check.sh runs this (see there for how to call it).

On a bare GPU machine (nvcc, CMake, ninja, Python with PyTorch and its NCCL; no apt, no network,
no MPI) it builds selfspec against the carried kit (scripts/gpu/pack.sh) and runs every GPU check,
each step under a time bound and all of them within one budget, riskiest first. After every step
it rewrites OUTDIR/check.json and OUTDIR/check.md, so that whatever ends the run leaves a report;
step logs (trimmed) go to OUTDIR/logs/, raw results (bench JSON, JUnit XML) to OUTDIR/raw/.

Exit status:
  0  every check passed
  1  a check failed
  2  bad arguments
  3  no device: no GPU is visible (nvidia-smi lists none); everything that needs none was done
     (environment, kit, configure, build, link check) and passed
  4  the kit, the configuration or the build failed (or a built binary cannot find a library):
     nothing was checked on a GPU
  5  incomplete: the time budget ran out before every check ran (none of those that ran failed)
"""

# The work is done by the package beside this file, scripts/gpu/gpu_check/ (its __init__.py maps
# its modules); this file is what check.sh runs, so its docstring above keeps the exit codes.
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree, as one script did not
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_check.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
