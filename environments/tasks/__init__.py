"""The bundled task suite: OSWorld-format tasks that run offline on Debian applications.

Layout: ``osworld/<domain>/<task id>.json`` with the domain's files in
``osworld/<domain>/assets/``. Task JSON refers to those files by relative
paths (``assets/sales.xlsx``) that setup ``download`` steps and the
``cloud_file`` getter resolve against the task file's directory, so a task
keeps working wherever the package is installed and on remote desktops (the
files are uploaded). Each task's ``metadata.oracle`` is a list of
:class:`core.types.Action` objects that solves it through the GUI.

In a config: ``tasks: {paths: ["package:environments.tasks/osworld"]}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from core.types import Action, Task

ROOT = Path(__file__).resolve().parent / "osworld"


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


def load_task_file(path: str | Path) -> Task:
    """One task file, validated, remembering its directory (relative asset paths resolve there)."""
    path = Path(path)
    task = Task.model_validate(json.loads(path.read_text(encoding="utf-8")))
    task._source_dir = str(path.parent.resolve())
    return task


def load_bundled_tasks(domains: Iterable[str] | None = None, ids: Iterable[str] | None = None) -> list[Task]:
    """The suite's tasks, optionally filtered by domain and id."""
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
