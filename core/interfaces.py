"""The contracts each component kind implements.

A factory registered for a kind is called as ``factory(options, **context)``
where ``options`` is the component's validated pydantic options model. It
returns an object implementing the matching base class below. Which base class
and which keyword context each kind gets is one table, :mod:`core.kinds`; the
core checks both when it creates a component.

I/O-bound kinds (environments, rollout engines, judge executors, synthesizer
roles) are asyncio-native so one process can drive hundreds of desktops;
compute-bound kinds (samplers, segmenters, trainers) are synchronous.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Mapping, Sequence

from core.types import Action, Judgement, Observation, Screenshot, Segment, Task

# ---------------------------------------------------------------------------
# Model family: chat rendering (shared by segmenters and rollout engines)
# ---------------------------------------------------------------------------


@dataclass
class Message:
    """One chat message; ``content`` interleaves text and screenshots."""

    role: str  # system | user | assistant
    content: list[str | Screenshot]


@dataclass
class RenderedPrompt:
    """Token ids of a rendered conversation with image placeholders *expanded*."""

    ids: list[int]
    images: list[Screenshot]


class ChatRenderer(abc.ABC):
    """Turns messages into token ids exactly as the model's chat template does."""

    image_pad_id: int
    #: ids that end an assistant turn (e.g. ``<|im_end|>``)
    stop_ids: tuple[int, ...]
    #: special ids the policy must never emit (image placeholders, vision markers, ...); never a stop id
    suppress_ids: tuple[int, ...] = ()
    #: how many ids the tokenizer decodes (None: unknown); model rows past it are padding, never sampled
    tokenizer_size: int | None = None

    @abc.abstractmethod
    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> RenderedPrompt: ...

    @abc.abstractmethod
    def image_tokens(self, screenshot: Screenshot) -> int:
        """How many placeholder tokens the screenshot expands to."""

    @abc.abstractmethod
    def encode_text(self, text: str) -> list[int]: ...

    @abc.abstractmethod
    def decode(self, ids: Sequence[int]) -> str: ...

    def collapse_image_pads(self, ids: Sequence[int]) -> list[int]:
        """One placeholder per image, for engines (vLLM) that re-expand placeholders themselves."""
        out: list[int] = []
        previous_pad = False
        for token in ids:
            is_pad = token == self.image_pad_id
            if not (is_pad and previous_pad):
                out.append(token)
            previous_pad = is_pad
        return out


class PolicyModel(abc.ABC):
    """A model family plus one concrete model (a local directory or a config to build from).

    Trainer backends and rollout engines both receive it, so they load the same
    architecture and tokenizer; segmenters receive its renderer.
    """

    @abc.abstractmethod
    def renderer(self) -> ChatRenderer: ...

    @abc.abstractmethod
    def load(self, *, dtype: str = "float32", device: str = "cpu") -> Any:
        """A Hugging Face model (``torch.nn.Module``) with the configured weights."""

    def vision_parameter_prefixes(self) -> tuple[str, ...]:
        """Parameter-name prefixes of the vision tower (frozen during RL)."""
        return ("model.visual.", "visual.")

    def vocab_size(self) -> int:
        """Rows of the language-model head: every id a forward pass scores, padding rows included."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"model family {type(self).__name__} does not say its vocabulary size; trainers and "
                            "engines need PolicyModel.vocab_size")

    def suppressed_ids(self) -> list[int]:
        """Ids outside the policy's support, the same for every trainer and engine: the renderer's
        ``suppress_ids`` plus the head's padding rows past the tokenizer (real Qwen checkpoints have 151936
        rows for ~151665 tokens; those ids cannot be decoded)."""
        renderer = self.renderer()
        vocab = self.vocab_size()
        ids = set(renderer.suppress_ids)
        if renderer.tokenizer_size is not None:
            ids.update(range(renderer.tokenizer_size, vocab))
        stops = set(renderer.stop_ids) & ids
        if stops:
            raise ValueError(f"stop ids {sorted(stops)} are also suppressed; a rollout could never end its turn")
        return sorted(i for i in ids if 0 <= i < vocab)

    def hf_config(self) -> Any:
        """The Hugging Face (transformers) config of the model, for trainers that build the architecture
        themselves (Megatron-Bridge)."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"model family {type(self).__name__} has no Hugging Face config; implement "
                            "PolicyModel.hf_config")

    def model_inputs(self, input_ids: Sequence[Sequence[int]], images: Sequence[Sequence[Screenshot]], *,
                     device: Any = "cpu") -> dict[str, Any]:
        """Keyword inputs of :meth:`load`'s module for a batch of token-id rows (right-padded) and their
        screenshots, with ``input_ids`` and ``attention_mask`` among them: what trainers feed forward."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"model family {type(self).__name__} does not build model inputs; trainers need "
                            "PolicyModel.model_inputs")

    def token_logprobs(self, module: Any, inputs: Mapping[str, Any], *, temperature: float,
                       suppress_ids: Sequence[int] = (), positions: Any = None,
                       chunk_size: int | None = None) -> Any:
        """Teacher-forced log-probabilities ``[B, L]`` of ``inputs["input_ids"]`` under ``module`` (one of
        :meth:`load`'s), at the rollout's sampling distribution (logits / temperature, ``suppress_ids`` at
        -inf); 0 at position 0 and outside ``positions`` (bool ``[B, L]``) when given."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"model family {type(self).__name__} does not compute token logprobs; trainers need "
                            "PolicyModel.token_logprobs")

    def model_directory(self, *, dtype: str = "float32") -> Path:
        """A Hugging Face directory (config, weights, tokenizer, processor) of this model, for engines and
        trainers that load from disk (vLLM, Megatron-Bridge): the model's own, or a freshly written one."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"model family {type(self).__name__} cannot provide a model directory; give it a local "
                            "path (model.options.path) or implement PolicyModel.model_directory")

    def describe(self) -> dict[str, Any]:
        return {}


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


@dataclass
class Generation:
    """Sampled ids (including the stop token when one was hit) and their logprobs."""

    ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # stop | length
    #: the engine's weight version it was sampled with (None: the weights it was built with)
    weight_version: int | None = None


class RolloutEngine(abc.ABC):
    """Generates from token ids; receives new weights from the trainer in weight-sync sessions.

    A session (driven by :func:`core.weight_sync.sync_weights`): ``begin_weight_update(version)`` ->
    ``update_weights(bucket)`` per bucket -> ``commit_weight_update()``, or ``abort_weight_update()`` on
    failure. Generations started after the commit use the new weights and report its version; versions only
    increase. :class:`core.weight_sync.WeightSession` keeps the bookkeeping.
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


# ---------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------


class Environment(abc.ABC):
    """One live desktop reachable through the interaction probe protocol."""

    env_id: str
    screen_size: tuple[int, int]
    #: True when the desktop is sandboxed (container/VM): generated getters may run inside it.
    isolated: bool
    #: host path of the desktop user's home when the desktop shares this host, else None.
    home_dir: Path | None
    #: the probe client (:class:`environments.client.EnvironmentClient`)
    client: Any

    @abc.abstractmethod
    async def reset(self, task: Task) -> Observation:
        """Restore a clean state, run the task's setup steps, return the first observation."""

    @abc.abstractmethod
    async def step(self, action: Action) -> Observation:
        """Execute one action and return the observation after it."""

    @abc.abstractmethod
    async def observe(self) -> Observation: ...

    async def healthy(self) -> bool:
        return True


class EnvironmentBackend(abc.ABC):
    """A pool of environments of one kind; episodes acquire and release them."""

    @abc.abstractmethod
    async def acquire(self) -> Environment: ...

    @abc.abstractmethod
    async def release(self, env: Environment, *, discard: bool = False) -> None:
        """Return ``env``; ``discard`` when it misbehaved (it is replaced, never reused)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop every process/container this backend started."""

    # -- the agent protocol of this kind of environment -------------------------

    @abc.abstractmethod
    def system_prompt(self, task: Task) -> str:
        """The system prompt for an episode of ``task``: role, action space and output format."""

    @abc.abstractmethod
    def parse_response(self, text: str) -> list[Action]:
        """Actions in a model response; raise :class:`core.errors.ActionParseError` when unparsable."""

    def format_response(self, actions: Sequence[Action]) -> str:
        """A response in this backend's action format that :meth:`parse_response` reads back as ``actions``.

        Demonstrations (recorded oracles) are written with it. A backend whose action format cannot be
        written raises :class:`core.errors.ScaleCUAError` naming a format that can.
        """
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"environment backend {type(self).__name__} cannot write responses in its action "
                            "format, so it cannot record demonstrations; implement format_response()")

    @abc.abstractmethod
    async def evaluate(
        self,
        env: Environment,
        task: Task,
        *,
        executor: JudgeExecutor | None,
        getters: Any,
        metrics: Any,
        last_action: Action | None,
    ) -> Judgement:
        """Score ``env``'s final state for ``task``; never raises for a judge failure.

        ``getters`` / ``metrics`` are the getter and metric registries; generated
        code in ``task.evaluator.code`` runs through ``executor``.
        """

    def convert_task(self, raw: Mapping[str, Any]) -> Task:
        """Turn a task file's JSON into a :class:`Task` (OSWorld format by default)."""
        return Task.model_validate(raw)

    async def __aenter__(self) -> EnvironmentBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# ---------------------------------------------------------------------------
# Judges
# ---------------------------------------------------------------------------


@dataclass
class JudgeCall:
    """Outcome of running one piece of judge code. ``status`` uses JudgementStatus values."""

    status: str
    value: Any = None
    error: str | None = None
    duration_s: float = 0.0


class JudgeExecutor(abc.ABC):
    """Runs untrusted (generated) judge code: metrics on the host, getters where the env allows."""

    @abc.abstractmethod
    async def run_metric(
        self, code: str, function: str, result: Any, expected: Any, options: Mapping[str, Any]
    ) -> JudgeCall:
        """Call ``function(result, expected, **options)`` defined in ``code``; value is the score."""

    @abc.abstractmethod
    async def run_getter(self, code: str, function: str, env: Environment, config: Mapping[str, Any]) -> JudgeCall:
        """Call ``function(config)`` defined in ``code`` against ``env``'s state; value is the artifact."""

    async def close(self) -> None:
        return None


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
    def train_step(self, segments: Sequence[Segment]) -> dict[str, float]:
        """One optimizer step over all segments (micro-batched inside); returns metrics."""

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

    def load_weights(self, path: Path) -> None:
        """Start from the model weights that :meth:`save` wrote to ``path`` (a warm start's checkpoint); the
        optimizer and step counter stay fresh, and a reference model (KL term) becomes these weights."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"trainer backend {type(self).__name__} cannot start from another run's weights "
                            "(run.init_from); implement load_weights()")

    def close(self) -> None:
        return None


# ---------------------------------------------------------------------------
# Task synthesis
# ---------------------------------------------------------------------------


class SynthesizerRole(abc.ABC):
    """An LLM agent with one job in VeriGen (proposer, judger, checker or fixer)."""

    role: ClassVar[str]


class SynthesisPipeline(abc.ABC):
    """The task-synthesis loop (VeriGen's): drives the configured roles over desktops and a task store."""

    @abc.abstractmethod
    async def run(self, progress: Any = None) -> dict[str, Any]:
        """Synthesize until the budget is spent; return the run's summary (counts, exported paths, usage)."""

    async def close(self) -> None:
        return None
