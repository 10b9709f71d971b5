"""Which parameters train: the language model (the vision tower is frozen). Buckets: :mod:`core.weight_sync`."""

from __future__ import annotations

from typing import Sequence

import torch


def split_vision_parameters(
    model: torch.nn.Module, vision_prefixes: Sequence[str]
) -> tuple[list[tuple[str, torch.nn.Parameter]], list[tuple[str, torch.nn.Parameter]]]:
    """(language-model params, vision-tower params) by name prefix."""
    language, vision = [], []
    for name, param in model.named_parameters():
        (vision if name.startswith(tuple(vision_prefixes)) else language).append((name, param))
    return language, vision


def freeze_vision_tower(model: torch.nn.Module, vision_prefixes: Sequence[str]) -> list[tuple[str, torch.nn.Parameter]]:
    """Freeze the vision tower (as in the paper's RL stage); return the trainable language-model params."""
    language, vision = split_vision_parameters(model, vision_prefixes)
    if not vision:
        sample = ", ".join(name for name, _ in list(model.named_parameters())[:3])
        raise ValueError(
            f"no parameter starts with any vision prefix {list(vision_prefixes)} (first names: {sample}); the "
            "model family's vision_parameter_prefixes() must name its vision tower so it can be frozen"
        )
    for _, param in vision:
        param.requires_grad_(False)
    for _, param in language:
        param.requires_grad_(True)
    return language
