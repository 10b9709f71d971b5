"""The agent's prompt format: the conversation every segmenter renders and every export writes.

* system: the caller's system prompt (role, action space, output format);
* first user turn: the task instruction, then the first screenshot;
* assistant turns: the sampled responses (reasoning + action), verbatim;
* later user turns: the action feedback text, then the new screenshot.

Segmenters (``segmenters/``) turn it into token ids with their window over the screenshots;
:mod:`core.export` writes it as chat messages for other trainers (TRL, LLaMA-Factory).
"""

from __future__ import annotations

from core.interfaces import Message
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
