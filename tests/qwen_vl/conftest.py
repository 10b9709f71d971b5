from __future__ import annotations

import pytest

from plugins.qwen_vl.model import QwenVLModel
from tests.qwen_vl.helpers import tiny_model


@pytest.fixture(scope="session")
def qwen3() -> QwenVLModel:
    """The default tiny Qwen3-VL (tokenizer, image processor, renderer; weights via ``.load()``)."""
    return tiny_model("qwen3_vl")
