"""A benchmark file (``bench/...``, not a package) imported as a module, so tests can call its functions."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(relative: str) -> types.ModuleType:
    """``bench/<relative>`` as the module ``bench_<stem>_under_test``: registered in ``sys.modules`` while and
    after it executes (dataclasses look their module up), with any ``sys.path`` change it makes undone."""
    path = BENCH / relative
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}_under_test", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module
