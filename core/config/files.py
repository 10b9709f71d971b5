"""What a ``--config`` argument names: a YAML file, ``package:<module>/<file>``, or a packaged config by name.

The configs under the repository's ``configs/`` ship inside the wheel (the ``configs`` package), so an
installed ScaleCUA runs ``python -m core.pipeline --config quickstart`` from any directory;
``python -m configs`` lists the packaged names with their paths.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from core.errors import ConfigError

PACKAGE_PREFIX = "package:"
PACKAGED_CONFIGS = "configs"
SUFFIXES = (".yaml", ".yml")


def package_path(source: str, what: str) -> Path:
    """The filesystem path ``package:<module>/<sub>`` names (files shipped inside an installed package)."""
    module, _, sub = source[len(PACKAGE_PREFIX):].partition("/")
    try:
        root = importlib.resources.files(module)
    except ModuleNotFoundError:
        raise ConfigError([f"{what}: package '{module}' in {source!r} is not installed"]) from None
    return Path(str(root.joinpath(sub))) if sub else Path(str(root))


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
        return package_path(text, "config")
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
