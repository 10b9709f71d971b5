"""The uniform baseline: each iteration, B distinct tasks drawn uniformly from the pool."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from samplers.base import PoolSampler


class UniformOptions(BaseModel):
    """The uniform sampler takes no options (the batch size comes from ``algorithm.batch_size``)."""

    model_config = ConfigDict(extra="forbid")


class UniformSampler(PoolSampler):
    """Uniform without replacement within a batch; batches are drawn independently of each other."""

    kind = "uniform"

    def __init__(self, options: UniformOptions | None = None) -> None:
        super().__init__()
        self.options = options or UniformOptions()

    def select(self, iteration: int, batch_size: int) -> list[str]:
        return self._ids(self._select_positions(batch_size))

    def _select_positions(self, batch_size: int) -> np.ndarray:
        self._require_setup()
        candidates = self._selectable()
        count = self._batch_size(batch_size, candidates.size)
        return self._uniform_from(candidates, count)

def create_uniform(options: UniformOptions, **_: object) -> UniformSampler:
    return UniformSampler(options)
