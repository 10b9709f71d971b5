"""``python -m core.pipeline``: the paper's recipe, one command. The command's code is :mod:`core.commands.pipeline`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.pipeline import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
