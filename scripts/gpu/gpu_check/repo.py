"""The repository the check builds and runs: the one holding this package."""

import os

REPO = os.path.realpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
