"""Tiny real Qwen-VL parts for tests: BPE tokenizer trained in-process, PIL image processor, random weights."""

from __future__ import annotations

import io

from PIL import Image

from core.types import Screenshot
from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions, TinyModelSettings

FAMILIES = ("qwen3_vl", "qwen2_5_vl", "qwen2_vl")
#: small pixel bounds keep images at a handful of visual tokens
SMALL_PIXELS = {"min_pixels": 1024, "max_pixels": 128 * 128}


def screenshot(width: int, height: int, seed: int = 0) -> Screenshot:
    """A noisy PNG (noise keeps the vision tower's features distinct between images)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return Screenshot.from_png(buffer.getvalue())


def tiny_model(family: str = "qwen3_vl", **options) -> QwenVLModel:
    return QwenVLModel(QwenVLOptions(tiny=TinyModelSettings(family=family), **{**SMALL_PIXELS, **options}))
