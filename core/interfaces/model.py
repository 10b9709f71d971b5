"""Model family contracts: chat rendering (shared by segmenters and rollout engines) and the policy model."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.types import Screenshot


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

    def packed_model_inputs(self, input_ids: Sequence[Sequence[int]], images: Sequence[Sequence[Screenshot]], *,
                            device: Any = "cpu") -> dict[str, Any]:
        """Like :meth:`model_inputs`, but the sequences back to back in one row (no padding), each attending
        only to itself with its own positions; :meth:`token_logprobs` takes them and returns ``[1, sum of
        lengths]``, each sequence's first token 0. Optional: trainers pack only for families that implement it."""
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"model family {type(self).__name__} cannot pack sequences into one row; set the "
                            "trainer's packing: false or implement PolicyModel.packed_model_inputs")

    def token_logprobs(self, module: Any, inputs: Mapping[str, Any], *, temperature: float,
                       suppress_ids: Sequence[int] = (), positions: Any = None,
                       chunk_size: int | None = None, with_entropy: bool = False) -> Any:
        """Teacher-forced log-probabilities ``[B, L]`` of ``inputs["input_ids"]`` under ``module`` (one of
        :meth:`load`'s), at the rollout's sampling distribution (logits / temperature, ``suppress_ids`` at
        -inf); 0 at position 0 and outside ``positions`` (bool ``[B, L]``) when given. ``with_entropy``: a pair
        ``(logprobs, entropy)``, the second the same distribution's entropy per position (no gradient), which
        trainers report per step (``actor/entropy``)."""
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


