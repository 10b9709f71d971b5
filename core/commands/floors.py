"""Floors: what a policy that reads nothing scores on an evaluation set, measured on live desktops.

A gain means little next to a floor it never clears. Two policies that ignore the instruction and the
screen, each replayed through the episode loop and judged like the agent (:func:`core.record.record_oracles`):

* ``always_fail``: the first action is ``fail`` (the right answer to an infeasible request, 0 elsewhere);
* ``frequent_oracle``: the training pool's most frequent oracle (ties: the first in sorted order), the same
  action sequence on every task: what memorizing one answer earns.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.commands.record import record_oracles
from core.types import Action, ActionType, Task


def most_frequent_oracle(tasks: Sequence[Task]) -> tuple[list[dict[str, Any]], int] | None:
    """The commonest ``metadata.oracle`` of ``tasks`` (as action JSON) and how many tasks share it."""
    counts = Counter(json.dumps(t.metadata["oracle"], sort_keys=True) for t in tasks if t.metadata.get("oracle"))
    if not counts:
        return None
    best = max(sorted(counts), key=lambda k: counts[k])  # max keeps the first of equals: sorted order breaks ties
    return json.loads(best), counts[best]


def _scripted(tasks: Mapping[str, Task], oracle: list[dict[str, Any]]) -> list[Task]:
    return [t.model_copy(update={"metadata": {**t.metadata, "oracle": oracle}}) for t in tasks.values()]


async def measure_floors(resolved: Any, plugins: Any, run_dir: Path, *, eval_set: str | None,
                         train_tasks: Sequence[Task]) -> dict[str, Any]:
    """Both floors' success (0..1) on ``eval_set`` (a ``tasks.eval_sets`` name; None: the training pool)."""
    from core.runtime.components import build_components

    c = build_components(resolved, plugins, run_dir, train=False, eval_set=eval_set)
    loop_cfg = resolved.config.rollout_loop
    policies: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
        "always_fail": ([Action(type=ActionType.FAIL).model_dump(mode="json")], {})}
    frequent = most_frequent_oracle(train_tasks)
    if frequent is not None:
        policies["frequent_oracle"] = (frequent[0], {"oracle": frequent[0], "shared_by": frequent[1],
                                                     "of_training_tasks": len(train_tasks)})
    floors: dict[str, Any] = {}
    try:
        for name, (oracle, info) in policies.items():
            tasks = _scripted(c.tasks, oracle)
            result = await record_oracles(tasks, c.deps, concurrency=loop_cfg.concurrency,
                                          retries=loop_cfg.env_retries, warn=False)
            floors[name] = {"success": round(len(result.recorded) / len(tasks), 4), "tasks": len(tasks),
                            "env_errors": result.env_errors, **info}
    finally:
        await c.close()
    return floors
