"""Micro-batches of segments under a token budget (gradient accumulation over them): right-padded rows, or
(``packed``) one row holding several segments back to back, no padding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import structlog

from core.types import Segment

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class MicroBatch:
    """Indices into the step's segment list, and the padded size they occupy (``packed``: one row, ``max_len``
    is its length)."""

    indices: tuple[int, ...]
    max_len: int
    packed: bool = False

    @property
    def padded_tokens(self) -> int:
        return self.max_len if self.packed else self.max_len * len(self.indices)


def plan_packed_micro_batches(
    segments: Sequence[Segment], token_budget: int, *, max_items: int | None = None
) -> list[MicroBatch]:
    """Pack segments into rows of at most ``token_budget`` tokens, one row per micro-batch (first-fit
    decreasing: deterministic for a given input, rarely more rows than the tokens need). A segment longer than
    the budget gets a row of its own (logged)."""
    if token_budget < 1:
        raise ValueError(f"token budget must be >= 1, got {token_budget}")
    if max_items is not None and max_items < 1:
        raise ValueError(f"max_items must be >= 1, got {max_items}")
    rows: list[list[int]] = []
    used: list[int] = []
    for i in sorted(range(len(segments)), key=lambda i: (-segments[i].num_tokens, i)):
        n = segments[i].num_tokens
        if n > token_budget:
            log.warning("segment exceeds the micro-batch token budget; it gets a micro-batch of its own",
                        segment=f"{segments[i].trajectory_id}#{segments[i].index}", tokens=n, budget=token_budget)
        for row, members in enumerate(rows):
            if used[row] + n <= token_budget and (max_items is None or len(members) < max_items):
                members.append(i)
                used[row] += n
                break
        else:
            rows.append([i])
            used.append(n)
    return [MicroBatch(tuple(members), total, packed=True) for members, total in zip(rows, used)]


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


def micro_batch_tensors(policy: Any, segments: Sequence[Segment], device: Any, *,
                        packed: bool = False) -> tuple[dict[str, Any], Any, Any, Any]:
    """The model inputs of one micro-batch (right-padded rows, or one packed row; pixel values, positions) and,
    per token, the loss mask, the rollout logprobs and the advantage (each segment's, shared by all its tokens),
    all on ``device``. A segment's first token is never predicted, so its mask is 0."""
    import torch

    if packed:
        inputs = policy.packed_model_inputs([s.input_ids for s in segments], [list(s.images) for s in segments],
                                            device=device)
        mask = torch.cat([torch.as_tensor(s.loss_mask, dtype=torch.float32) for s in segments])
        starts = torch.cumsum(torch.as_tensor([0] + [s.num_tokens for s in segments[:-1]]), 0)
        mask[starts] = 0.0
        rollout = torch.cat([torch.as_tensor(s.rollout_logprobs, dtype=torch.float32) for s in segments])
        adv = torch.cat([torch.full((s.num_tokens,), float(s.advantage)) for s in segments])
        return inputs, mask[None].to(device), rollout[None].to(device), adv[None].to(device)
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


def proximal_tensor(segments: Sequence[Segment], rollout: Any, *, packed: bool = False) -> Any:
    """The segments' proximal logprobs laid out as :func:`micro_batch_tensors` lays out the rollout logprobs
    (``rollout``: that tensor), or None when the segments carry none (``algorithm.old_logprobs: rollout``)."""
    import torch

    present = [s.proximal_logprobs is not None for s in segments]
    if not any(present):
        return None
    if not all(present):
        raise ValueError("some segments of a micro-batch carry proximal logprobs and some do not: the loop sets "
                         "them for every segment of an iteration (algorithm.old_logprobs: recompute)")
    for s in segments:
        if len(s.proximal_logprobs) != s.num_tokens:  # type: ignore[arg-type]
            raise ValueError(f"segment {s.trajectory_id}#{s.index}: {len(s.proximal_logprobs)} proximal logprobs "  # type: ignore[arg-type]
                             f"for {s.num_tokens} tokens")
    if packed:
        flat = torch.cat([torch.as_tensor(s.proximal_logprobs, dtype=torch.float32) for s in segments])
        return flat[None].to(rollout.device)
    out = torch.zeros_like(rollout, device="cpu")
    for row, seg in enumerate(segments):
        out[row, : seg.num_tokens] = torch.as_tensor(seg.proximal_logprobs, dtype=torch.float32)
    return out.to(rollout.device)
