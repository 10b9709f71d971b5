"""``python -m core.report``: plots and the trajectory viewer of a run. The command's code is :mod:`core.commands.report`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.report import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
