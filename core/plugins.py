"""``python -m core.plugins``: installed plugins and their components. The command's code is :mod:`core.commands.plugins`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.plugins import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
