"""Load task pools from OSWorld-format JSON files.

A task source is a ``.json`` file, a directory (searched recursively for
``*.json``), or ``package:<module>/<subdir>`` for files shipped inside an
installed package (``package:environments.tasks/osworld``). ``pool:<split>``
names a split of the pool a recipe's synthesize stage builds (``python -m
core.pipeline`` rewrites it to the stage's export directory).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from pydantic import ValidationError

from core.config.files import PACKAGE_PREFIX, package_path
from core.errors import ConfigError
from core.types import Task

POOL_PREFIX = "pool:"


def task_path_lists(raw: dict[str, Any]) -> dict[str, list[Any]]:
    """Every task-path list of a raw config by its dotted key (``tasks.paths``, ``tasks.eval_paths``,
    ``tasks.eval_sets.<name>.paths``): the config's own lists where it has them, so a caller may rewrite them."""
    tasks = raw.get("tasks") or {}
    return {"tasks.paths": tasks.get("paths") or [], "tasks.eval_paths": tasks.get("eval_paths") or [],
            **{f"tasks.eval_sets.{name}.paths": (entry or {}).get("paths") or []
               for name, entry in (tasks.get("eval_sets") or {}).items()}}


def rooted(paths: list[Any], prefix: str, root: Path) -> list[Any]:
    """``paths`` with each ``<prefix><rest>`` (``pool:test``) made ``root/<rest>``; the others unchanged."""
    return [str(root / p[len(prefix):]) if str(p).startswith(prefix) else p for p in paths]


#: files in task directories that are not tasks (assets, manifests)
_SKIP_NAMES = {"manifest.json", "package.json"}


def resolve_source(source: str, base_dir: Path | None = None) -> Path:
    """The filesystem path of a task source."""
    if source.startswith(POOL_PREFIX):
        raise ConfigError([f"tasks: {source!r} names a split of the pool the recipe's synthesize stage builds; run "
                           "the recipe (python -m core.pipeline), or give the exported directory instead "
                           "(<recipe dir>/synthesize/pool/<split>)"])
    if source.startswith(PACKAGE_PREFIX):
        return package_path(source, "tasks")
    path = Path(source).expanduser()
    if not path.is_absolute() and base_dir is not None and not path.exists():
        path = base_dir / path
    return path


def task_files(source: str, base_dir: Path | None = None) -> list[Path]:
    path = resolve_source(source, base_dir)
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*.json") if p.name not in _SKIP_NAMES and "assets" not in p.parts)
    raise ConfigError([f"tasks: {source!r} does not exist (resolved to {path})"])


def load_tasks(
    sources: Iterable[str],
    *,
    base_dir: Path | None = None,
    convert: Callable[[Mapping[str, Any]], Task] = Task.model_validate,
    include: Iterable[str] | None = None,
    domains: Iterable[str] | None = None,
) -> list[Task]:
    """Every task in ``sources``, validated; duplicate ids and invalid files are errors (all reported)."""
    tasks: list[Task] = []
    seen: dict[str, Path] = {}
    problems: list[str] = []
    for source in sources:
        for file in task_files(source, base_dir):
            try:
                raw = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad JSON or bytes that are not UTF-8
                reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
                problems.append(f"{file}: not readable JSON: {reason}")
                continue
            if isinstance(raw, dict) and "id" not in raw and "instruction" not in raw:
                continue  # not a task file (e.g. an asset manifest)
            try:
                task = convert(raw)
            except (ValidationError, ValueError, TypeError) as exc:
                problems.append(f"{file}: not a valid task: {str(exc).splitlines()[0]}")
                continue
            if task.id in seen:
                problems.append(f"{file}: task id '{task.id}' already defined in {seen[task.id]}")
                continue
            seen[task.id] = file
            task._source_dir = str(file.parent)
            tasks.append(task)
    if problems:
        raise ConfigError(problems)
    if include is not None:
        wanted = set(include)
        missing = wanted - set(seen)
        if missing:
            raise ConfigError([f"tasks.include: unknown task ids {sorted(missing)}"])
        tasks = [t for t in tasks if t.id in wanted]
    if domains is not None:
        allowed = set(domains)
        tasks = [t for t in tasks if t.domain in allowed]
    return tasks
