"""OSWorld's action spaces converted into our :class:`core.types.Action` list.

* ``pyautogui``: a Python code string in absolute pixels, or ``WAIT`` / ``FAIL``
  / ``DONE``. The code is *parsed* (``ast``), never executed: only literal
  arguments to the pyautogui calls agents use are accepted.
* ``computer_13``: ``{"action_type": ..., "parameters": {...}}`` (or a list).

Pixels map to the 1000x1000 grid of ``screen_size``; a converted point lands
within one pixel of the original after the probe maps it back.
"""

from __future__ import annotations

import ast
from typing import Any, Mapping, Sequence

from pydantic import ValidationError

from core.types import Action, ActionType
from environments.actions import ActionParseError, pixels_to_grid, split_keys, xdotool_key

_SPECIAL = {"WAIT": ActionType.WAIT, "FAIL": ActionType.FAIL, "DONE": ActionType.DONE}
_CLICKS = {1: "left_click", 2: "double_click", 3: "triple_click"}
_BUTTON_CLICK = {"left": "left_click", "right": "right_click", "middle": "middle_click"}


def _make(**fields: Any) -> Action:
    try:
        return Action(**fields)
    except ValidationError as exc:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise ActionParseError(f"invalid {fields.get('type')}: {problems}") from None


def _keys(raw: Any, where: str) -> list[str]:
    try:
        keys = split_keys(raw)
        for key in keys:
            xdotool_key(key)
    except ValueError as exc:
        raise ActionParseError(f"{where}: {exc}") from None
    return keys


class _Converter:
    def __init__(self, screen_size: tuple[int, int]):
        self.screen_size = screen_size

    def point(self, x: Any, y: Any, where: str) -> dict[str, int]:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
            raise ActionParseError(f"{where}: x and y must be numbers (pixels), got {x!r}, {y!r}")
        gx, gy = pixels_to_grid(x, y, self.screen_size)
        return {"x": gx, "y": gy}

    def click(self, button: str, clicks: int, x: Any, y: Any, where: str) -> list[Action]:
        if x is None and y is None:
            if button == "left" and clicks >= 1:  # at the cursor: press and release there
                pair = [_make(type=ActionType.LEFT_MOUSE_DOWN), _make(type=ActionType.LEFT_MOUSE_UP)]
                return pair * clicks
            raise ActionParseError(f"{where}: a {button} click without x, y cannot be expressed; give coordinates")
        point = self.point(x, y, where)
        if button == "left" and clicks in _CLICKS:
            return [_make(type=_CLICKS[clicks], **point)]
        if button in _BUTTON_CLICK and clicks >= 1:
            return [_make(type=_BUTTON_CLICK[button], **point)] * clicks
        raise ActionParseError(f"{where}: unsupported button={button!r} clicks={clicks!r}")

    def scroll(self, clicks: Any, horizontal: bool, x: Any = None, y: Any = None) -> list[Action]:
        if not isinstance(clicks, (int, float)) or clicks == 0:
            raise ActionParseError(f"scroll amount must be a non-zero number, got {clicks!r}")
        if horizontal:
            direction = "right" if clicks > 0 else "left"
        else:
            direction = "up" if clicks > 0 else "down"
        point = self.point(x, y, "scroll") if x is not None and y is not None else {}
        return [_make(type=ActionType.SCROLL, direction=direction, amount=abs(round(clicks)) or 1, **point)]


# ---------------------------------------------------------------------------
# pyautogui
# ---------------------------------------------------------------------------

_SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("x", "y", "clicks", "interval", "button", "duration", "tween"),
    "doubleClick": ("x", "y", "interval", "button", "duration", "tween"),
    "tripleClick": ("x", "y", "interval", "button", "duration", "tween"),
    "rightClick": ("x", "y", "duration", "tween"),
    "middleClick": ("x", "y", "duration", "tween"),
    "moveTo": ("x", "y", "duration", "tween"),
    "dragTo": ("x", "y", "duration", "tween", "button", "mouseDownUp"),
    "mouseDown": ("x", "y", "button", "duration", "tween"),
    "mouseUp": ("x", "y", "button", "duration", "tween"),
    "typewrite": ("message", "interval"),
    "write": ("message", "interval"),
    "press": ("keys", "presses", "interval"),
    "hotkey": (),
    "scroll": ("clicks", "x", "y"),
    "vscroll": ("clicks", "x", "y"),
    "hscroll": ("clicks", "x", "y"),
    "sleep": ("seconds",),
}


def _call_arguments(call: ast.Call, name: str) -> tuple[list[Any], dict[str, Any]]:
    try:
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except ValueError:
        raise ActionParseError(f"pyautogui.{name}: only literal arguments are supported") from None
    return args, kwargs


def _bind(name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    if name == "hotkey":
        return {"keys": args}
    params = _SIGNATURES[name]
    if len(args) > len(params):
        raise ActionParseError(f"pyautogui.{name}: too many positional arguments")
    bound = dict(zip(params, args))
    for key, value in kwargs.items():
        if key in ("tween", "interval", "logScreenshot", "_pause"):
            continue
        if key not in params:
            raise ActionParseError(f"pyautogui.{name}: unexpected argument {key!r}")
        bound[key] = value
    if isinstance(bound.get("x"), (tuple, list)):  # click((x, y))
        bound["x"], bound["y"] = bound["x"]
    return bound


def _pyautogui_call(conv: _Converter, name: str, a: dict[str, Any]) -> list[Action]:
    x, y = a.get("x"), a.get("y")
    if name == "click":
        return conv.click(a.get("button", "left"), a.get("clicks", 1), x, y, "pyautogui.click")
    if name in ("doubleClick", "tripleClick"):
        return conv.click(a.get("button", "left"), 2 if name == "doubleClick" else 3, x, y, f"pyautogui.{name}")
    if name in ("rightClick", "middleClick"):
        return conv.click("right" if name == "rightClick" else "middle", 1, x, y, f"pyautogui.{name}")
    if name == "moveTo":
        return [_make(type=ActionType.MOUSE_MOVE, **conv.point(x, y, "pyautogui.moveTo"))]
    if name == "dragTo":
        if a.get("button", "left") != "left":
            raise ActionParseError("pyautogui.dragTo: only the left button can drag")
        return [_make(type=ActionType.LEFT_CLICK_DRAG, **conv.point(x, y, "pyautogui.dragTo"))]
    if name in ("mouseDown", "mouseUp"):
        if a.get("button", "left") != "left":
            raise ActionParseError(f"pyautogui.{name}: only the left button is supported")
        point = conv.point(x, y, f"pyautogui.{name}") if x is not None else {}
        kind = ActionType.LEFT_MOUSE_DOWN if name == "mouseDown" else ActionType.LEFT_MOUSE_UP
        return [_make(type=kind, **point)]
    if name in ("typewrite", "write"):
        message = a.get("message")
        if isinstance(message, list):  # typewrite(['a', 'enter']) presses keys
            return [_make(type=ActionType.KEY, keys=_keys(k, f"pyautogui.{name}")) for k in message]
        if not isinstance(message, str):
            raise ActionParseError(f"pyautogui.{name}: message must be a string")
        return [_make(type=ActionType.TYPE, text=message)]
    if name == "press":
        keys = a.get("keys")
        seq = [keys] if isinstance(keys, str) else keys
        if not isinstance(seq, list) or not seq:
            raise ActionParseError("pyautogui.press: keys must be a key name or a list of key names")
        presses = int(a.get("presses", 1))
        return [_make(type=ActionType.KEY, keys=_keys(k, "pyautogui.press")) for k in seq] * presses
    if name == "hotkey":
        return [_make(type=ActionType.KEY, keys=_keys(a["keys"], "pyautogui.hotkey"))]
    if name in ("scroll", "vscroll", "hscroll"):
        return conv.scroll(a.get("clicks"), name == "hscroll", x, y)
    if name == "sleep":
        return [_make(type=ActionType.WAIT, duration=float(a.get("seconds", 1)))]
    raise ActionParseError(f"pyautogui.{name} is not supported")


def from_pyautogui(code: str, screen_size: tuple[int, int] = (1280, 800)) -> list[Action]:
    """Convert OSWorld ``pyautogui`` action code (or WAIT/FAIL/DONE) to actions."""
    if not isinstance(code, str):
        raise ActionParseError(f"pyautogui actions are code strings, got {type(code).__name__}")
    stripped = code.strip()
    if stripped in _SPECIAL:
        return [_make(type=_SPECIAL[stripped])]
    try:
        tree = ast.parse(stripped)
    except SyntaxError as exc:
        raise ActionParseError(f"pyautogui code does not parse: {exc.msg} (line {exc.lineno})") from None
    conv = _Converter(screen_size)
    actions: list[Action] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            raise ActionParseError(f"line {stmt.lineno}: only pyautogui.<call>(...) statements are supported")
        owner = call.func.value.id if isinstance(call.func.value, ast.Name) else None
        name = call.func.attr
        if not ((owner == "pyautogui" and name in _SIGNATURES and name != "sleep") or (owner == "time" and name == "sleep")):
            raise ActionParseError(f"line {stmt.lineno}: {owner}.{name}() is not a supported pyautogui action")
        args, kwargs = _call_arguments(call, name)
        actions.extend(_pyautogui_call(conv, name, _bind(name, args, kwargs)))
    if not actions:
        raise ActionParseError("pyautogui code contains no action")
    return actions


# ---------------------------------------------------------------------------
# computer_13
# ---------------------------------------------------------------------------


def _computer_13_one(conv: _Converter, item: Any) -> list[Action]:
    if isinstance(item, str) and item.strip() in _SPECIAL:
        return [_make(type=_SPECIAL[item.strip()])]
    if not isinstance(item, Mapping) or "action_type" not in item:
        raise ActionParseError(f"computer_13 actions are {{'action_type', 'parameters'}} objects, got {item!r:.100}")
    kind = item["action_type"]
    p = item.get("parameters") or {k: v for k, v in item.items() if k != "action_type"}
    x, y = p.get("x"), p.get("y")
    if kind in _SPECIAL:
        return [_make(type=_SPECIAL[kind])]
    if kind == "MOVE_TO":
        return [_make(type=ActionType.MOUSE_MOVE, **conv.point(x, y, kind))]
    if kind == "CLICK":
        return conv.click(p.get("button", "left"), int(p.get("num_clicks", 1)), x, y, kind)
    if kind in ("RIGHT_CLICK", "DOUBLE_CLICK"):
        button, clicks = ("right", 1) if kind == "RIGHT_CLICK" else ("left", 2)
        return conv.click(button, clicks, x, y, kind)
    if kind in ("MOUSE_DOWN", "MOUSE_UP"):
        if p.get("button", "left") != "left":
            raise ActionParseError(f"{kind}: only the left button is supported")
        point = conv.point(x, y, kind) if x is not None else {}
        return [_make(type=ActionType.LEFT_MOUSE_DOWN if kind == "MOUSE_DOWN" else ActionType.LEFT_MOUSE_UP, **point)]
    if kind == "DRAG_TO":
        return [_make(type=ActionType.LEFT_CLICK_DRAG, **conv.point(x, y, kind))]
    if kind == "SCROLL":
        out: list[Action] = []
        if p.get("dx"):
            out += conv.scroll(p["dx"], True)
        if p.get("dy"):
            out += conv.scroll(p["dy"], False)
        if not out:
            raise ActionParseError("SCROLL needs a non-zero dx or dy")
        return out
    if kind == "TYPING":
        return [_make(type=ActionType.TYPE, text=p.get("text"))]
    if kind == "PRESS":
        return [_make(type=ActionType.KEY, keys=_keys(p.get("key", ""), kind))]
    if kind == "HOTKEY":
        return [_make(type=ActionType.KEY, keys=_keys(p.get("keys", []), kind))]
    if kind in ("KEY_DOWN", "KEY_UP"):
        raise ActionParseError(f"{kind} is not supported: use HOTKEY (or hold_key) instead")
    raise ActionParseError(f"unknown computer_13 action_type {kind!r}")


def from_computer_13(obj: Any, screen_size: tuple[int, int] = (1280, 800)) -> list[Action]:
    """Convert one computer_13 action (or a list of them) to actions."""
    conv = _Converter(screen_size)
    items: Sequence[Any] = obj if isinstance(obj, list) else [obj]
    actions: list[Action] = []
    for item in items:
        actions.extend(_computer_13_one(conv, item))
    return actions
