"""``simulated`` rollout engine: a SIMULATION of a policy, for pipeline and throughput benchmarks.

No model generates here. Each turn answers ``done`` with probability ``done_probability`` (else ``wait``),
decided by the request's seed, so an episode lasts a geometric number of turns (as real episodes vary in
length) and the same seeds give the same episodes. A generation takes a configured latency (inference time
on a real engine). Token ids are the model family's real encoding of the tool-call text, so segments and
the trainer's step are real; the logprobs are 0 (not a model's), so training on these episodes measures the
pipeline's timing and bookkeeping, never learning. Weight sync is a real session (versions, buckets
counted), the weights are dropped.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.interfaces import Generation, GenerationRequest, PolicyModel, RolloutEngine
from core.weight_sync import WeightSession

RESPONSES = {
    "wait": '<tool_call>\n{"name": "computer_use", "arguments": {"action": "wait", "duration": 0.1}}\n</tool_call>',
    "done": '<tool_call>\n{"name": "computer_use", "arguments": {"action": "done"}}\n</tool_call>',
}


class SimulatedPolicyOptions(BaseModel):
    """Options of the ``simulated`` rollout engine (a simulation: see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    done_probability: float = Field(0.2, gt=0, le=1, description="chance that a turn ends the episode with done")
    latency_s: tuple[float, float] = Field((0.0, 0.0), description="[min, max] seconds one generation takes")
    seed: int = Field(0, description="seeds latencies (decisions follow each request's seed)")

    @model_validator(mode="after")
    def _check(self) -> SimulatedPolicyOptions:
        low, high = self.latency_s
        if not 0 <= low <= high:
            raise ValueError(f"latency_s must be [min, max] with 0 <= min <= max, got [{low}, {high}]")
        return self


class SimulatedPolicy(RolloutEngine):
    """See the module docstring: a seeded coin per turn, real token ids, no model."""

    def __init__(self, options: SimulatedPolicyOptions, *, model: PolicyModel) -> None:
        self.options = options
        renderer = model.renderer()
        self._ids = {k: [*renderer.encode_text(text), renderer.stop_ids[0]] for k, text in RESPONSES.items()}
        self._latency = random.Random(options.seed)
        self._session = WeightSession("simulated engine")
        self.buckets_received = 0

    async def generate(self, request: GenerationRequest) -> Generation:
        draw = random.Random(request.seed).random() if request.seed is not None else self._latency.random()
        kind = "done" if draw < self.options.done_probability else "wait"
        low, high = self.options.latency_s
        if high > 0:
            await asyncio.sleep(self._latency.uniform(low, high))
        ids = self._ids[kind][: request.max_new_tokens]
        return Generation(ids=list(ids), logprobs=[0.0] * len(ids), text=RESPONSES[kind], finish_reason="stop",
                          weight_version=self._session.version)

    @property
    def weight_version(self) -> int | None:
        return self._session.version

    def begin_weight_update(self, version: int) -> None:
        self._session.begin(version)

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        self._session.bucket()
        self.buckets_received += 1

    def commit_weight_update(self) -> None:
        self._session.commit()

    def abort_weight_update(self) -> None:
        self._session.abort()


def create_simulated_engine(options: SimulatedPolicyOptions, *, model: PolicyModel, **_: Any) -> SimulatedPolicy:
    """Factory of the ``simulated`` rollout engine (context: model)."""
    return SimulatedPolicy(options, model=model)
