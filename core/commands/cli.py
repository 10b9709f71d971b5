"""Shared plumbing for the ``python -m core.<command>`` entry points.

A user mistake (:class:`~core.errors.ScaleCUAError`) prints its message and
exits with the error's code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

import structlog

from core.errors import DiskFull, ScaleCUAError


def config_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", "-c", required=True, help="YAML config file, or the name of a packaged config (python -m configs lists them)")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="dotlist overrides, e.g. sampler.name=uniform sampler.options.sigma=0.15",
    )
    return parser


def main_guard(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """Run an entry point; turn ScaleCUAError into a message and its exit code."""
    try:
        return main(argv)
    except ScaleCUAError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        full = DiskFull.within(exc)
        if full is None:
            raise
        error = full if isinstance(full, DiskFull) else DiskFull(getattr(full, "filename", None), full)
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        structlog.get_logger("core").warning("interrupted")
        return 130
