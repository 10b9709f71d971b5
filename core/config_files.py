"""What a ``--config`` argument names: a YAML file, ``package:<module>/<file>``, or a packaged config by name.

The configs under the repository's ``configs/`` ship inside the wheel (the ``configs`` package), so an
installed ScaleCUA runs ``python -m core.pipeline --config quickstart`` from any directory;
``python -m configs`` lists the packaged names with their paths.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from core.errors import ConfigError
from core.tasks import PACKAGE_PREFIX, resolve_source

PACKAGED_CONFIGS = "configs"
SUFFIXES = (".yaml", ".yml")


def packaged_configs() -> dict[str, Path]:
    """Packaged config name (file stem) -> its path; empty when the ``configs`` package is not installed."""
    try:
        root = importlib.resources.files(PACKAGED_CONFIGS)
    except ModuleNotFoundError:
        return {}
    return {Path(entry.name).stem: Path(str(entry)) for entry in sorted(root.iterdir(), key=lambda e: e.name)
            if entry.name.endswith(SUFFIXES)}


def resolve_config_path(arg: str | Path) -> Path:
    """The file ``arg`` names; a bare name (no directory, optional suffix) that is no file here is looked up
    among the packaged configs."""
    text = str(arg)
    if text.startswith(PACKAGE_PREFIX):
        return resolve_source(text)
    path = Path(text).expanduser()
    if path.exists() or "/" in text:
        return path
    name = text[: -len(path.suffix)] if path.suffix in SUFFIXES else text
    packaged = packaged_configs()
    if name in packaged:
        return packaged[name]
    known = ", ".join(packaged) or "none (the configs package is not installed)"
    raise ConfigError([f"config {text!r}: no such file here and no packaged config of that name; packaged configs: "
                       f"{known} (python -m configs prints their paths)"])
