"""Variable-length attention for packed rows on any device: sdpa run per packed sequence.

A packed row (see :func:`plugins.qwen_vl.forward.build_packed_inputs`) holds several sequences back to back
with text positions restarting at 0 for each. transformers then builds a block-diagonal causal mask, and plain
sdpa attends over the whole row under it: the row's length squared, however short its sequences. Flash
attention's varlen kernels cost each sequence's own length squared instead, but exist on GPUs only. This
implementation gets the same cost anywhere: on a packed row (one row, no cache, more than one sequence) it runs
sdpa causally on each sequence's slice and concatenates; on every other call (padded batches, generation with a
cache, the vision tower) it is transformers' sdpa, call for call.
"""

from __future__ import annotations

from typing import Any

NAME = "scalecua_varlen_sdpa"


def varlen_sdpa_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                          **kwargs: Any) -> tuple[Any, None]:
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    starts = _packed_starts(query, key, kwargs.get("position_ids"))
    if starts is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    # causal within each sequence: what transformers' block-diagonal mask would say (varlen_sdpa_mask skips it)
    rest = {k: v for k, v in kwargs.items() if k not in ("position_ids", "is_causal")}
    bounds = [*starts, query.shape[2]]
    pieces = [
        sdpa_attention_forward(module, query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], None, is_causal=True,
                               **rest)[0]
        for a, b in zip(bounds, bounds[1:])
    ]
    return torch.cat(pieces, dim=1), None


def _packed_starts(query: Any, key: Any, position_ids: Any) -> list[int] | None:
    """Where each packed sequence starts, or None when this call is not over a packed row."""
    if position_ids is None or query.shape[0] != 1 or query.shape[2] != key.shape[2] or query.shape[2] < 2:
        return None
    text = position_ids.reshape(-1, position_ids.shape[-1])[0]
    if text.shape[0] != query.shape[2]:
        return None
    starts = (text == 0).nonzero().flatten().tolist()
    if len(starts) < 2 or starts[0] != 0:
        return None
    return [int(s) for s in starts]


def varlen_sdpa_mask(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0, kv_offset: int = 0,
                     attention_mask: Any = None, **kwargs: Any) -> Any:
    """sdpa's mask, except for one unpadded row without a cache: None there, because the attention is causal
    within each sequence by itself (a packed row's block-diagonal mask would be its length squared in memory,
    built element by element). Only for causal language models (no sliding window, no bidirectional spans)."""
    from transformers.masking_utils import sdpa_mask

    if attention_mask is None and batch_size == 1 and q_length == kv_length and q_offset == 0 and kv_offset == 0:
        return None
    return sdpa_mask(batch_size, q_length, kv_length, q_offset, kv_offset, attention_mask=attention_mask, **kwargs)


def register() -> str:
    """Make :data:`NAME` an attention implementation; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, varlen_sdpa_attention)
    AttentionMaskInterface.register(NAME, varlen_sdpa_mask)
    return NAME


def use_varlen_sdpa(model: Any) -> None:
    """Switch a loaded model's language model from sdpa to :data:`NAME` (other implementations are kept: eager
    stays eager, flash attention has varlen kernels of its own)."""
    text = getattr(model.config, "text_config", model.config)
    if text._attn_implementation == "sdpa":
        text._attn_implementation = register()
