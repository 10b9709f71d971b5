"""``python -m core.record``: record oracle demonstrations. The command's code is :mod:`core.commands.record`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.record import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
