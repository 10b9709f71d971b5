"""Samplers, segmenters and trainer backends."""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from core.interfaces.model import ChatRenderer
from core.types import Observation, Screenshot, Segment, Task


# ---------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------


class Sampler(abc.ABC):
    """Chooses each iteration's tasks and learns from each iteration's outcomes."""

    #: rollouts per task for an initial pass-rate sweep before training (0: none wanted)
    initial_pass_rollouts: int = 0

    @abc.abstractmethod
    def setup(self, tasks: Sequence[Task], *, seed: int) -> None:
        """Called once with the full task pool before any selection."""

    @abc.abstractmethod
    def select(self, iteration: int, batch_size: int) -> list[str]:
        """Task ids for this iteration (distinct)."""

    @abc.abstractmethod
    def observe(self, iteration: int, outcomes: Mapping[str, Sequence[float]]) -> None:
        """Per task id, the success (1/0) of each of its rollouts this iteration."""

    def set_initial_pass_rates(self, pass_rates: Mapping[str, float]) -> None:
        """Receive the initial sweep's pass rates (only if ``initial_pass_rollouts`` > 0)."""

    def accept(self, task_id: str, rewards: Sequence[float]) -> bool:
        """Whether a finished group enters the training batch (DAPO drops uniform groups)."""
        return True

    def top_up(self, iteration: int, needed: int, exclude: Sequence[str]) -> list[str]:
        """More task ids when groups were dropped; [] when the sampler does not refill."""
        return []

    def weights(self) -> Mapping[str, float]:
        """Current sampling weight per task, for reports (empty when not meaningful)."""
        return {}

    def stats(self) -> Mapping[str, float]:
        """Scalar counters for the iteration metrics (logged as ``sampler/<key>``)."""
        return {}

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable state (RNG included) for checkpoints."""

    @abc.abstractmethod
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


# ---------------------------------------------------------------------------
# Segmenters
# ---------------------------------------------------------------------------


class EpisodeContext(abc.ABC):
    """The model context of one running episode, owned by a segmenter.

    The loop asks it for the next prompt, feeds it each sampled response and
    each new observation, and finally collects the training segments.
    """

    @abc.abstractmethod
    def prompt(self) -> tuple[list[int], list[Screenshot]]:
        """Token ids (placeholders expanded) and images the policy generates from next."""

    @abc.abstractmethod
    def add_response(self, ids: Sequence[int], logprobs: Sequence[float], text: str) -> None: ...

    @abc.abstractmethod
    def add_observation(self, observation: Observation, feedback: str | None = None) -> None: ...

    @abc.abstractmethod
    def finish(self) -> list[Segment]:
        """Segments of the episode (all carry its trajectory id)."""

    @property
    @abc.abstractmethod
    def num_tokens(self) -> int:
        """Current length of the context in tokens (for max-sequence-length checks)."""


class Segmenter(abc.ABC):
    @abc.abstractmethod
    def start(
        self,
        *,
        renderer: ChatRenderer,
        trajectory_id: str,
        task_id: str,
        system_prompt: str,
        instruction: str,
        observation: Observation,
    ) -> EpisodeContext: ...


# ---------------------------------------------------------------------------
# Trainers
# ---------------------------------------------------------------------------


#: training objectives every trainer backend implements (the ``objective`` context of a trainer factory):
#: ``grpo`` — the RL stage (segments carry advantages and rollout logprobs); ``cross_entropy`` — the warm
#: start on demonstrations (the policy's negative log-likelihood of the response tokens).
OBJECTIVES = ("grpo", "cross_entropy")


class TrainerBackend(abc.ABC):
    """Optimizes the policy on segments: with advantages already set (``grpo``), or demonstrations
    (``cross_entropy``)."""

    @abc.abstractmethod
    def train_step(self, segments: Sequence[Segment], kl_limit: float | None = None) -> dict[str, float]:
        """One optimizer step over all segments (micro-batched inside); returns metrics.

        ``kl_limit`` (the KL stop, ``algorithm.target_kl``): when the segments' approximate KL from the rollout
        policy to the current one (``actor/approx_kl``, measured in this step's own forward, before its update)
        exceeds it, the step's gradients are dropped and no update is made; the metrics then say
        ``actor/kl_stopped: 1``, and the caller takes no further step on this batch."""

    @abc.abstractmethod
    def eval_step(self, segments: Sequence[Segment]) -> dict[str, float]:
        """The objective's metrics on ``segments`` without an update (e.g. the warm start's held-out loss)."""

    @abc.abstractmethod
    def export_weights(self, bucket_bytes: int = 256 << 20) -> Iterator[list[tuple[str, Any]]]:
        """Language-model weights with Hugging Face names, in buckets, for the rollout engine."""

    @abc.abstractmethod
    def save(self, path: Path) -> None:
        """Model, optimizer and trainer RNG state into directory ``path``."""

    @abc.abstractmethod
    def load(self, path: Path) -> None: ...

    def recompute_logprobs(self, segments: Sequence[Segment], *, reference: bool = False) -> list[list[float]]:
        """Per token of each segment, its logprob under the current weights (``reference``: the reference
        model's), 0 where the loss mask is 0, with no update: the proximal policy of the decoupled objective
        (``algorithm.old_logprobs: recompute``)."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"trainer backend {type(self).__name__} cannot recompute logprobs, which "
                            "algorithm.old_logprobs: recompute (or tis_cap) needs; implement recompute_logprobs() "
                            "or set algorithm.old_logprobs: rollout")

    def load_weights(self, path: Path) -> None:
        """Start from the model weights that :meth:`save` wrote to ``path`` (a warm start's checkpoint); the
        optimizer and step counter stay fresh, and a reference model (KL term) becomes these weights."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"trainer backend {type(self).__name__} cannot start from another run's weights "
                            "(run.init_from); implement load_weights()")

    def close(self) -> None:
        return None


