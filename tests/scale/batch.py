"""A deterministic training batch on the tiny Qwen3-VL, shared by the scale tests and their worker processes."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from core.interfaces import Message
from core.types import Screenshot, Segment

TINY = {"family": "qwen3_vl"}
#: AdamW's epsilon where a sharded step is compared with a single process's: at the default 1e-8 a fresh AdamW's
#: first step is lr * sign(gradient), so a weight whose gradient is ~1e-9 moves by +-lr depending on the order
#: the ranks summed it in (seen: 1 of 16384 weights off by 1e-5 at lr 1e-3); at 1e-4 each step stays
#: proportional to its gradient, so a wrong gradient still shows
ADAM_EPS = 1e-4

_ITEMS = [  # (trajectory id, instruction, response, screenshot colour, advantage)
    ("t1/0", "Open the file menu", "left_click(x=12, y=40)", (200, 30, 30), 1.2),
    ("t1/1", "Open the file menu", "key(keys=['ctrl', 'o'])\nthen wait", (30, 200, 30), -0.8),
    ("t2/0", "Type hello into the cell A1 and press enter", "type(text='hello')", (30, 30, 200), 0.5),
    ("t2/1", "Type hello into the cell A1 and press enter", "scroll(direction='down')", (90, 90, 20), -0.4),
    ("t3/0", "Close the dialog", "left_click(x=300, y=20)\ndone", (10, 120, 160), 0.9),
]


def policy_model() -> Any:
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    return QwenVLModel(QwenVLOptions(tiny=TINY, seed=0))


def screenshot(color: tuple[int, int, int], size: tuple[int, int] = (256, 160)) -> Screenshot:
    image = Image.new("RGB", size, color)
    for x in range(0, size[0], 32):  # some structure so patches differ
        image.paste((255 - color[0], color[1], 255 - color[2]), (x, 0, x + 8, size[1]))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return Screenshot.from_png(buffer.getvalue())


def segments(renderer: Any) -> list[Segment]:
    """Five one-turn segments of different lengths; rollout logprobs are off-policy constants on purpose."""
    out = []
    for i, (tid, instruction, response, color, advantage) in enumerate(_ITEMS):
        prompt = renderer.render([Message("system", ["You operate a desktop."]),
                                  Message("user", [instruction, screenshot(color)])], add_generation_prompt=True)
        response_ids = renderer.encode_text(response) + [renderer.stop_ids[0]]
        ids = prompt.ids + response_ids
        out.append(Segment(
            trajectory_id=tid, task_id=tid.split("/")[0], index=0, input_ids=ids,
            loss_mask=[0] * len(prompt.ids) + [1] * len(response_ids),
            rollout_logprobs=[0.0] * len(prompt.ids) + [-3.0 - 0.1 * (i + j) for j in range(len(response_ids))],
            images=list(prompt.images), advantage=advantage,
        ))
    return out
