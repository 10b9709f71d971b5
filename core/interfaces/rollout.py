"""Rollout engine contract: generation requests and results, weight sync as a session."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Iterable

from core.errors import ScaleCUAError
from core.types import Screenshot


# ---------------------------------------------------------------------------
# Rollout engines (policy inference)
# ---------------------------------------------------------------------------


@dataclass
class GenerationRequest:
    """Sample one assistant response after ``prompt_ids`` (placeholders expanded)."""

    prompt_ids: list[int]
    images: list[Screenshot]
    max_new_tokens: int
    temperature: float = 0.8
    top_p: float = 1.0
    stop_ids: tuple[int, ...] = ()
    seed: int | None = None
    #: greedy decoding (evaluation): the most likely token at every step; ``logprobs`` stay those of
    #: ``softmax(logits / temperature)``, the distribution a sampled rollout would have drawn from
    greedy: bool = False


@dataclass
class Generation:
    """Sampled ids (including the stop token when one was hit) and their logprobs."""

    ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # stop | length
    #: the engine's weight version it was sampled with (None: the weights it was built with)
    weight_version: int | None = None


class EngineRestarted(ScaleCUAError):
    """The engine's server restarted and lost the weights it was given: push them again, then generate.

    Raised by ``generate`` of an engine in front of a server (``openai-compatible``) when a response comes
    from another server process than the one holding the pushed weights, and by every ``generate`` after that
    until a weight-sync session commits again. ``version``: the weight version the server lost. The run loop
    pushes the trainer's weights again (:class:`core.runtime.weights.EngineWeights`) and re-issues the request;
    nothing the restarted server generated before that is used.
    """

    def __init__(self, message: str, *, version: int | None) -> None:
        super().__init__(message)
        self.version = version


class RolloutEngine(abc.ABC):
    """Generates from token ids; receives new weights from the trainer in weight-sync sessions.

    A session (driven by :func:`core.weight_sync.sync_weights`): ``begin_weight_update(version)`` ->
    ``update_weights(bucket)`` per bucket -> ``commit_weight_update()``, or ``abort_weight_update()`` on
    failure. Generations started after the commit use the new weights and report its version; versions only
    increase. :class:`core.weight_sync.WeightSession` keeps the bookkeeping. An engine whose server can
    restart answers :attr:`weight_version` ``None`` once it knows the weights were lost, and raises
    :class:`EngineRestarted` from ``generate`` until they are pushed again.
    """

    @abc.abstractmethod
    async def generate(self, request: GenerationRequest) -> Generation: ...

    @property
    @abc.abstractmethod
    def weight_version(self) -> int | None:
        """The version generations sample with now (None: never synced)."""

    @abc.abstractmethod
    def begin_weight_update(self, version: int) -> None:
        """Open a session that will become ``version`` (above :attr:`weight_version`)."""

    @abc.abstractmethod
    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """One bucket of the open session: (name, tensor) pairs with Hugging Face parameter names."""

    @abc.abstractmethod
    def commit_weight_update(self) -> None:
        """Generations from now on use the session's weights; :attr:`weight_version` becomes its version."""

    @abc.abstractmethod
    def abort_weight_update(self) -> None:
        """End the open session without committing (after a failed bucket); a later session starts over."""

    async def close(self) -> None:
        return None


