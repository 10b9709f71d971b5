"""Our :class:`~core.types.Action` as the pyautogui code OSWorld's VM server runs through ``/execute``.

OSWorld's clients execute every action as ``python -c "import pyautogui;
import time; pyautogui.FAILSAFE = False; <code>"`` inside the VM. Coordinates
go from the 1000x1000 grid to the VM's pixels; key names go to pyautogui's.
Every value is embedded with ``repr``, so no text can break out of the call.
"""

from __future__ import annotations

from core.types import Action, ActionType
from environments.actions import grid_to_pixels, xdotool_key

PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "

#: X keysyms (what :func:`environments.actions.xdotool_key` returns) -> pyautogui key names
_PYAUTOGUI_KEYS = {
    "Return": "enter", "Escape": "esc", "BackSpace": "backspace", "Tab": "tab", "space": "space",
    "Delete": "delete", "Insert": "insert", "Home": "home", "End": "end", "Prior": "pageup", "Next": "pagedown",
    "Up": "up", "Down": "down", "Left": "left", "Right": "right", "Caps_Lock": "capslock", "Num_Lock": "numlock",
    "Print": "printscreen", "Menu": "apps", "super": "win", "ctrl": "ctrl", "alt": "alt", "shift": "shift",
    "Control_L": "ctrlleft", "Control_R": "ctrlright", "Alt_L": "altleft", "Alt_R": "altright",
    "Shift_L": "shiftleft", "Shift_R": "shiftright",
    "minus": "-", "plus": "+", "equal": "=", "comma": ",", "period": ".", "slash": "/", "backslash": "\\",
    "semicolon": ";", "colon": ":", "apostrophe": "'", "quotedbl": '"', "grave": "`", "asciitilde": "~",
    "bracketleft": "[", "bracketright": "]", "braceleft": "{", "braceright": "}", "parenleft": "(",
    "parenright": ")", "less": "<", "greater": ">", "question": "?", "exclam": "!", "at": "@",
    "numbersign": "#", "dollar": "$", "percent": "%", "asciicircum": "^", "ampersand": "&", "asterisk": "*",
    "underscore": "_", "bar": "|",
}
_CLICKS = {
    ActionType.LEFT_CLICK: "click", ActionType.RIGHT_CLICK: "rightClick", ActionType.MIDDLE_CLICK: "middleClick",
    ActionType.DOUBLE_CLICK: "doubleClick", ActionType.TRIPLE_CLICK: "tripleClick",
}


def pyautogui_key(name: str) -> str:
    """Our key name (``ctrl``, ``enter``, ``f5``, ``a``) as pyautogui's (raises ValueError for unknown keys)."""
    keysym = xdotool_key(name)
    if keysym in _PYAUTOGUI_KEYS:
        return _PYAUTOGUI_KEYS[keysym]
    if len(keysym) > 1 and keysym[0] == "F" and keysym[1:].isdigit():
        return keysym.lower()
    return keysym if len(keysym) == 1 else keysym.lower()


def _type(text: str) -> str:
    # OSWorld #257: pyautogui types '>' for '<' on some layouts; upstream presses shift+comma instead
    parts = []
    for i, chunk in enumerate(text.split("<")):
        if i:
            parts.append("pyautogui.hotkey('shift', ',')")
        if chunk:
            parts.append(f"pyautogui.write({chunk!r}, interval=0.01)")
    return "; ".join(parts)


def action_code(action: Action, screen_size: tuple[int, int]) -> str | None:
    """The pyautogui statements for ``action``; None for actions that do nothing on the desktop."""
    t = action.type
    point = grid_to_pixels(action.x, action.y, screen_size) if action.x is not None and action.y is not None else None
    at = f"{point[0]}, {point[1]}" if point else ""
    if t in _CLICKS:
        return f"pyautogui.{_CLICKS[t]}({at})"
    if t == ActionType.MOUSE_MOVE:
        return f"pyautogui.moveTo({at})"
    if t in (ActionType.LEFT_MOUSE_DOWN, ActionType.LEFT_MOUSE_UP):
        verb = "mouseDown" if t == ActionType.LEFT_MOUSE_DOWN else "mouseUp"
        return f"pyautogui.{verb}({at + ', ' if at else ''}button='left')"
    if t == ActionType.LEFT_CLICK_DRAG:
        start = ""
        if action.start_x is not None and action.start_y is not None:
            sx, sy = grid_to_pixels(action.start_x, action.start_y, screen_size)
            start = f"pyautogui.moveTo({sx}, {sy}); "
        return f"{start}pyautogui.dragTo({at}, duration=0.5, button='left')"
    if t == ActionType.KEY:
        keys = [pyautogui_key(k) for k in action.keys or []]
        return f"pyautogui.press({keys[0]!r})" if len(keys) == 1 else f"pyautogui.hotkey({', '.join(map(repr, keys))})"
    if t == ActionType.HOLD_KEY:
        keys = [pyautogui_key(k) for k in action.keys or []]
        down = "; ".join(f"pyautogui.keyDown({k!r})" for k in keys)
        up = "; ".join(f"pyautogui.keyUp({k!r})" for k in reversed(keys))
        return f"{down}; time.sleep({action.duration if action.duration is not None else 1.0}); {up}"
    if t == ActionType.TYPE:
        return _type(action.text or "") or None
    if t == ActionType.SCROLL:
        amount = action.amount or 0
        call = "scroll" if action.direction in ("up", "down") else "hscroll"
        clicks = amount if action.direction in ("up", "right") else -amount
        return f"pyautogui.{call}({clicks}{', ' + at if at else ''})"
    return None  # screenshot, wait, cursor_position, done, fail, answer, write_file: not pyautogui


def command(action: Action, screen_size: tuple[int, int], python: str = "python") -> list[str] | None:
    """The ``/execute`` argv OSWorld's clients send for ``action`` (None when there is nothing to run)."""
    code = action_code(action, screen_size)
    return None if code is None else [python, "-c", PREFIX + code]
