"""Run directories: where a run keeps its resolved config, plugin versions, logs, metrics and checkpoints.

Layout::

    runs/<name>-<UTC timestamp>/
        config.yaml        resolved config (interpolations and overrides applied)
        plugins.json       loaded plugins (distribution, version) and the selected components
        log.jsonl          structured log
        metrics.jsonl      one JSON object per iteration
        checkpoints/iter_000025/ ...
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from core.config import ResolvedConfig
from core.errors import ConfigError, DiskFull
from core.pluginmanager import Plugins


def new_run_dir(output_dir: str | Path, name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path(output_dir) / f"{name}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def latest_run_dir(output_dir: str | Path, name: str) -> Path | None:
    """The most recent run directory of ``name`` that holds a config (for ``--resume`` without a path)."""
    root = Path(output_dir)
    if not root.is_dir():
        return None
    candidates = [p for p in root.glob(f"{name}-*") if (p / "config.yaml").is_file()]
    return max(candidates, key=lambda p: p.stat().st_mtime, default=None)


def plugin_manifest(resolved: ResolvedConfig, plugins: Plugins) -> dict[str, Any]:
    return {
        "plugins": {
            name: {"distribution": info.distribution, "version": info.version, "module": info.module}
            for name, info in sorted(plugins.infos.items())
        },
        "skipped": plugins.skipped,
        "selected": {slot: c.describe() for slot, c in sorted(resolved.components.items())},
    }


def write_json_atomic(path: Path, payload: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        DiskFull.check(exc, path)
        raise
    os.replace(tmp, path)


def prepare_at(path: Path, resolved: ResolvedConfig, plugins: Plugins) -> Path:
    """A run directory at a fixed ``path`` (a recipe's stage): created once; config and plugins (re)recorded."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(resolved.to_yaml(), encoding="utf-8")
    write_json_atomic(path / "plugins.json", plugin_manifest(resolved, plugins))
    return path


#: what a resumed run may change of the configuration it was started with (to extend it, or log more)
RESUME_OVERRIDES = ("run.iterations", "run.log_level", "run.keep_checkpoints")


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): tree}


def check_resume_config(saved: Path, raw: dict[str, Any]) -> None:
    """A resumed run keeps the configuration it was started with: this command's (``raw``) may differ from the
    run's saved ``config.yaml`` only in :data:`RESUME_OVERRIDES`; anything else is a ConfigError naming each key."""
    from omegaconf import OmegaConf

    before = _flat(OmegaConf.to_container(OmegaConf.load(str(saved)), resolve=True))
    now = _flat(raw)
    changed = [key for key in sorted(set(before) | set(now))
               if before.get(key) != now.get(key) and key not in RESUME_OVERRIDES]
    if changed:
        raise ConfigError([f"--resume: {key}: the run was started with {before.get(key)!r}, this command gives "
                           f"{now.get(key)!r}" for key in changed] + [
            f"a resumed run keeps its configuration ({saved}); give the same config and overrides (only "
            f"{', '.join(RESUME_OVERRIDES)} may change), or start a new run"])


#: the file naming the command that made a run directory; a resume by another command is refused
COMMAND_FILE = "run.json"
#: commands that run the same loop (their directories resume with either)
_SAME_LOOP = {"plugins.ray.run": "core.run"}


def run_command(path: Path) -> str | None:
    """The command whose run ``path`` is (None: unknown, a directory from before the marker)."""
    if (path / COMMAND_FILE).is_file():
        try:
            return str(json.loads((path / COMMAND_FILE).read_text(encoding="utf-8"))["command"])
        except (ValueError, KeyError, TypeError):
            return None
    if (path / "pipeline.json").is_file():
        return "core.pipeline"
    return None


def check_resume_command(path: Path, command: str) -> None:
    """A resume continues a run of the same command: ``core.run --resume`` of a recipe or a warm start is refused."""
    made_by = run_command(path)
    if made_by is not None and _SAME_LOOP.get(made_by, made_by) != _SAME_LOOP.get(command, command):
        raise ConfigError([f"--resume {path}: that directory is a run of python -m {made_by}, not of python -m "
                           f"{command}; resume it with python -m {made_by} --config {path / 'config.yaml'} "
                           f"--resume {path}"])


def prepare(resolved: ResolvedConfig, plugins: Plugins, *, resume: str | Path | bool | None = None,
            command: str = "core.run") -> Path:
    """Create (or reopen, for ``resume``: a run of the same ``command`` with the same configuration,
    :func:`check_resume_config`) the run directory and record config, plugins and the command."""
    run = resolved.config.run
    if resume:
        path = Path(resume) if not isinstance(resume, bool) else latest_run_dir(run.output_dir, run.name)
        if path is None or not (path / "config.yaml").is_file():
            where = path if path is not None else f"{run.output_dir}/{run.name}-*"
            raise ConfigError([f"--resume: no run directory with a config.yaml at {where}"])
        check_resume_command(path, command)
        check_resume_config(path / "config.yaml", resolved.raw)
        (path / "config.yaml").write_text(resolved.to_yaml(), encoding="utf-8")  # the extended run.iterations
    else:
        path = new_run_dir(run.output_dir, run.name)
        (path / "config.yaml").write_text(resolved.to_yaml(), encoding="utf-8")
    write_json_atomic(path / "plugins.json", plugin_manifest(resolved, plugins))
    if not (path / COMMAND_FILE).is_file():
        write_json_atomic(path / COMMAND_FILE, {"command": command})
    return path
