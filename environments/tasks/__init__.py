"""The bundled task suite: OSWorld-format tasks that run offline on Debian applications.

Layout: ``osworld/<domain>/<task id>.json`` with the domain's files in
``osworld/<domain>/assets/``. Task JSON refers to those files as
``{TASK_ASSETS}/<name>``; :func:`resolve_placeholders` turns that into the
absolute path of the task's ``assets`` directory (``file://{TASK_ASSETS}/x``
becomes a ``file://`` URL). Each task's ``metadata.oracle`` is a list of
:class:`core.types.Action` objects that solves it through the GUI.

In a config: ``tasks: {paths: ["package:environments.tasks/osworld"]}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from core.types import Action, Task

ROOT = Path(__file__).resolve().parent / "osworld"
PLACEHOLDER = "{TASK_ASSETS}"


def bundled_task_paths(domains: Iterable[str] | None = None) -> list[Path]:
    """Task JSON files of the suite (optionally only some domains), sorted."""
    wanted = set(domains) if domains is not None else None
    paths = []
    for folder in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        if wanted is not None and folder.name not in wanted:
            continue
        paths.extend(sorted(folder.glob("*.json")))
    if wanted is not None:
        missing = wanted - {p.parent.name for p in paths}
        if missing:
            known = sorted(p.name for p in ROOT.iterdir() if p.is_dir())
            raise ValueError(f"unknown bundled task domain(s) {sorted(missing)}; available: {', '.join(known)}")
    return paths


def resolve_placeholders(task: Task, source_dir: str | Path | None = None) -> Task:
    """Replace ``{TASK_ASSETS}`` with ``<source_dir>/assets`` (default: the task's own source directory)."""
    directory = source_dir if source_dir is not None else task.source_dir
    text = json.dumps(task.to_json())
    if PLACEHOLDER not in text:
        return task
    if directory is None:
        raise ValueError(f"task {task.id}: uses {PLACEHOLDER} but its source directory is unknown")
    assets = str(Path(directory).resolve() / "assets")
    resolved = Task.model_validate(json.loads(text.replace(PLACEHOLDER, assets)))
    resolved._source_dir = str(directory)
    return resolved


def load_task_file(path: str | Path) -> Task:
    """One task file, validated, with placeholders resolved."""
    path = Path(path)
    task = Task.model_validate(json.loads(path.read_text(encoding="utf-8")))
    task._source_dir = str(path.parent)
    return resolve_placeholders(task)


def load_bundled_tasks(domains: Iterable[str] | None = None, ids: Iterable[str] | None = None) -> list[Task]:
    """The suite's tasks (placeholders resolved), optionally filtered by domain and id."""
    tasks = [load_task_file(p) for p in bundled_task_paths(domains)]
    if ids is not None:
        wanted = list(ids)
        by_id = {t.id: t for t in tasks}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise ValueError(f"unknown bundled task id(s) {missing}; see environments/tasks/osworld/*/")
        tasks = [by_id[i] for i in wanted]
    return tasks


def oracle_actions(task: Task) -> list[Action]:
    """The task's oracle as validated actions (a task without one is an error naming it)."""
    raw = task.metadata.get("oracle")
    if not raw:
        raise ValueError(f"task {task.id} has no metadata.oracle")
    return [Action.model_validate(a) for a in raw]
