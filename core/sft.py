"""``python -m core.sft``: the warm start (stage 1). The command's code is :mod:`core.commands.sft`; this module is its name."""

import sys

from core.commands.cli import main_guard
from core.commands.sft import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main_guard(main))
