"""``python -m core.export``: trajectories as a Hugging Face dataset. The command's code is :mod:`core.commands.export`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.export import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
