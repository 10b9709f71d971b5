"""DAPO dynamic sampling (Yu et al., 2025) as a sampler.

Tasks are drawn uniformly like :mod:`samplers.uniform`. A finished group whose
rewards are all equal has zero group-relative advantage, so :meth:`accept`
drops it and the loop asks :meth:`top_up` for replacements, which are drawn
uniformly from the tasks not yet drawn this iteration. Extra draws are bounded
per iteration (``max_extra_ratio`` x the batch size) so a pool of solved or
hopeless tasks cannot stall an iteration; :meth:`stats` reports how many were
used and whether the bound was hit.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from samplers.base import SamplerError
from samplers.uniform import UniformSampler

log = structlog.get_logger(__name__)


class DapoOptions(BaseModel):
    """Options of the ``dapo`` sampler."""

    model_config = ConfigDict(extra="forbid")

    max_extra_ratio: float = Field(
        3.0, ge=0,
        description="at most floor(max_extra_ratio x batch size) extra tasks are drawn per iteration to replace "
        "dropped groups (0 disables refilling: dropped groups are simply lost)",
    )
    reward_tolerance: float = Field(
        1e-9, ge=0,
        description="a group is dropped when max(rewards) - min(rewards) <= this (all rewards equal)",
    )


class DapoSampler(UniformSampler):
    """Uniform draws; uniform-reward groups are dropped and refilled up to a per-iteration bound."""

    kind = "dapo"

    def __init__(self, options: DapoOptions | None = None) -> None:
        super().__init__()
        self.options = options or DapoOptions()
        self._reset_counters()

    def _reset_counters(self) -> None:
        self._iteration = -1
        self._budget = 0
        self._drawn = np.zeros(0, dtype=np.int64)  # positions drawn this iteration (select + top-ups)
        self._extra = 0
        self._exhausted = False
        self._dropped = 0
        self._accepted = 0
        self._extra_total = 0
        self._dropped_total = 0
        self._accepted_total = 0

    def _setup_pool(self, tasks: Sequence[Any]) -> None:
        self._reset_counters()

    def select(self, iteration: int, batch_size: int) -> list[str]:
        positions = self._select_positions(batch_size)
        self._iteration = int(iteration)
        self._budget = int(math.floor(self.options.max_extra_ratio * positions.size))
        self._drawn = positions
        self._extra, self._exhausted, self._dropped, self._accepted = 0, False, 0, 0
        return self._ids(positions)

    def accept(self, task_id: str, rewards: Sequence[float]) -> bool:
        self._require_setup()
        self._positions([task_id], where="accept")
        values = np.asarray(list(rewards), dtype=np.float64)
        if values.size == 0:
            raise SamplerError(f"dapo sampler.accept: task {task_id!r} has no rewards; pass the rewards of the "
                               "group's finished rollouts")
        keep = bool(values.max() - values.min() > self.options.reward_tolerance)
        if keep:
            self._accepted += 1
            self._accepted_total += 1
        else:
            self._dropped += 1
            self._dropped_total += 1
        return keep

    def top_up(self, iteration: int, needed: int, exclude: Sequence[str]) -> list[str]:
        self._require_setup()
        if self._iteration < 0:
            raise SamplerError("dapo sampler.top_up: no select() yet; call select() first each iteration")
        if int(iteration) != self._iteration:
            raise SamplerError(f"dapo sampler.top_up: called for iteration {iteration} but the last select() was for "
                               f"iteration {self._iteration}; call select() first each iteration")
        if needed < 0:
            raise SamplerError(f"dapo sampler.top_up: needed must be >= 0, got {needed}")
        left = self._budget - self._extra
        if needed == 0:
            return []
        candidates = self._active.copy()
        candidates[self._drawn] = False
        if exclude:
            candidates[self._positions(list(exclude), where="top_up")] = False
        available = np.flatnonzero(candidates)
        count = min(needed, left, available.size)
        if count < needed:
            self._exhausted = True
            log.info("dapo top-up bounded", iteration=self._iteration, needed=needed, drawn=count,
                     budget_left=left, undrawn_tasks=int(available.size))
        picked = self._uniform_from(available, count)
        self._drawn = np.concatenate([self._drawn, picked])
        self._extra += count
        self._extra_total += count
        return self._ids(picked)

    def stats(self) -> dict[str, float]:
        """This iteration's extra draws, the bound, whether it was hit, kept/dropped groups; and run totals."""
        return {
            **super().stats(),
            "extra_draws": float(self._extra),
            "extra_draws_budget": float(self._budget),
            "extra_draws_exhausted": float(self._exhausted),
            "groups_dropped": float(self._dropped),
            "groups_accepted": float(self._accepted),
            "extra_draws_total": float(self._extra_total),
            "groups_dropped_total": float(self._dropped_total),
            "groups_accepted_total": float(self._accepted_total),
        }

    def _extra_state(self) -> dict[str, Any]:
        return {"iteration": self._iteration, "budget": self._budget, "drawn": [int(p) for p in self._drawn],
                "extra": self._extra, "exhausted": self._exhausted, "dropped": self._dropped,
                "accepted": self._accepted, "extra_total": self._extra_total,
                "dropped_total": self._dropped_total, "accepted_total": self._accepted_total}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        drawn = np.asarray(state["drawn"], dtype=np.int64)
        if drawn.size and (drawn.min() < 0 or drawn.max() >= self.num_tasks):
            raise ValueError("drawn positions outside the pool")
        self._iteration = int(state["iteration"])
        self._budget = int(state["budget"])
        self._drawn = drawn
        self._extra = int(state["extra"])
        self._exhausted = bool(state["exhausted"])
        self._dropped = int(state["dropped"])
        self._accepted = int(state["accepted"])
        self._extra_total = int(state["extra_total"])
        self._dropped_total = int(state["dropped_total"])
        self._accepted_total = int(state["accepted_total"])


def create_dapo(options: DapoOptions, **_: object) -> DapoSampler:
    return DapoSampler(options)

