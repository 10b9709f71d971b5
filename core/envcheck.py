"""``python -m core.envcheck``: check tasks on real desktops. The command's code is :mod:`core.commands.envcheck`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.envcheck import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
