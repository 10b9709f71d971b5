"""``python -m core.judge``: run one judge metric. The command's code is :mod:`core.commands.judge`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.judge import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
