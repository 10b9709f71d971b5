"""``least-seen``: every iteration, the tasks drawn the fewest times so far.

Ties are broken by a shuffle seeded with the run seed and the iteration, so a run is reproducible and a resumed
run draws what the uninterrupted one would have (the counts are the whole state).
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import Sampler
from core.types import Task


class LeastSeenOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: count a draw only when the task's group had at least one success (a task never solved stays in front)
    count_only_solved: bool = Field(False, description="count a draw only when one of the task's rollouts succeeded")


class LeastSeen(Sampler):
    def __init__(self, options: LeastSeenOptions, **_context: Any) -> None:
        self.options = options
        self.seed = 0
        self.counts: dict[str, int] = {}

    def setup(self, tasks: Sequence[Task], *, seed: int) -> None:
        if not tasks:
            raise ValueError("least-seen needs at least one task in the pool")
        self.seed = seed
        self.counts = {task.id: self.counts.get(task.id, 0) for task in tasks}

    def select(self, iteration: int, batch_size: int) -> list[str]:
        ids = sorted(self.counts)
        random.Random(f"{self.seed}:{iteration}").shuffle(ids)
        ids.sort(key=self.counts.__getitem__)  # stable: the shuffle orders each count's ties
        return ids[:batch_size]

    def observe(self, iteration: int, outcomes: Mapping[str, Sequence[float]]) -> None:
        for task_id, successes in outcomes.items():
            if task_id in self.counts and (not self.options.count_only_solved or any(successes)):
                self.counts[task_id] += 1

    def stats(self) -> Mapping[str, float]:
        values = list(self.counts.values()) or [0]
        return {"least_seen/min_draws": float(min(values)), "least_seen/max_draws": float(max(values))}

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "counts": dict(self.counts)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.seed = int(state["seed"])
        self.counts.update({str(k): int(v) for k, v in state["counts"].items()})
