"""Model inputs from token ids + screenshots, and teacher-forced token logprobs.

Shared by trainer backends (logprobs with gradients) and in-process rollout
engines (generation inputs), so both see the same tensors for the same ids.
"""

from __future__ import annotations

from typing import Any, Sequence

from core.types import Screenshot
from plugins.qwen_vl.renderer import QwenVLRenderer

#: positions per lm_head chunk: bounds the (chunk x vocab) logits alive at once (151k vocab in real Qwen)
DEFAULT_CHUNK_SIZE = 1024


class InputError(ValueError):
    pass


def build_model_inputs(
    renderer: QwenVLRenderer,
    input_ids: Sequence[int] | Sequence[Sequence[int]],
    images: Sequence[Screenshot] | Sequence[Sequence[Screenshot]],
    *,
    device: Any = "cpu",
) -> dict[str, Any]:
    """Tensors for a Qwen-VL forward: ``input_ids``, ``attention_mask``, ``mm_token_type_ids`` and, with images,
    ``pixel_values`` + ``image_grid_thw``.

    ``input_ids`` hold *expanded* placeholders (one ``<|image_pad|>`` per visual
    token). A flat list is one sequence; a list of lists is a batch, right-padded
    with the tokenizer's pad id. ``images`` matches (a flat list for one sequence,
    one list per sequence for a batch), each in placeholder order.
    """
    import torch

    batch_ids, batch_images = _as_batch(input_ids, images)
    pad = renderer.pad_token_id
    width = max((len(ids) for ids in batch_ids), default=0)
    if width == 0:
        raise InputError("build_model_inputs: every sequence is empty")
    ids_t = torch.full((len(batch_ids), width), pad, dtype=torch.long)
    mask_t = torch.zeros((len(batch_ids), width), dtype=torch.long)
    for row, ids in enumerate(batch_ids):
        ids_t[row, : len(ids)] = torch.as_tensor(list(ids), dtype=torch.long)
        mask_t[row, : len(ids)] = 1
    # 1 marks image tokens: transformers 5 computes the M-RoPE positions from it.
    mm_types = ((ids_t == renderer.image_pad_id) & (mask_t == 1)).to(torch.int32)

    inputs: dict[str, Any] = {"input_ids": ids_t, "attention_mask": mask_t, "mm_token_type_ids": mm_types}
    inputs.update(_pixels(renderer, batch_ids, batch_images, int(mm_types.sum())))
    return {k: v.to(device) for k, v in inputs.items()}


def build_packed_inputs(
    renderer: QwenVLRenderer,
    input_ids: Sequence[Sequence[int]],
    images: Sequence[Sequence[Screenshot]],
    *,
    device: Any = "cpu",
) -> dict[str, Any]:
    """The sequences back to back in one row, no padding: ``input_ids`` and ``mm_token_type_ids`` of shape
    ``[1, sum of lengths]``, the images as :func:`build_model_inputs` gives them, and ``packed_lengths`` (one
    length per sequence). No ``attention_mask``: :func:`token_logprobs` turns the lengths into per-sequence
    M-RoPE positions whose text row restarts at 0 for each sequence, from which transformers builds a
    block-diagonal causal mask (sdpa, eager) or variable-length kernels (flash attention), so no token attends
    across sequences and each one's logprobs equal its own padded row's."""
    import torch

    batch_ids, batch_images = _as_batch(input_ids, images)
    lengths = [len(ids) for ids in batch_ids]
    if not lengths or min(lengths) == 0:
        raise InputError("build_packed_inputs: every sequence needs at least one token")
    ids_t = torch.as_tensor([token for ids in batch_ids for token in ids], dtype=torch.long)[None]
    mm_types = (ids_t == renderer.image_pad_id).to(torch.int32)
    inputs: dict[str, Any] = {"input_ids": ids_t, "mm_token_type_ids": mm_types,
                              "packed_lengths": torch.as_tensor(lengths, dtype=torch.long)}
    inputs.update(_pixels(renderer, batch_ids, batch_images, int(mm_types.sum())))
    return {k: v.to(device) for k, v in inputs.items()}


def _pixels(renderer: QwenVLRenderer, batch_ids: list[Sequence[int]], batch_images: list[Sequence[Screenshot]],
            placeholders: int) -> dict[str, Any]:
    flat_images = [img for imgs in batch_images for img in imgs]
    if not flat_images:
        if placeholders:
            raise InputError(f"input ids hold {placeholders} image placeholders but no images were given")
        return {}
    pixel_values, grid_thw = renderer.image_processor.process(flat_images)
    merge = renderer.image_processor.settings.merge_size
    per_image = (grid_thw.prod(dim=-1) // merge**2).tolist()
    _check_placeholders(renderer, batch_ids, batch_images, per_image)
    return {"pixel_values": pixel_values, "image_grid_thw": grid_thw}


def packed_position_ids(body: Any, inputs: dict[str, Any], lengths: Any) -> Any:
    """``[4, 1, L]`` positions of a packed row (see :func:`build_packed_inputs`): row 0 the text positions,
    restarting at 0 for each sequence (what transformers reads sequence boundaries from), rows 1-3 each
    sequence's own M-RoPE positions as ``body.get_rope_index`` gives them for that sequence alone."""
    import torch

    ids, types = inputs["input_ids"][0], inputs["mm_token_type_ids"][0]
    grid = inputs.get("image_grid_thw")
    pieces, start, image = [], 0, 0
    for n in lengths.tolist():
        seg_ids, seg_types = ids[start : start + n], types[start : start + n]
        runs = int(seg_types[0] == 1) + int(((seg_types[1:] == 1) & (seg_types[:-1] == 0)).sum())
        rope, _ = body.get_rope_index(
            seg_ids[None], mm_token_type_ids=seg_types[None],
            image_grid_thw=grid[image : image + runs] if runs else None,
            attention_mask=torch.ones_like(seg_ids)[None],
        )
        text = torch.arange(n, device=ids.device, dtype=rope.dtype).view(1, 1, n)
        pieces.append(torch.cat([text, rope.to(ids.device)]))
        start, image = start + n, image + runs
    return torch.cat(pieces, dim=-1)


def _as_batch(input_ids: Any, images: Any) -> tuple[list[Sequence[int]], list[Sequence[Screenshot]]]:
    if len(input_ids) and isinstance(input_ids[0], int):
        if images and not isinstance(images[0], Screenshot):
            raise InputError("a single sequence of ids takes a flat list of Screenshot objects")
        return [input_ids], [list(images)]
    if len(images) != len(input_ids):
        raise InputError(f"{len(input_ids)} sequences but {len(images)} image lists: give one list per sequence")
    return list(input_ids), [list(i) for i in images]


def _check_placeholders(
    renderer: QwenVLRenderer,
    batch_ids: list[Sequence[int]],
    batch_images: list[Sequence[Screenshot]],
    per_image: list[int],
) -> None:
    """Each run of pads must match its image's visual-token count, or the model silently misplaces features."""
    index = 0
    for row, (ids, imgs) in enumerate(zip(batch_ids, batch_images)):
        runs = [length for _, length in renderer.image_pad_runs(ids)]
        expected = per_image[index : index + len(imgs)]
        index += len(imgs)
        if runs != expected:
            raise InputError(
                f"sequence {row}: image placeholder runs {runs} do not match the {len(imgs)} images' visual-token "
                f"counts {expected}; render prompts with the same image processor settings (min/max pixels)"
            )


def token_logprobs(
    model: Any,
    inputs: dict[str, Any],
    *,
    temperature: float = 1.0,
    suppress_ids: Sequence[int] = (),
    positions: Any = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    with_entropy: bool = False,
) -> Any:
    """Teacher-forced ``logprob[b, t] = log p(ids[b, t] | ids[b, <t])``; 0 at ``t = 0`` and where not computed.

    ``temperature`` and ``suppress_ids`` reproduce the rollout's sampling
    distribution (logits / temperature, suppressed tokens at -inf) so the result
    is comparable with rollout logprobs. ``positions`` (bool [B, L]) limits the
    work to those target positions (e.g. the loss mask); the language-model head
    and log-softmax run in chunks of ``chunk_size`` positions, under activation
    checkpointing when gradients are on, so full (L x vocab) logits never exist.
    ``with_entropy``: also the policy's entropy at each computed position (same layout, no gradient), returned
    as ``(logprobs, entropy)``: what a collapse shows first.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for logprobs, got {temperature}")
    ids = inputs["input_ids"]
    lengths = inputs.pop("packed_lengths", None)
    if lengths is not None:  # one packed row: a sequence's first token is never predicted from the one before
        inputs["position_ids"] = packed_position_ids(model.model, inputs, lengths)
        valid = torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
        valid[0, torch.cumsum(lengths, 0)[:-1].to(ids.device)] = False
    else:
        valid = inputs["attention_mask"].bool()
    body = model.model(**inputs, use_cache=False)
    hidden = body.last_hidden_state  # [B, L, H]
    lm_head = model.get_output_embeddings()

    # Hidden state at t-1 predicts token t.
    targets = ids[:, 1:]
    wanted = valid[:, 1:]
    if positions is not None:
        wanted = wanted & positions.to(wanted.device)[:, 1:].bool()
    rows, cols = wanted.nonzero(as_tuple=True)
    source = hidden[:, :-1][rows, cols]  # [N, H]
    picked_targets = targets[rows, cols]
    suppress = torch.as_tensor(list(suppress_ids), dtype=torch.long, device=ids.device)

    def chunk_logprobs(h: Any, t: Any) -> Any:
        logits = lm_head(h).float() / temperature
        if suppress.numel():
            logits = logits.index_fill(-1, suppress, float("-inf"))
        return torch.log_softmax(logits, dim=-1).gather(-1, t.unsqueeze(-1)).squeeze(-1)

    @torch.no_grad()
    def chunk_entropy(h: Any) -> Any:
        logits = lm_head(h.detach()).float() / temperature
        if suppress.numel():
            logits = logits.index_fill(-1, suppress, float("-inf"))
        logp = torch.log_softmax(logits, dim=-1)
        return -(logp.exp() * torch.nan_to_num(logp, neginf=0.0)).sum(-1)

    pieces, entropies = [], []
    for start in range(0, source.shape[0], chunk_size):
        h, t = source[start : start + chunk_size], picked_targets[start : start + chunk_size]
        if torch.is_grad_enabled() and h.requires_grad:
            pieces.append(checkpoint(chunk_logprobs, h, t, use_reentrant=False))
        else:
            pieces.append(chunk_logprobs(h, t))
        if with_entropy:
            entropies.append(chunk_entropy(h))
    empty = hidden.new_zeros((0,), dtype=torch.float32)
    out = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    logprobs = out.index_put((rows, cols + 1), torch.cat(pieces) if pieces else empty)
    if not with_entropy:
        return logprobs
    entropy = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    return logprobs, entropy.index_put((rows, cols + 1), torch.cat(entropies) if entropies else empty)


def suppressed_token_ids(renderer: QwenVLRenderer) -> list[int]:
    """Ids a rollout must never sample (vision placeholders, ``<|im_start|>``, grounding tokens)."""
    return list(renderer.suppress_ids)
