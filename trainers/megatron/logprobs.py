"""Policy logprobs from vocabulary-parallel logits (each tensor-parallel rank holds a slice of the vocabulary).

The policy convention is :mod:`trainers.policy`'s: ``softmax(logits / T)`` with
suppressed ids at -inf, so the Megatron backend's logprobs equal the torch
backend's for equal weights. The log-sum-exp and the target logit are summed
over the tensor-parallel group; their backward is the identity (every rank
computes the same loss, as in Megatron's ``vocab_parallel_cross_entropy``).
"""

from __future__ import annotations

from typing import Any

import torch


class _SumOverGroup(torch.autograd.Function):
    """All-reduce (sum) in forward; identity in backward (the loss is replicated on every rank)."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: Any) -> torch.Tensor:  # type: ignore[override]
        import torch.distributed as dist

        out = tensor.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad, None


def _group_size(group: Any) -> int:
    import torch.distributed as dist

    return dist.get_world_size(group) if group is not None and dist.is_initialized() else 1


def vocab_parallel_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float,
    vocab_start: int,
    suppressed: torch.Tensor | None = None,
    group: Any = None,
) -> torch.Tensor:
    """``log pi(target)`` per row of ``logits`` (``[N, V_local]``, this rank's ids ``[vocab_start, +V_local)``).

    ``targets`` are global ids ``[N]``; ``suppressed`` is this rank's slice of the
    boolean suppression mask (``[V_local]``).
    """
    import torch.distributed as dist

    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    x = logits.float() / temperature
    if suppressed is not None:
        x = x.masked_fill(suppressed.to(x.device), float("-inf"))
    distributed = _group_size(group) > 1
    with torch.no_grad():
        row_max = x.max(dim=-1).values
        if distributed:
            dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
    shifted = x - row_max.unsqueeze(-1)
    sum_exp = shifted.exp().sum(dim=-1)
    local = targets.to(torch.long) - vocab_start
    mine = (local >= 0) & (local < x.shape[-1])
    picked = shifted.gather(-1, local.clamp(0, x.shape[-1] - 1).unsqueeze(-1)).squeeze(-1)
    picked = torch.where(mine, picked, torch.zeros_like(picked))
    if distributed:
        sum_exp = _SumOverGroup.apply(sum_exp, group)
        picked = _SumOverGroup.apply(picked, group)
    return picked - torch.log(sum_exp)


def suppression_slice(suppressed_ids: list[int], vocab_start: int, vocab_local: int, real_vocab: int,
                      device: Any = "cpu") -> torch.Tensor:
    """This rank's slice of the suppression mask; ids past the real vocabulary (Megatron's padding) are suppressed."""
    mask = torch.zeros(vocab_local, dtype=torch.bool, device=device)
    ids = torch.arange(vocab_start, vocab_start + vocab_local, device=device)
    mask |= ids >= real_vocab
    local = [i - vocab_start for i in suppressed_ids if vocab_start <= i < vocab_start + vocab_local]
    if local:
        mask[torch.tensor(local, dtype=torch.long, device=device)] = True
    return mask
