"""Options of the ``torch`` trainer backend (also the base of ``torch-fsdp``'s)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class TorchTrainerOptions(BaseModel):
    """Options of the ``torch`` trainer backend. The optimizer defaults follow the paper (Table 10)."""

    model_config = ConfigDict(extra="forbid")

    device: str = Field("auto", description="cpu, cuda, cuda:N, or auto (the first GPU if there is one)")
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="compute precision; bfloat16 autocasts the forward while AdamW keeps fp32 weights"
    )
    lr: float = Field(3e-6, gt=0, description="AdamW learning rate (paper: 3e-6)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (paper: none)")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    adam_eps: float = Field(1e-8, gt=0, description="AdamW epsilon")
    max_grad_norm: float | None = Field(1.0, gt=0, description="clip the global gradient norm; null: no clipping")
    micro_batch_tokens: int = Field(
        16384, ge=1, description="padded tokens per micro-batch (rows x longest row); gradients accumulate over them"
    )
    max_micro_batch_items: int | None = Field(None, ge=1, description="at most this many segments per micro-batch")
    packing: Literal["auto", "on", "off"] = Field(
        "auto", description="pack a micro-batch's segments back to back into one row of at most micro_batch_tokens "
        "(no padding; each segment attends only to itself, with its own positions): on, off (right-padded rows), "
        "or auto (on when the model family can pack: PolicyModel.packed_model_inputs)"
    )
    max_padding: float = Field(
        0.25, ge=0, lt=1, description="close a micro-batch before padding exceeds this share of its padded tokens"
    )
    logprob_chunk_size: int = Field(1024, ge=1, description="positions per language-model-head chunk")
    gradient_checkpointing: bool = Field(False, description="recompute decoder activations in backward (long contexts)")
    warmup_steps: int = Field(0, ge=0, description="linear learning-rate warm-up over this many optimizer steps")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="after the warm-up: constant, or a linear / cosine decay to min_lr_ratio * lr "
        "reached at decay_steps optimizer steps (and held after)"
    )
    decay_steps: int | None = Field(
        None, ge=1, description="optimizer steps (warm-up included) over which lr_schedule decays; required with "
        "linear and cosine (RL: iterations x ppo_mini_batches x ppo_epochs)"
    )
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="the decayed schedule's floor, as a share of lr")
    init_optimizer: bool = Field(
        False, description="with run.init_from, also restore the AdamW second moments and step count saved with "
        "those weights (a fresh AdamW's first steps move every parameter by about lr whatever its gradient; the warm "
        "start's second moments keep an RL step proportional to its gradient); first moments start at zero"
    )
    vision_cache_mib: float = Field(
        4096, ge=0, description="device memory for the step's vision features: each distinct screenshot is encoded "
        "once per step and reused by every segment, micro-batch and pass; 0: encode per micro-batch"
    )

    @model_validator(mode="after")
    def _schedule_has_length(self) -> "TorchTrainerOptions":
        if self.lr_schedule != "constant" and self.decay_steps is None:
            raise ValueError(f"lr_schedule {self.lr_schedule!r} decays over decay_steps optimizer steps: set "
                             "decay_steps (RL: iterations x ppo_mini_batches x ppo_epochs), or use constant")
        if self.decay_steps is not None and self.decay_steps <= self.warmup_steps:
            raise ValueError(f"decay_steps ({self.decay_steps}) must exceed warmup_steps ({self.warmup_steps})")
        return self


def learning_rate(options: TorchTrainerOptions, steps: int) -> float:
    """The rate of optimizer step ``steps + 1``: linear warm-up over ``warmup_steps``, then ``lr_schedule``."""
    lr, warmup = options.lr, options.warmup_steps
    if warmup and steps < warmup:
        return lr * (steps + 1) / warmup
    if options.lr_schedule == "constant" or options.decay_steps is None:
        return lr
    progress = min(1.0, (steps - warmup) / (options.decay_steps - warmup))
    floor = options.min_lr_ratio
    if options.lr_schedule == "linear":
        return lr * (1.0 - (1.0 - floor) * progress)
    return lr * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress)))
