"""``python -m core.eval``: evaluate a checkpoint. The command's code is :mod:`core.commands.eval`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.eval import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
