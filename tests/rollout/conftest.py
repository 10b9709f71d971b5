"""A tiny real Qwen3-VL (in-process BPE tokenizer, random weights from a config) for rollout-engine tests."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from core.interfaces import Message
from core.types import Screenshot


@pytest.fixture(scope="session")
def policy_model():
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    return QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0))


@pytest.fixture(scope="session")
def prompts(policy_model):
    """Two rendered prompts of different lengths, each with one screenshot."""
    renderer = policy_model.renderer()
    out = []
    for text, color in (("Close the dialog", (200, 40, 40)), ("Open the spreadsheet, then sum column A", (40, 40, 200))):
        buffer = io.BytesIO()
        Image.new("RGB", (320, 200), color).save(buffer, "PNG")
        shot = Screenshot.from_png(buffer.getvalue())
        out.append(renderer.render([Message("system", ["You operate a desktop."]), Message("user", [text, shot])],
                                   add_generation_prompt=True))
    return out
