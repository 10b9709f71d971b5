"""The curriculum baseline: a fixed easy-to-hard schedule over estimated task difficulty.

Tasks are ranked once by estimated difficulty (ties broken at random under the
seed). Each iteration an *admitted band* of ranks is open and the batch is
drawn uniformly from it; the band moves with the iteration number only, never
with the learner's results (that is what makes it the paper's fixed-schedule
baseline). With ``mode: sliding`` a window of ``band_width`` of the pool slides
from the easiest end (iteration 0) to the hardest (iteration
``schedule_iterations - 1`` and later); with ``mode: expanding`` the band
always starts at the easiest task and grows from ``band_width`` to the whole
pool. A band never holds fewer tasks than the batch.

Difficulty of a task, first match wins:

1. ``task.metadata["difficulty"]``, else ``task.metadata["estimated_difficulty"]``
   (VeriGen's estimate): a number (higher = harder) or a label
   (``trivial`` < ``easy`` < ``medium`` < ``hard`` < ``expert``; case-insensitive);
2. ``1 - initial pass rate`` when ``initial_pass_rollouts > 0`` and the pass reached it.

Numbers and labels are not mixed: labels rank as 0..4 only when no task gives
a number. Tasks left without an estimate get the ``unknown_difficulty`` rule.
A pool where *no* task has an estimate is an error: a schedule over nothing
would be a uniform sampler in disguise.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field

from samplers.base import PoolSampler, SamplerError, decode_array, encode_array

log = structlog.get_logger(__name__)

DIFFICULTY_KEYS = ("difficulty", "estimated_difficulty")
DIFFICULTY_LABELS = {"trivial": 0.0, "easy": 1.0, "medium": 2.0, "moderate": 2.0, "intermediate": 2.0,
                     "hard": 3.0, "difficult": 3.0, "expert": 4.0, "very hard": 4.0}


class CurriculumOptions(BaseModel):
    """Options of the ``curriculum`` sampler."""

    model_config = ConfigDict(extra="forbid")

    schedule_iterations: int = Field(
        1000, ge=1, description="iterations for the band to travel from easiest to hardest (the paper's run "
        "length, 1000; set it to run.iterations)")
    band_width: float = Field(0.2, gt=0, le=1, description="share of the ranked pool admitted at a time (sliding), "
                              "or at iteration 0 (expanding)")
    mode: Literal["sliding", "expanding"] = Field("sliding", description="sliding window or growing prefix")
    unknown_difficulty: Literal["error", "easiest", "median", "hardest"] = Field(
        "median", description="rank of tasks without a difficulty estimate when others have one")
    initial_pass_rollouts: int = Field(
        0, ge=0, description="rollouts per task in a pass-rate sweep before training; 1 - pass rate is the "
        "difficulty of tasks whose metadata gives none")


def _ceil(value: float) -> int:
    """Ceiling that ignores float noise (0.6 * 100 is 60.00000000000001)."""
    return int(math.ceil(value - 1e-9))


def metadata_difficulty(task: Any) -> float | str | None:
    """The task's difficulty as given in its metadata (number or label), or None."""
    metadata = getattr(task, "metadata", None) or {}
    for key in DIFFICULTY_KEYS:
        value = metadata.get(key)
        if value is None:
            continue
        if isinstance(value, bool):
            raise SamplerError(f"curriculum sampler: task {task.id!r} has metadata.{key} = {value!r}; "
                               "give a number (higher = harder) or a label such as 'easy', 'medium', 'hard'")
        if isinstance(value, (int, float)) and math.isfinite(value):
            return float(value)
        if isinstance(value, str):
            label = value.strip().lower()
            if label in DIFFICULTY_LABELS:
                return label
            try:
                return float(label)
            except ValueError:
                pass
        raise SamplerError(
            f"curriculum sampler: task {task.id!r} has metadata.{key} = {value!r}; give a finite number (higher = "
            f"harder) or one of the labels {', '.join(sorted(DIFFICULTY_LABELS))}")
    return None


class CurriculumSampler(PoolSampler):
    """Uniform draws from a band of difficulty ranks that moves from easy to hard on a fixed schedule."""

    kind = "curriculum"

    def __init__(self, options: CurriculumOptions | None = None) -> None:
        super().__init__()
        self.options = options or CurriculumOptions()
        self.initial_pass_rollouts = self.options.initial_pass_rollouts
        self._difficulty = np.zeros(0)  # NaN: no estimate
        self._order: np.ndarray | None = None  # positions, easiest first
        self._tiebreak = np.zeros(0)
        self._band: tuple[int, int] = (0, 0)

    def _setup_pool(self, tasks: Sequence[Any]) -> None:
        given = [metadata_difficulty(task) for task in tasks]
        numbers = [v for v in given if isinstance(v, float)]
        values = np.full(self.num_tasks, np.nan)
        for position, value in enumerate(given):
            if isinstance(value, float):
                values[position] = value
            elif isinstance(value, str) and not numbers:
                values[position] = DIFFICULTY_LABELS[value]
        if numbers and any(isinstance(v, str) for v in given):
            log.warning("curriculum: some tasks give difficulty labels and others numbers; labels are ignored",
                        numeric=len(numbers))
        self._difficulty = values
        # a fixed random tie-break per task, so equal difficulties do not rank in file order
        self._tiebreak = self.rng.random(self.num_tasks)
        self._order = None
        self._band = (0, 0)
        if np.isnan(values).all() and self.initial_pass_rollouts == 0:
            raise SamplerError(
                "curriculum sampler: no task has a difficulty estimate (metadata.difficulty or "
                "metadata.estimated_difficulty), so there is nothing to order by; add it to the task files or set "
                "sampler.options.initial_pass_rollouts (e.g. 8) to rank tasks by a measured pass rate")
        if self.initial_pass_rollouts == 0:
            self.ranking()  # report missing estimates now, not at the first select()

    def _use_initial_rates(self, positions: np.ndarray, rates: np.ndarray) -> None:
        missing = np.isnan(self._difficulty[positions])
        self._difficulty[positions[missing]] = 1.0 - rates[missing]
        self._order = None

    def ranking(self) -> np.ndarray:
        """Task positions from easiest to hardest (computed once, after any initial pass)."""
        if self._order is None:
            difficulty = self._difficulty.copy()
            unknown = np.isnan(difficulty)
            if unknown.all():
                raise SamplerError("curriculum sampler: no task has a difficulty estimate yet; the initial pass "
                                   "(initial_pass_rollouts) must report pass rates before the first select()")
            if unknown.any():
                rule = self.options.unknown_difficulty
                if rule == "error":
                    missing = [self._task_ids[p] for p in np.flatnonzero(unknown)[:5]]
                    raise SamplerError(
                        f"curriculum sampler: {int(unknown.sum())} task(s) have no difficulty estimate (e.g. "
                        f"{missing}); add metadata.difficulty, or set sampler.options.unknown_difficulty to "
                        "easiest, median or hardest")
                known = difficulty[~unknown]
                fill = {"easiest": known.min() - 1.0, "median": float(np.median(known)),
                        "hardest": known.max() + 1.0}[rule]
                difficulty[unknown] = fill
                log.info("curriculum: tasks without difficulty placed by rule", rule=rule, count=int(unknown.sum()))
            self._order = np.lexsort((self._tiebreak, difficulty))
        return self._order

    def band(self, iteration: int, batch: int) -> tuple[int, int]:
        """[start, stop) in the ranking admitted at ``iteration`` for a batch of ``batch`` tasks."""
        n = self.num_tasks
        progress = min(1.0, max(0, iteration) / max(1, self.options.schedule_iterations - 1))
        width = self.options.band_width
        if self.options.mode == "sliding":
            size = min(n, max(batch, _ceil(width * n)))
            start = int(math.floor(progress * (n - size) + 0.5))
            return start, start + size
        return 0, min(n, max(batch, _ceil((width + progress * (1.0 - width)) * n)))

    def select(self, iteration: int, batch_size: int) -> list[str]:
        self._require_setup()
        if iteration < 0:
            raise SamplerError(f"curriculum sampler: iteration must be >= 0, got {iteration}")
        batch = self._batch_size(batch_size, self.num_tasks)
        start, stop = self.band(iteration, batch)
        self._band = (start, stop)
        return self._ids(self._uniform_from(self.ranking()[start:stop], batch))

    def weights(self) -> Mapping[str, float]:
        """1 for the tasks in the band admitted at the last select(), 0 elsewhere."""
        if self._order is None:
            return {}
        admitted = np.zeros(self.num_tasks)
        admitted[self._order[self._band[0]:self._band[1]]] = 1.0
        return dict(zip(self._task_ids, admitted.tolist()))

    def stats(self) -> dict[str, float]:
        start, stop = self._band
        return {**super().stats(), "band_start": start / self.num_tasks if self.num_tasks else 0.0,
                "band_stop": stop / self.num_tasks if self.num_tasks else 0.0}

    def _extra_state(self) -> dict[str, Any]:
        return {"difficulty": encode_array(self._difficulty), "tiebreak": encode_array(self._tiebreak),
                "band": list(self._band)}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        difficulty = decode_array(state["difficulty"], expected_length=self.num_tasks, what="difficulty")
        tiebreak = decode_array(state["tiebreak"], expected_length=self.num_tasks, what="tiebreak")
        start, stop = (int(v) for v in state["band"])
        self._difficulty, self._tiebreak, self._band, self._order = difficulty, tiebreak, (start, stop), None


def create_curriculum(options: CurriculumOptions, **_: object) -> CurriculumSampler:
    return CurriculumSampler(options)
