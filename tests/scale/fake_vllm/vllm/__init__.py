"""Stand-in for vLLM's in-process API on machines without vLLM and a GPU (tests/scale/test_vllm_engine.py uses the
real vLLM where it runs): the real request/response types' fields, and an ``AsyncLLM`` that samples on its own
(its own forward pass, logit bias, temperature, top-k/top-p, seeded draws, processed or raw logprobs) so the
engine under test can disagree with the trainer. Only what :mod:`plugins.rollout.vllm_engine` touches exists."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__version__ = "0.0-test-double"


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    seed: int | None = None
    logprobs: int | None = None
    logit_bias: dict[int, float] | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True


def TokensPrompt(**fields: Any) -> dict[str, Any]:  # a TypedDict in vLLM
    unknown = set(fields) - {"prompt_token_ids", "multi_modal_data", "mm_processor_kwargs", "cache_salt"}
    if unknown:
        raise TypeError(f"TokensPrompt got unknown fields {unknown}")
    return dict(fields)
