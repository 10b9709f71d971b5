"""The agent's action format: parsing model text into :class:`core.types.Action`, and back.

The format (Qwen-VL's ``computer_use`` tool call, so Qwen3-VL models use what
they were trained on): one or more blocks ::

    <tool_call>
    {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 300]}}
    </tool_call>

``<action>{"action": "left_click", "coordinate": [500, 300]}</action>`` (bare
arguments) is accepted too. Coordinates are on the relative 1000x1000 grid;
the probe rescales them to the screen. Text inside ``<think>...</think>`` is
ignored. :func:`format_action_space` is the system-prompt description.

OSWorld's own action spaces convert into the same actions
(:mod:`environments.osworld_actions`); :mod:`environments.action_formats` picks
a parser by name.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from pydantic import ValidationError

from core.errors import ActionParseError
from core.types import POINTER_ACTIONS, OPTIONAL_POINT_ACTIONS, Action, ActionType

GRID = 1000
TOOL_NAME = "computer_use"


__all__ = ["ActionParseError", "parse_actions", "parse_response", "format_action", "format_action_space",
           "format_response"]


# ---------------------------------------------------------------------------
# Grid <-> pixels
# ---------------------------------------------------------------------------


def grid_to_pixels(x: int, y: int, screen_size: tuple[int, int]) -> tuple[int, int]:
    """Map a grid point to a pixel; 1000 maps to the last pixel, not one past it."""
    width, height = screen_size
    return min(round(x * width / GRID), width - 1), min(round(y * height / GRID), height - 1)


def pixels_to_grid(x: float, y: float, screen_size: tuple[int, int]) -> tuple[int, int]:
    width, height = screen_size
    gx = min(max(round(x * GRID / width), 0), GRID)
    gy = min(max(round(y * GRID / height), 0), GRID)
    return gx, gy


# ---------------------------------------------------------------------------
# Key names -> X keysyms (what xdotool understands)
# ---------------------------------------------------------------------------

_KEY_ALIASES: dict[str, str] = {
    "ctrl": "ctrl", "control": "ctrl", "ctl": "ctrl", "alt": "alt", "option": "alt", "shift": "shift",
    "super": "super", "win": "super", "windows": "super", "cmd": "super", "command": "super", "meta": "super",
    "enter": "Return", "return": "Return", "esc": "Escape", "escape": "Escape", "backspace": "BackSpace",
    "tab": "Tab", "space": "space", "delete": "Delete", "del": "Delete", "insert": "Insert", "ins": "Insert",
    "home": "Home", "end": "End", "pageup": "Prior", "pgup": "Prior", "page_up": "Prior",
    "pagedown": "Next", "pgdn": "Next", "page_down": "Next", "up": "Up", "down": "Down", "left": "Left",
    "right": "Right", "arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right",
    "capslock": "Caps_Lock", "numlock": "Num_Lock", "printscreen": "Print", "prtsc": "Print", "menu": "Menu",
    "ctrlleft": "Control_L", "ctrlright": "Control_R", "altleft": "Alt_L", "altright": "Alt_R",
    "shiftleft": "Shift_L", "shiftright": "Shift_R",
}
_PUNCTUATION: dict[str, str] = {
    "-": "minus", "+": "plus", "=": "equal", ",": "comma", ".": "period", "/": "slash", "\\": "backslash",
    ";": "semicolon", ":": "colon", "'": "apostrophe", '"': "quotedbl", "`": "grave", "~": "asciitilde",
    "[": "bracketleft", "]": "bracketright", "{": "braceleft", "}": "braceright", "(": "parenleft",
    ")": "parenright", "<": "less", ">": "greater", "?": "question", "!": "exclam", "@": "at",
    "#": "numbersign", "$": "dollar", "%": "percent", "^": "asciicircum", "&": "ampersand", "*": "asterisk",
    "_": "underscore", "|": "bar", " ": "space",
}
_KEYSYM = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def xdotool_key(name: str) -> str:
    """The X keysym for a key name (``enter`` -> ``Return``, ``-`` -> ``minus``, ``f5`` -> ``F5``)."""
    if len(name) == 1:
        return _PUNCTUATION.get(name, name)
    lowered = name.strip().lower()
    if lowered in _KEY_ALIASES:
        return _KEY_ALIASES[lowered]
    if re.fullmatch(r"f([1-9]|1[0-9]|2[0-4])", lowered):
        return lowered.upper()
    if _KEYSYM.match(name.strip()):
        return name.strip()  # already an X keysym, e.g. KP_Enter
    raise ValueError(f"unknown key {name!r}: use names like ctrl, alt, shift, enter, esc, tab, f5, a, 1, -")


def split_keys(keys: str | Sequence[str]) -> list[str]:
    """``"ctrl+s"`` or ``["ctrl+s"]`` or ``["ctrl", "s"]`` -> ``["ctrl", "s"]`` (a lone ``+`` stays a key)."""
    items = [keys] if isinstance(keys, str) else list(keys)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"keys must be non-empty strings, got {item!r}")
        if item == "+" or "+" not in item:
            out.append(item)
        else:
            out.extend(part if part else "+" for part in re.split(r"(?<!^)\+(?!$)", item))
    return out


# ---------------------------------------------------------------------------
# Parsing the tool-call format
# ---------------------------------------------------------------------------

_BLOCK = re.compile(r"<(tool_call|action)>(.*?)(?:</\1>|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def without_thinking(text: str) -> str:
    """``text`` without its ``<think>...</think>`` parts (an unclosed one runs to the end)."""
    return _THINK.sub("", text)
_ARGUMENT_KEYS = {
    "action", "coordinate", "start_coordinate", "text", "keys", "direction", "amount", "pixels",
    "duration", "time", "path", "content", "status",
}


def _point(value: Any, what: str) -> tuple[int, int]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)):
        raise ActionParseError(f"{what} must be [x, y] on the 0..1000 grid, got {value!r}")
    x, y = (round(v) for v in value)
    if not (0 <= x <= GRID and 0 <= y <= GRID):
        raise ActionParseError(f"{what} {[x, y]} is off the 0..1000 grid")
    return x, y


def action_from_arguments(args: Mapping[str, Any]) -> Action:
    """Build an Action from the tool call's ``arguments`` object."""
    if not isinstance(args, Mapping):
        raise ActionParseError(f"the arguments must be a JSON object, got {args!r:.100}")
    unknown = sorted(set(args) - _ARGUMENT_KEYS)
    if unknown:
        raise ActionParseError(f"unknown argument(s) {unknown}; allowed: {sorted(_ARGUMENT_KEYS)}")
    name = args.get("action")
    if not isinstance(name, str):
        raise ActionParseError('missing "action" (e.g. {"action": "left_click", "coordinate": [500, 300]})')
    if name == "terminate":  # Qwen-VL's spelling of done/fail
        name = "done" if args.get("status", "success") == "success" else "fail"
    try:
        kind = ActionType(name)
    except ValueError:
        raise ActionParseError(
            f"unknown action {name!r}; available: {', '.join(t.value for t in ActionType)}"
        ) from None
    fields: dict[str, Any] = {"type": kind}
    if kind in POINTER_ACTIONS and kind not in OPTIONAL_POINT_ACTIONS and "coordinate" not in args:
        raise ActionParseError(f'{name} needs "coordinate": [x, y] on the 0..1000 grid')
    if "coordinate" in args:
        fields["x"], fields["y"] = _point(args["coordinate"], "coordinate")
    if "start_coordinate" in args:
        fields["start_x"], fields["start_y"] = _point(args["start_coordinate"], "start_coordinate")
    if kind in (ActionType.KEY, ActionType.HOLD_KEY):
        raw = args.get("keys", args.get("text"))
        if raw is None:
            raise ActionParseError(f'{name} needs "keys", e.g. ["ctrl", "s"]')
        try:
            fields["keys"] = split_keys(raw)
            for key in fields["keys"]:
                xdotool_key(key)
        except ValueError as exc:
            raise ActionParseError(f"{name}: {exc}") from None
    elif "text" in args:
        fields["text" if kind != ActionType.WRITE_FILE else "path"] = args["text"]
    if kind == ActionType.SCROLL:
        direction, amount = args.get("direction"), args.get("amount")
        if direction is None and isinstance(args.get("pixels"), (int, float)):
            direction, amount = ("up" if args["pixels"] > 0 else "down"), abs(round(args["pixels"]))
        fields["direction"], fields["amount"] = direction, amount
    duration = args.get("duration", args.get("time"))
    if duration is not None:
        fields["duration"] = duration
    for key in ("path", "content"):
        if key in args:
            fields[key] = args[key]
    try:
        return Action(**fields)
    except ValidationError as exc:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise ActionParseError(f"invalid {name}: {problems}") from None


def parse_actions(text: str) -> list[Action]:
    """All actions in a model response, in order. Raises :class:`ActionParseError` when there is none or one is bad."""
    visible = without_thinking(text)
    blocks = _BLOCK.findall(visible)
    if not blocks:
        raise ActionParseError(
            "no action found: end the response with "
            '<tool_call>{"name": "computer_use", "arguments": {"action": ..., ...}}</tool_call>'
        )
    actions = []
    for index, (tag, body) in enumerate(blocks):
        try:
            obj = json.loads(body.strip())
        except json.JSONDecodeError as exc:
            raise ActionParseError(f"<{tag}> block {index + 1} is not valid JSON ({exc.msg} at char {exc.pos})") from None
        if tag == "tool_call" and isinstance(obj, dict) and "arguments" in obj:
            if obj.get("name", TOOL_NAME) != TOOL_NAME:
                raise ActionParseError(f"unknown tool {obj.get('name')!r}; the only tool is {TOOL_NAME!r}")
            obj = obj["arguments"]
        actions.append(action_from_arguments(obj))
    return actions


# ---------------------------------------------------------------------------
# Formatting (oracles, demonstrations, the system prompt)
# ---------------------------------------------------------------------------


def action_arguments(action: Action) -> dict[str, Any]:
    """The tool-call ``arguments`` for ``action`` (inverse of :func:`action_from_arguments`)."""
    args: dict[str, Any] = {"action": action.type.value}
    if action.start_x is not None and action.start_y is not None:
        args["start_coordinate"] = [action.start_x, action.start_y]
    if action.x is not None and action.y is not None:
        args["coordinate"] = [action.x, action.y]
    for key in ("keys", "text", "direction", "amount", "duration", "path", "content"):
        value = getattr(action, key)
        if value is not None:
            args[key] = value
    return args


def format_action(action: Action) -> str:
    call = {"name": TOOL_NAME, "arguments": action_arguments(action)}
    return f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"


def format_response(demonstrated: Sequence[Action], action_format: str = "tool_call") -> str:
    """A response that :func:`parse_response` reads back as ``demonstrated`` (one tool call per action)."""
    if action_format != "tool_call":
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"demonstrations are written in the tool_call action format, not {action_format!r}: "
                            "set environment.options.action_format: tool_call to record or train on them")
    if not demonstrated:
        raise ValueError("a response needs at least one action")
    return "\n".join(format_action(action) for action in demonstrated)


_DESCRIPTIONS: dict[ActionType, str] = {
    ActionType.LEFT_CLICK: 'left_click: click at "coordinate"',
    ActionType.RIGHT_CLICK: 'right_click: right-click at "coordinate"',
    ActionType.MIDDLE_CLICK: 'middle_click: middle-click at "coordinate"',
    ActionType.DOUBLE_CLICK: 'double_click: double-click at "coordinate"',
    ActionType.TRIPLE_CLICK: 'triple_click: triple-click at "coordinate" (selects a line)',
    ActionType.LEFT_CLICK_DRAG: 'left_click_drag: drag from "start_coordinate" (default: the cursor) to "coordinate"',
    ActionType.MOUSE_MOVE: 'mouse_move: move the cursor to "coordinate"',
    ActionType.LEFT_MOUSE_DOWN: 'left_mouse_down: press the left button (at "coordinate" if given)',
    ActionType.LEFT_MOUSE_UP: 'left_mouse_up: release the left button (at "coordinate" if given)',
    ActionType.KEY: 'key: press a key combination, "keys": ["ctrl", "s"]',
    ActionType.HOLD_KEY: 'hold_key: hold "keys" down for "duration" seconds',
    ActionType.TYPE: 'type: type "text"',
    ActionType.SCROLL: 'scroll: scroll "direction" (up/down/left/right) by "amount" clicks, at "coordinate" if given',
    ActionType.SCREENSHOT: "screenshot: take a new screenshot",
    ActionType.WAIT: 'wait: wait "duration" seconds (default 1)',
    ActionType.CURSOR_POSITION: "cursor_position: report the cursor position",
    ActionType.DONE: "done: the task is complete",
    ActionType.FAIL: "fail: the task cannot be completed",
    ActionType.ANSWER: 'answer: submit the answer in "text"',
    ActionType.WRITE_FILE: 'write_file: write "content" to the file "path"',
}
SCIENCEBOARD_ONLY = frozenset({ActionType.ANSWER, ActionType.WRITE_FILE})


def format_action_space(*, scienceboard: bool = False, screen_size: tuple[int, int] = (1280, 800)) -> str:
    """The action-space section of the system prompt."""
    lines = [
        f"You control a {screen_size[0]}x{screen_size[1]} Linux desktop with the `{TOOL_NAME}` tool.",
        "Coordinates are [x, y] on a 1000x1000 grid over the screenshot: [0, 0] is the top-left corner,",
        "[1000, 1000] the bottom-right corner.",
        "Call the tool once per step, at the end of your response:",
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 300]}}\n</tool_call>',
        "Actions:",
    ]
    for kind, text in _DESCRIPTIONS.items():
        if kind in SCIENCEBOARD_ONLY and not scienceboard:
            continue
        lines.append(f"- {text}")
    return "\n".join(lines)
