"""The agent prompt format shared by every segmenter.

* system: the caller's system prompt (role, action space, output format);
* first user turn: the task instruction, then the first screenshot;
* assistant turns: the sampled responses (reasoning + action), verbatim;
* later user turns: the action feedback text, then the new screenshot.

Screenshots dropped from the history (sliding window, step-wise) are replaced
by a short text marker, so the text of the conversation stays continuous.
"""

from __future__ import annotations

from typing import Sequence

from core.interfaces import ChatRenderer, Message
from core.types import Observation, Screenshot

INSTRUCTION_PREFIX = "Task: "
#: user-turn text when an action produced neither feedback nor a screenshot
NO_FEEDBACK_TEXT = "Action executed."
DEFAULT_MARKER = "[earlier screenshot removed]"


def initial_messages(system_prompt: str, instruction: str, observation: Observation) -> list[Message]:
    if not instruction.strip():
        raise ValueError("the task instruction is empty: every episode needs an instruction for the first user turn")
    text = f"{INSTRUCTION_PREFIX}{instruction}"
    user: list[str | Screenshot] = [text]
    if observation.screenshot is not None:
        user = [text + "\n", observation.screenshot]
    return [Message("system", [system_prompt]), Message("user", user)]


def observation_message(observation: Observation, feedback: str | None) -> Message:
    """The user turn after an action: feedback (from the loop and the environment), then the screenshot."""
    text = "\n".join(t for t in (feedback, observation.text) if t)
    if observation.screenshot is None:
        return Message("user", [text or NO_FEEDBACK_TEXT])
    if not text:
        return Message("user", [observation.screenshot])
    return Message("user", [text + "\n", observation.screenshot])


def assistant_message(text: str) -> Message:
    return Message("assistant", [text])


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
