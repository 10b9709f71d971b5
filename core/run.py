"""``python -m core.run``: train (RL). The command's code is :mod:`core.commands.run`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.run import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
