"""Real parts: the tiny Qwen BPE tokenizer and the Qwen3-VL image processor (small screenshots)."""

from __future__ import annotations

import pytest

from plugins.qwen_vl.renderer import QwenVLRenderer
from tests.qwen_vl.helpers import screenshot, tiny_model

#: a few sizes -> 1..16 visual tokens each with min_pixels 1024, max_pixels 128*128
SHOTS = [screenshot(w, h, seed=i) for i, (w, h) in enumerate([(64, 64), (96, 64), (128, 96), (40, 120), (128, 128)])]


@pytest.fixture(scope="session")
def renderer() -> QwenVLRenderer:
    return tiny_model("qwen3_vl").renderer()
