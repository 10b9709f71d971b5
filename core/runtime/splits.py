"""Nothing an evaluation set measures may be trained on: the check run when a training pool and its evaluation
sets are loaded together.

Tasks may say where they belong in ``metadata`` (the task families write it; any task source may):

* ``split`` — ``train``, ``validation``, ``test`` or ``heldout`` (a family no training task comes from);
* ``values`` — ``{pool: [values]}``, the parameter values the task was made with (names, keywords, numbers);
* ``family`` — the family the task is a variant of.

:func:`split_problems` names every leak: a task in both the pool and an evaluation set, the same instruction in
both, a training pool holding test or held-out tasks, a test task using a value some training task uses, a
held-out-family task whose family is trained on. :func:`check_splits` raises them as one
:class:`~core.errors.ConfigError`.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from core.errors import ConfigError
from core.types import Task

#: splits a training pool must never hold
EVALUATION_ONLY = ("test", "heldout")
#: problems listed per check before the rest are counted
_SHOWN = 5


def _meta(task: Task, key: str) -> object:
    return task.metadata.get(key)


def split_problems(train: Mapping[str, Task], evaluation: Mapping[str, Mapping[str, Task]]) -> list[str]:
    """Every way the evaluation sets (name -> tasks) overlap the training pool; empty when they do not."""
    problems: list[str] = []
    leaked = [t.id for t in train.values() if _meta(t, "split") in EVALUATION_ONLY]
    if leaked:
        problems.append(_listed(f"tasks.paths: the training pool holds {len(leaked)} test or held-out tasks "
                                "(metadata.split); load only the train split there", leaked))
    values: dict[str, dict[str, str]] = {}
    for task in train.values():
        for pool, drawn in (_meta(task, "values") or {}).items():  # type: ignore[union-attr]
            for value in drawn:
                values.setdefault(pool, {}).setdefault(value, task.id)
    instructions = {t.instruction.strip(): t.id for t in train.values()}
    families = {_meta(t, "family") for t in train.values()} - {None}
    for name, tasks in evaluation.items():
        shared = sorted(set(tasks) & set(train))
        if shared:
            problems.append(_listed(f"evaluation set {name!r}: {len(shared)} tasks are also in the training pool",
                                    shared))
        same = [f"{t.id} = {instructions[t.instruction.strip()]}" for t in tasks.values()
                if t.id not in train and t.instruction.strip() in instructions]
        if same:
            problems.append(_listed(f"evaluation set {name!r}: {len(same)} tasks ask what a training task asks "
                                    "(same instruction)", same))
        reused = []
        for task in tasks.values():
            if _meta(task, "split") != "test":
                continue
            for pool, drawn in (_meta(task, "values") or {}).items():  # type: ignore[union-attr]
                for value in drawn:
                    if value in values.get(pool, {}):
                        reused.append(f"{task.id} uses {pool} value {value!r} like training task "
                                      f"{values[pool][value]}")
        if reused:
            problems.append(_listed(f"evaluation set {name!r}: {len(reused)} test values also occur in training",
                                    reused))
        trained = [f"{t.id} (family {_meta(t, 'family')})" for t in tasks.values()
                   if _meta(t, "split") == "heldout" and _meta(t, "family") in families]
        if trained:
            problems.append(_listed(f"evaluation set {name!r}: {len(trained)} held-out-family tasks come from a "
                                    "family the training pool contains", trained))
    return problems


def check_splits(train: Mapping[str, Task], evaluation: Mapping[str, Mapping[str, Task]]) -> None:
    """Raise every problem of :func:`split_problems` as one :class:`ConfigError`."""
    problems = split_problems(train, evaluation)
    if problems:
        raise ConfigError(problems)


def _listed(head: str, items: Iterable[str]) -> str:
    items = list(items)
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return f"{head}: {'; '.join(items[:_SHOWN])}{more}"
