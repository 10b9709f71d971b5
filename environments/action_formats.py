"""Action formats by name: ``tool_call`` (ours, :mod:`environments.actions`), and OSWorld's ``pyautogui``
code strings and ``computer_13`` JSON (:mod:`environments.osworld_actions`), all parsed into
:class:`core.types.Action`. Both parsers sit below this module, so neither imports the other's dispatcher."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from core.errors import ActionParseError
from core.types import Action
from environments import osworld_actions
from environments.actions import parse_actions, without_thinking


ActionParser = Callable[[Any], list[Action]]
ACTION_FORMATS = ("tool_call", "pyautogui", "computer_13")


_CODE_BLOCK = re.compile(r"```(?:python|py|json)?\s*\n(.*?)```", re.DOTALL)


def _code_in(text: str) -> str:
    """The last fenced code block of a response, or the whole response without ``<think>``."""
    visible = without_thinking(text)
    blocks = _CODE_BLOCK.findall(visible)
    return (blocks[-1] if blocks else visible).strip()


def parse_response(text: str, action_format: str = "tool_call", screen_size: tuple[int, int] = (1280, 800)) -> list[Action]:
    """Actions in a model response written in ``action_format`` (see :data:`ACTION_FORMATS`)."""
    if action_format == "tool_call":
        return parse_actions(text)
    parser = get_action_parser(action_format, screen_size)
    code = _code_in(text)
    if action_format == "pyautogui":
        return parser(code)
    try:
        obj = json.loads(code)
    except json.JSONDecodeError as exc:
        if code.strip() in ("WAIT", "FAIL", "DONE"):
            return parser(code.strip())
        raise ActionParseError(f"computer_13 actions are JSON ({exc.msg} at char {exc.pos})") from None
    return parser(obj)


def get_action_parser(name: str, screen_size: tuple[int, int] = (1280, 800)) -> ActionParser:
    """``tool_call`` (ours), ``pyautogui`` (OSWorld code strings) or ``computer_13`` (OSWorld JSON)."""
    if name == "tool_call":
        return parse_actions
    if name == "pyautogui":
        return lambda code: osworld_actions.from_pyautogui(code, screen_size)
    if name == "computer_13":
        return lambda obj: osworld_actions.from_computer_13(obj, screen_size)
    raise ValueError(f"unknown action format {name!r}; available: {', '.join(ACTION_FORMATS)}")
