"""Frontier Sampling (the paper's section 3.3 and appendix D).

Each task keeps an EMA of its success rate,
``p_i <- (1 - alpha) p_i + alpha * mean(successes of its n rollouts)`` (Eq. 1),
turned into a weight by a Gaussian kernel around the target success rate,
``w_i = exp(-(p_i - mu)^2 / (2 sigma^2))`` (Eq. 2). Each iteration the top
``candidate_pool_factor x B`` tasks by weight form the candidate pool;
``(1 - gamma) B`` tasks are drawn from it in proportion to their weights without
replacement and ``gamma B`` uniformly from the selectable tasks outside it.

Where a count is fractional it is rounded half up: with B = 32 and gamma = 0.2,
6 tasks are uniform and 26 come from a pool of 96. Ties at the pool's edge are
broken uniformly at random. Weighted draws without replacement use the
Gumbel-top-k trick on ``log w`` (equivalent to drawing one task at a time in
proportion to its weight), which stays exact when a narrow ``sigma`` makes
``w`` underflow to zero.

Estimates before any observation: with ``initial_pass_rollouts > 0`` the loop
runs the paper's pass over all tasks first; tasks outside ``[p_min, p_max]``
are never selected and the rest start their EMA at the measured rate. Without
it (or for a task the pass did not reach) a task is "unseen": its weight is
computed from ``unseen_pass_rate`` (default mu, so unseen tasks sit on the
frontier and are tried early) and its first observation *replaces* that value,
as an initial pass would have, before the EMA takes over. ``unseen_in_pool:
false`` keeps unseen tasks out of the weighted pool (the uniform share still
reaches them), so selection is EMA-driven from the first observations on.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from samplers.base import PoolSampler, SamplerError, decode_array, encode_array, round_half_up

log = structlog.get_logger(__name__)


class FrontierOptions(BaseModel):
    """Options of the ``frontier`` sampler; defaults are the paper's Table 10."""

    model_config = ConfigDict(extra="forbid")

    mu: float = Field(0.5, ge=0, le=1, description="target success rate: the Gaussian kernel's peak")
    sigma: float = Field(0.25, gt=0, description="bandwidth of the Gaussian kernel around mu")
    gamma: float = Field(0.2, ge=0, le=1, description="share of each batch drawn uniformly from outside the pool")
    alpha: float = Field(0.2, gt=0, le=1, description="EMA smoothing factor of the per-task success rate")
    candidate_pool_factor: float = Field(
        3.0, ge=1, description="the candidate pool is the top candidate_pool_factor x B tasks by weight")
    initial_pass_rollouts: int = Field(
        0, ge=0, description="rollouts per task in a pass-rate sweep over all tasks before training (0: none; "
        "the paper ran one, e.g. 8)")
    p_min: float = Field(0.0, ge=0, le=1, description="tasks whose initial pass rate is below this are dropped")
    p_max: float = Field(1.0, ge=0, le=1, description="tasks whose initial pass rate is above this are dropped")
    unseen_pass_rate: float = Field(
        0.5, ge=0, le=1, description="success rate assumed for a task not yet measured; its first observation "
        "replaces it")
    unseen_in_pool: bool = Field(
        True, description="never-observed tasks compete with observed ones for the weighted candidate pool "
        "(with unseen_pass_rate = mu they win it: a sweep over unseen tasks comes first); false: they are "
        "reached only by the uniform gamma share, and the pool holds measured tasks")

    @model_validator(mode="after")
    def _range_ordered(self) -> FrontierOptions:
        if self.p_min > self.p_max:
            raise ValueError(f"p_min ({self.p_min}) must not exceed p_max ({self.p_max}); e.g. p_min: 0.1, p_max: 0.9")
        return self


class FrontierSampler(PoolSampler):
    """Concentrates each batch on tasks whose EMA success rate is near ``mu``."""

    kind = "frontier"

    def __init__(self, options: FrontierOptions | None = None) -> None:
        super().__init__()
        self.options = options or FrontierOptions()
        self.initial_pass_rollouts = self.options.initial_pass_rollouts
        self._ema = np.zeros(0)
        self._seen = np.zeros(0, dtype=bool)
        self._log_weight = np.zeros(0)
        self._last_batch: dict[str, float] = {}

    # -- the paper's equations -------------------------------------------------------

    def log_weight(self, pass_rate: np.ndarray | float) -> np.ndarray:
        """log w of Eq. (2); kept in log space so narrow kernels never underflow."""
        o = self.options
        return -np.square(np.asarray(pass_rate, dtype=np.float64) - o.mu) / (2.0 * o.sigma * o.sigma)

    def _setup_pool(self, tasks: Sequence[Any]) -> None:
        self._ema = np.full(self.num_tasks, self.options.unseen_pass_rate, dtype=np.float64)
        self._seen = np.zeros(self.num_tasks, dtype=bool)
        self._log_weight = self.log_weight(self._ema)
        self._last_batch = {}

    def _use_initial_rates(self, positions: np.ndarray, rates: np.ndarray) -> None:
        o = self.options
        inside = (rates >= o.p_min) & (rates <= o.p_max)
        active = self._active.copy()
        active[positions] = inside
        if not active.any():
            raise SamplerError(
                f"frontier sampler: the initial-pass filter [p_min={o.p_min}, p_max={o.p_max}] removes all "
                f"{self.num_tasks} tasks (measured pass rates range from {rates.min():.3f} to {rates.max():.3f}); "
                "widen sampler.options.p_min/p_max")
        self._active = active
        self._ema[positions] = rates
        self._seen[positions] = True
        self._log_weight[positions] = self.log_weight(rates)
        log.info("initial pass rates applied", measured=int(positions.size), filtered_out=int((~inside).sum()),
                 selectable=int(active.sum()), p_min=o.p_min, p_max=o.p_max)

    def observe(self, iteration: int, outcomes: Mapping[str, Sequence[float]]) -> None:
        self._require_setup()
        positions, means = self._validated_outcomes(outcomes, where="observe")
        alpha = self.options.alpha
        previous = self._ema[positions]
        self._ema[positions] = np.where(self._seen[positions], (1.0 - alpha) * previous + alpha * means, means)
        self._seen[positions] = True
        self._log_weight[positions] = self.log_weight(self._ema[positions])

    # -- selection ---------------------------------------------------------------------------

    def _split(self, batch: int, selectable: int) -> tuple[int, int, int]:
        """(pool size, draws from the pool, uniform draws outside it) for a batch of ``batch`` tasks."""
        o = self.options
        pool_size = min(int(math.ceil(o.candidate_pool_factor * batch - 1e-9)), selectable)
        uniform = min(round_half_up(o.gamma * batch), selectable - pool_size)
        return pool_size, batch - uniform, uniform

    def candidate_pool(self, pool_size: int) -> np.ndarray:
        """Positions of the ``pool_size`` eligible tasks of highest weight (edge ties broken at random);
        eligible: selectable, and measured unless ``unseen_in_pool``."""
        eligible = self._active if self.options.unseen_in_pool else self._active & self._seen
        if pool_size >= int(eligible.sum()):
            return np.flatnonzero(eligible)
        key = np.where(eligible, self._log_weight, -np.inf)
        threshold = np.partition(key, key.size - pool_size)[key.size - pool_size]
        above = np.flatnonzero(key > threshold)
        tied = np.flatnonzero(key == threshold)
        return np.concatenate([above, self._uniform_from(tied, pool_size - above.size)])

    def select(self, iteration: int, batch_size: int) -> list[str]:
        self._require_setup()
        selectable = int(self._active.sum())
        batch = self._batch_size(batch_size, selectable)
        pool_size, from_pool, uniform = self._split(batch, selectable)
        pool = self.candidate_pool(pool_size)
        # Gumbel-top-k: the k largest log w + Gumbel noise are a weighted draw without replacement
        scores = self._log_weight[pool] + self.rng.gumbel(size=pool.size)
        picked = pool[np.argsort(-scores, kind="stable")[:from_pool]]
        outside = self._active.copy()
        outside[pool] = False
        # a pool smaller than its share (unseen tasks kept out of it) leaves the rest to the uniform draw
        uniform = batch - picked.size
        extra = self._uniform_from(np.flatnonzero(outside), uniform)
        chosen = np.concatenate([picked, extra])
        self._last_batch = {"batch_from_pool": float(picked.size), "batch_uniform": float(uniform),
                            "candidate_pool": float(pool.size),
                            "batch_mean_pass_rate": float(self._ema[chosen].mean()),
                            "batch_mean_weight": float(np.exp(self._log_weight[chosen]).mean())}
        return self._ids(chosen)

    # -- reports and state ----------------------------------------------------------------------

    def pass_rates(self) -> dict[str, float]:
        """Current EMA success rate per selectable task."""
        return {self._task_ids[p]: float(self._ema[p]) for p in np.flatnonzero(self._active)}

    def weights(self) -> Mapping[str, float]:
        if self._active.all():
            return dict(zip(self._task_ids, np.exp(self._log_weight).tolist()))
        positions = np.flatnonzero(self._active)
        return dict(zip(self._ids(positions), np.exp(self._log_weight[positions]).tolist()))

    def stats(self) -> dict[str, float]:
        measured = self._active & self._seen
        return {**super().stats(), "tasks_seen": float(measured.sum()),
                "mean_pass_rate": float(self._ema[measured].mean()) if measured.any() else 0.0, **self._last_batch}

    def _extra_state(self) -> dict[str, Any]:
        return {"ema": encode_array(self._ema), "seen": encode_array(self._seen), "options": self.options.model_dump()}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        if state.get("options") != self.options.model_dump():
            log.warning("frontier options differ from the checkpoint's; the new ones apply from now on",
                        saved=state.get("options"), now=self.options.model_dump())
        ema = decode_array(state["ema"], expected_length=self.num_tasks, what="ema")
        seen = decode_array(state["seen"], expected_length=self.num_tasks, what="seen").astype(bool)
        self._ema, self._seen = ema, seen
        self._log_weight = self.log_weight(ema)
        self._last_batch = {}


def create_frontier(options: FrontierOptions, **_: object) -> FrontierSampler:
    return FrontierSampler(options)
