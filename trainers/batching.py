"""Micro-batches of segments under a padded-token budget (gradient accumulation over them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import structlog

from core.types import Segment

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class MicroBatch:
    """Indices into the step's segment list, and the padded size they occupy."""

    indices: tuple[int, ...]
    max_len: int

    @property
    def padded_tokens(self) -> int:
        return self.max_len * len(self.indices)


def plan_micro_batches(
    segments: Sequence[Segment], token_budget: int, *, max_items: int | None = None, max_padding: float = 0.25
) -> list[MicroBatch]:
    """Group segments so each micro-batch's padded size (rows x longest row) stays within ``token_budget``.

    Longest first, so similar lengths share a batch; a batch is also closed when
    adding a row would make more than ``max_padding`` of its padded size padding
    (padding costs as much compute as real tokens). The order is deterministic
    for a given input. A segment longer than the budget gets a micro-batch of its
    own (logged: raise the budget or shorten segments).
    """
    if token_budget < 1:
        raise ValueError(f"token budget must be >= 1, got {token_budget}")
    if max_items is not None and max_items < 1:
        raise ValueError(f"max_items must be >= 1, got {max_items}")
    if not 0 <= max_padding < 1:
        raise ValueError(f"max_padding must be a fraction in [0, 1), got {max_padding}")
    order = sorted(range(len(segments)), key=lambda i: (-segments[i].num_tokens, i))
    batches: list[MicroBatch] = []
    current: list[int] = []
    current_max = 0
    current_tokens = 0
    for i in order:
        n = segments[i].num_tokens
        if n > token_budget:
            log.warning("segment exceeds the micro-batch token budget; it gets a micro-batch of its own",
                        segment=f"{segments[i].trajectory_id}#{segments[i].index}", tokens=n, budget=token_budget)
        if current:
            padded = max(current_max, n) * (len(current) + 1)
            full = padded > token_budget or (max_items is not None and len(current) >= max_items)
            wasteful = (padded - current_tokens - n) > max_padding * padded
            if full or wasteful:
                batches.append(MicroBatch(tuple(current), current_max))
                current, current_max, current_tokens = [], 0, 0
        current.append(i)
        current_max = max(current_max, n)
        current_tokens += n
    if current:
        batches.append(MicroBatch(tuple(current), current_max))
    return batches


def micro_batch_tensors(policy: Any, segments: Sequence[Segment], device: Any) -> tuple[dict[str, Any], Any, Any, Any]:
    """The model inputs of one micro-batch (right-padded rows, pixel values, positions) and, per token, the loss
    mask, the rollout logprobs and the advantage (each segment's, shared by all its tokens), all on ``device``.
    Position 0 is never predicted, so its mask is 0."""
    import torch

    inputs = policy.model_inputs([s.input_ids for s in segments], [list(s.images) for s in segments], device=device)
    width = inputs["input_ids"].shape[1]
    mask = torch.zeros((len(segments), width), dtype=torch.float32)
    rollout = torch.zeros((len(segments), width), dtype=torch.float32)
    for row, seg in enumerate(segments):
        mask[row, : seg.num_tokens] = torch.as_tensor(seg.loss_mask, dtype=torch.float32)
        rollout[row, : seg.num_tokens] = torch.as_tensor(seg.rollout_logprobs, dtype=torch.float32)
    mask[:, 0] = 0.0
    adv = torch.tensor([s.advantage for s in segments], dtype=torch.float32)[:, None].expand(-1, width)
    return inputs, mask.to(device), rollout.to(device), adv.to(device)
