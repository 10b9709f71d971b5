"""Fail fast: every task of a pool checked against what can set it up and judge it, before any desktop starts.

A task names setup step types (``config``, ``evaluator.postconfig``), getter types (``evaluator.result`` /
``expected``) and metrics (``evaluator.func``). Getters and metrics resolve against the run's registries
(functions the task's generated ``evaluator.code`` defines count as present); setup step types are the
environment backend's to check (:meth:`core.interfaces.EnvironmentBackend.unsupported_steps`). Without this,
a missing name is found after an episode has run, as a crashed judgement.

``tasks.unsupported: error`` (the default) makes any such task one :class:`~core.errors.ConfigError` listing
each task and name with the closest registered one; ``skip`` leaves those tasks out of the pool, logs them and
writes ``skipped_tasks.json`` in the run directory (e.g. OSWorld's Google Drive tasks, whose accounts no
desktop here has).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import structlog

from core.errors import ConfigError
from core.interfaces import EnvironmentBackend, JudgeServices
from core.registry import close_matches
from core.types import Task

log = structlog.get_logger(__name__)


def generated_functions(code: str | None) -> set[str]:
    """Names of the functions a task's generated judge code defines at its top level."""
    if not code:
        return set()
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()  # the rule validator and the judge report broken code; nothing resolves from it
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _getter_types(value: Any) -> list[str]:
    specs = value if isinstance(value, list) else [value]
    return [str(spec["type"]) for spec in specs if isinstance(spec, Mapping) and spec.get("type")]


def task_problems(task: Task, backend: EnvironmentBackend, judge: JudgeServices) -> list[str]:
    """What in ``task`` nothing here can run: one line per unknown name, with the closest known one."""
    problems = [f"setup step type '{name}' is not supported by this environment backend"
                for name in backend.unsupported_steps(task)]
    ev = task.evaluator
    own = generated_functions(ev.code)
    for kind, registry, names in (("metric", judge.metrics, ev.funcs),
                                  ("getter", judge.getters, _getter_types(ev.result) + _getter_types(ev.expected))):
        for name in dict.fromkeys(names):
            if name not in registry and name not in own:
                match = close_matches(name, registry.names())
                problems.append(f"unknown {kind} '{name}'" + (f" (did you mean '{match[0]}'?)" if match else ""))
    return problems


def check_pool(tasks: Sequence[Task], backend: EnvironmentBackend, judge: JudgeServices, *, policy: str,
               run_dir: Path | None = None) -> list[Task]:
    """The pool without the tasks nothing here can run (``policy: skip``), or a ConfigError (``error``)."""
    found = {task.id: problems for task in tasks if (problems := task_problems(task, backend, judge))}
    if not found:
        return list(tasks)
    if policy == "error":
        lines = [f"task {task_id}: {problem}" for task_id, problems in found.items() for problem in problems]
        raise ConfigError([*lines, f"{len(found)} of {len(tasks)} tasks cannot be set up or judged here: register "
                           "the missing plugins, leave those tasks out (tasks.include / tasks.domains), or set "
                           "tasks.unsupported: skip"])
    log.warning("tasks left out: nothing here can set them up or judge them", skipped=len(found), pool=len(tasks),
                tasks=sorted(found)[:20])
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "skipped_tasks.json").write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    kept = [task for task in tasks if task.id not in found]
    if not kept:
        raise ConfigError([f"tasks.unsupported: skip left no task of {len(tasks)} (see skipped_tasks.json)"])
    return kept
