"""What segmenters do to the agent's conversation (:mod:`core.prompt`, re-exported here).

Screenshots dropped from the history (sliding window, step-wise) are replaced
by a short text marker, so the text of the conversation stays continuous.
"""

from __future__ import annotations

from typing import Sequence

from core.interfaces import ChatRenderer, Message
from core.prompt import (  # noqa: F401  the format every segmenter shares
    DEFAULT_MARKER,
    INSTRUCTION_PREFIX,
    NO_FEEDBACK_TEXT,
    assistant_message,
    initial_messages,
    observation_message,
)
from core.types import Screenshot


def response_text(renderer: ChatRenderer, ids: Sequence[int], text: str) -> str:
    """The response as the history holds it: without the stop token the chat template adds itself."""
    if ids and ids[-1] in renderer.stop_ids:
        stop_text = renderer.decode([ids[-1]])
        if stop_text and text.endswith(stop_text):
            return text[: -len(stop_text)]
    return text


def count_images(messages: Sequence[Message]) -> int:
    return sum(isinstance(part, Screenshot) for m in messages for part in m.content)


def drop_oldest_images(messages: Sequence[Message], count: int, marker: str) -> list[Message]:
    """A copy of ``messages`` whose ``count`` oldest screenshots are replaced by ``marker``."""
    out: list[Message] = []
    remaining = count
    for message in messages:
        content: list[str | Screenshot] = []
        for part in message.content:
            if isinstance(part, Screenshot) and remaining > 0:
                content.append(marker)
                remaining -= 1
            else:
                content.append(part)
        out.append(Message(message.role, content))
    return out


def keep_latest_image(messages: Sequence[Message], marker: str) -> list[Message]:
    """A copy of ``messages`` with every screenshot but the most recent replaced by ``marker``."""
    return drop_oldest_images(messages, max(count_images(messages) - 1, 0), marker)
