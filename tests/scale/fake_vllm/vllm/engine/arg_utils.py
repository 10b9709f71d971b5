from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AsyncEngineArgs:
    model: str
    tokenizer: str | None = None
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int = 256
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    logprobs_mode: str = "raw_logprobs"
    seed: int = 0
    limit_mm_per_prompt: dict[str, int] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] | None = None
    weight_transfer_config: dict[str, Any] | None = None
