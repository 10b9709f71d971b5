"""``python -m core.ablate``: a matrix of plugin swaps, one run per cell. The command's code is :mod:`core.commands.ablate`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.ablate import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
