"""A tiny real Qwen3-VL (in-process BPE tokenizer, random weights from a config) shared by trainer tests."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from core.interfaces import Message
from core.types import Screenshot, Segment


def screenshot(color: tuple[int, int, int], size: tuple[int, int] = (320, 200)) -> Screenshot:
    buffer = io.BytesIO()
    image = Image.new("RGB", size, color)
    for x in range(0, size[0], 40):  # some structure so patches differ
        image.paste((255 - color[0], color[1], 255 - color[2]), (x, 0, x + 8, size[1]))
    image.save(buffer, "PNG")
    return Screenshot.from_png(buffer.getvalue())


@pytest.fixture(scope="session")
def policy_model():
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    return QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0))


def _make_segment(renderer, trajectory_id: str, instruction: str, response: str, color: tuple[int, int, int],
                 advantage: float, index: int = 0) -> Segment:
    """A one-turn segment: system + user (text, screenshot) prompt, then a response with the stop token."""
    prompt = renderer.render(
        [Message("system", ["You operate a desktop."]), Message("user", [instruction, screenshot(color)])],
        add_generation_prompt=True,
    )
    response_ids = renderer.encode_text(response) + [renderer.stop_ids[0]]
    ids = prompt.ids + response_ids
    return Segment(
        trajectory_id=trajectory_id,
        task_id=trajectory_id.split("/")[0],
        index=index,
        input_ids=ids,
        loss_mask=[0] * len(prompt.ids) + [1] * len(response_ids),
        rollout_logprobs=[0.0] * len(ids),
        images=list(prompt.images),
        advantage=advantage,
    )


@pytest.fixture
def make_segment(policy_model):
    """``make_segment(trajectory_id, instruction, response, color, advantage)`` with the tiny model's renderer."""
    renderer = policy_model.renderer()

    def make(trajectory_id: str, instruction: str, response: str, color: tuple[int, int, int], advantage: float,
             index: int = 0) -> Segment:
        return _make_segment(renderer, trajectory_id, instruction, response, color, advantage, index)

    return make
