"""``python -m core.synthesize``: synthesize verifiable tasks (VeriGen). The command's code is :mod:`core.commands.synthesize`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.synthesize import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
