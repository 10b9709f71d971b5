"""The X side of the probe: screenshots, real input through xdotool, windows.

Everything that touches the display goes through this module so the HTTP
layer stays free of X details. Input is xdotool (Debian ``xdotool``); screen
capture is ``mss`` (XShm / XGetImage) with the XFixes cursor drawn in, encoded
to PNG with numpy + zlib.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.types import Action, ActionType
from environments.actions import grid_to_pixels, pixels_to_grid, xdotool_key
from environments.probe.xclose import send_close_request

XDOTOOL_TIMEOUT_S = 30.0
TYPE_DELAY_MS = 8  # per character; xdotool's default (12) is slower than needed on Xvfb
DRAG_STEPS = 8  # intermediate motion events so toolkits recognise a drag
SCROLL_BUTTONS = {"up": "4", "down": "5", "left": "6", "right": "7"}


class ActionRejected(ValueError):
    """The action cannot be carried out (bad key name, xdotool refused); the message says why."""


@dataclass
class Window:
    window_id: int
    name: str
    wm_class: str  # "res_name.res_class", as wmctrl -x prints it
    classes: tuple[str, ...] = ()  # res_name and res_class apart (either may contain dots)

    @classmethod
    def from_props(cls, window_id: int, props: dict[str, list[str]]) -> Window:
        name = props.get("_NET_WM_NAME") or props.get("WM_NAME") or [""]
        classes = tuple(props.get("WM_CLASS", []))
        return cls(window_id, name[0], ".".join(classes), classes)


class Desktop:
    """One X display: ``display`` like ``":3"``."""

    def __init__(self, display: str, png_compress_level: int = 1):
        self.display = display
        self.png_compress_level = png_compress_level
        self._env = {**os.environ, "DISPLAY": display}
        self._grab_lock = threading.Lock()
        self._input_lock = threading.Lock()  # one action at a time: interleaved input would garble both
        self._mss: Any = None
        self._size: tuple[int, int] | None = None

    # -- process helpers -------------------------------------------------------

    def xdotool(self, *args: str, timeout: float = XDOTOOL_TIMEOUT_S) -> str:
        try:
            proc = subprocess.run(
                ["xdotool", *args], env=self._env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise ActionRejected(f"xdotool {args[0]} did not finish within {timeout:g} s") from None
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip().splitlines()
            raise ActionRejected(f"xdotool {' '.join(args[:3])}: {message[-1] if message else f'exit {proc.returncode}'}")
        if "No such key name" in proc.stderr:  # xdotool skips unknown keysyms and still exits 0
            names = re.findall(r"No such key name '([^']*)'", proc.stderr)
            raise ActionRejected(f"X knows no key named {', '.join(map(repr, names))}: use names like ctrl, enter, f5, a")
        return proc.stdout

    # -- screen ------------------------------------------------------------------

    def _grabber(self) -> Any:
        if self._mss is None:
            import mss

            self._mss = mss.MSS(display=self.display, with_cursor=True)
        return self._mss

    def screen_size(self) -> tuple[int, int]:
        if self._size is None:
            with self._grab_lock:
                monitor = self._grabber().monitors[0]
            self._size = (int(monitor["width"]), int(monitor["height"]))
        return self._size

    def screenshot_png(self) -> bytes:
        """The whole screen with the cursor drawn in, as PNG."""
        with self._grab_lock:
            grabber = self._grabber()
            shot = grabber.grab(grabber.monitors[0])
        return encode_png(shot.bgra, shot.width, shot.height, self.png_compress_level)

    def cursor_position(self) -> tuple[int, int]:
        """Cursor position in pixels."""
        fields = dict(
            line.split("=", 1) for line in self.xdotool("getmouselocation", "--shell").splitlines() if "=" in line
        )
        return int(fields["X"]), int(fields["Y"])

    # -- actions -------------------------------------------------------------------

    def _px(self, x: int | None, y: int | None) -> tuple[str, str]:
        assert x is not None and y is not None
        px, py = grid_to_pixels(x, y, self.screen_size())
        return str(px), str(py)

    def _move_args(self, action: Action) -> list[str]:
        return ["mousemove", *self._px(action.x, action.y)] if action.x is not None and action.y is not None else []

    @staticmethod
    def _keysyms(keys: list[str] | None) -> list[str]:
        try:
            return [xdotool_key(k) for k in keys or []]
        except ValueError as exc:
            raise ActionRejected(str(exc)) from None

    def perform(self, action: Action, home: str) -> dict[str, Any]:
        """Execute one action; returns ``{status, output, cursor?}`` (cursor on the grid)."""
        with self._input_lock:
            output = self._perform(action, home)
        result: dict[str, Any] = {"status": "ok", "output": output}
        if action.type == ActionType.CURSOR_POSITION:
            result["cursor"] = list(pixels_to_grid(*self.cursor_position(), self.screen_size()))
            result["output"] = f"cursor at {result['cursor']}"
        return result

    def _perform(self, action: Action, home: str) -> str | None:
        t = action.type
        clicks = {
            ActionType.LEFT_CLICK: ["click", "1"],
            ActionType.RIGHT_CLICK: ["click", "3"],
            ActionType.MIDDLE_CLICK: ["click", "2"],
            ActionType.DOUBLE_CLICK: ["click", "--repeat", "2", "--delay", "80", "1"],
            ActionType.TRIPLE_CLICK: ["click", "--repeat", "3", "--delay", "80", "1"],
        }
        if t in clicks:
            self.xdotool(*self._move_args(action), *clicks[t])
        elif t == ActionType.MOUSE_MOVE:
            self.xdotool(*self._move_args(action))
        elif t in (ActionType.LEFT_MOUSE_DOWN, ActionType.LEFT_MOUSE_UP):
            verb = "mousedown" if t == ActionType.LEFT_MOUSE_DOWN else "mouseup"
            self.xdotool(*self._move_args(action), verb, "1")
        elif t == ActionType.LEFT_CLICK_DRAG:
            self._drag(action)
        elif t == ActionType.KEY:
            self.xdotool("key", "--clearmodifiers", "+".join(self._keysyms(action.keys)))
        elif t == ActionType.HOLD_KEY:
            syms = self._keysyms(action.keys)
            self.xdotool("keydown", *syms)
            try:
                time.sleep(action.duration if action.duration is not None else 1.0)
            finally:
                self.xdotool("keyup", *reversed(syms))
        elif t == ActionType.TYPE:
            if action.text:
                # xdotool's own timeout grows with the text: it types one character at a time
                timeout = XDOTOOL_TIMEOUT_S + len(action.text) * TYPE_DELAY_MS * 3 / 1000
                self.xdotool("type", "--delay", str(TYPE_DELAY_MS), "--", action.text, timeout=timeout)
        elif t == ActionType.SCROLL:
            button = SCROLL_BUTTONS[action.direction or "down"]
            self.xdotool(*self._move_args(action), "click", "--repeat", str(action.amount), "--delay", "30", button)
        elif t == ActionType.WAIT:
            time.sleep(action.duration if action.duration is not None else 1.0)
        elif t == ActionType.WRITE_FILE:
            path = resolve_path(action.path or "", home)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(action.content or "")
            return f"wrote {len(action.content or '')} characters to {path}"
        elif t == ActionType.ANSWER:
            return f"answer: {action.text}"
        # screenshot, cursor_position, done, fail: nothing to do on the desktop
        return None

    def _drag(self, action: Action) -> None:
        if action.start_x is not None and action.start_y is not None:
            sx, sy = (int(v) for v in self._px(action.start_x, action.start_y))
        else:
            sx, sy = self.cursor_position()
        ex, ey = (int(v) for v in self._px(action.x, action.y))
        chain = ["mousemove", str(sx), str(sy), "mousedown", "1", "sleep", "0.05"]
        for i in range(1, DRAG_STEPS + 1):
            chain += ["mousemove", str(sx + (ex - sx) * i // DRAG_STEPS), str(sy + (ey - sy) * i // DRAG_STEPS)]
            chain += ["sleep", "0.01"]
        chain += ["sleep", "0.05", "mouseup", "1"]
        try:
            self.xdotool(*chain)
        except ActionRejected:
            self.xdotool("mouseup", "1")  # never leave the button pressed
            raise

    # -- windows ---------------------------------------------------------------------

    def windows(self) -> list[Window]:
        """Visible top-level windows with a name."""
        try:
            ids = self.xdotool("search", "--onlyvisible", "--name", ".", timeout=10).split()
        except ActionRejected:
            return []  # xdotool exits 1 when nothing matches
        found = []
        for wid in ids:
            props = self._xprop(wid, "WM_CLASS", "_NET_WM_NAME", "WM_NAME")
            if props is None:
                continue  # the window went away meanwhile
            found.append(Window.from_props(int(wid), props))
        return found

    def _xprop(self, wid: str, *names: str) -> dict[str, list[str]] | None:
        """String properties of a window (``xprop -notype``), or None when it is gone."""
        try:
            proc = subprocess.run(
                ["xprop", "-notype", "-id", wid, *names], env=self._env, capture_output=True, text=True, timeout=5
            )
        except (subprocess.TimeoutExpired, OSError):
            return None
        if proc.returncode != 0:
            return None
        props: dict[str, list[str]] = {}
        for line in proc.stdout.splitlines():
            key, sep, value = line.partition(" = ")
            if sep:
                props[key.strip()] = [_unescape(v) for v in _QUOTED.findall(value)]
        return props

    def client_windows(self) -> list[Window]:
        """The windows the window manager manages (``_NET_CLIENT_LIST``, in its order), minimized ones included."""
        try:
            proc = subprocess.run(["xprop", "-root", "_NET_CLIENT_LIST"], env=self._env, capture_output=True,
                                  text=True, timeout=5)
        except (subprocess.TimeoutExpired, OSError):
            return []
        _, _, listed = proc.stdout.partition("#")
        found = []
        for wid in (w.strip() for w in listed.split(",")):
            props = self._xprop(wid, "WM_CLASS", "_NET_WM_NAME", "WM_NAME") if wid else None
            if props is not None:
                found.append(Window.from_props(int(wid, 16), props))
        return found

    def active_window(self) -> Window | None:
        """The window that has the focus, or None (no window manager, or nothing focused)."""
        try:
            wid = self.xdotool("getactivewindow", timeout=5).strip()
        except ActionRejected:
            return None
        props = self._xprop(wid, "WM_CLASS", "_NET_WM_NAME", "WM_NAME") if wid.isdigit() else None
        return Window.from_props(int(wid), props) if props is not None else None

    def window_pid(self, window: Window) -> int | None:
        """The process that owns the window (its ``_NET_WM_PID``), or None when it does not say."""
        try:
            pid = self.xdotool("getwindowpid", str(window.window_id), timeout=5).strip()
        except ActionRejected:
            return None
        return int(pid) if pid.isdigit() else None

    def window_size(self, window: Window) -> tuple[int, int] | None:
        """Width and height of the client window (not its frame), or None when it is gone."""
        try:
            out = self.xdotool("getwindowgeometry", "--shell", str(window.window_id), timeout=5)
        except ActionRejected:
            return None
        fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        try:
            return int(fields["WIDTH"]), int(fields["HEIGHT"])
        except (KeyError, ValueError):
            return None

    def find_windows(self, name: str, *, strict: bool = False, by_class: bool = False) -> list[Window]:
        """wmctrl semantics: substring, case-insensitive; ``strict``: the whole string, case-sensitive."""

        def matches(value: str) -> bool:
            return value == name if strict else name.lower() in value.lower()

        out = []
        for window in self.windows():
            if by_class:
                parts = window.wm_class.split(".")
                if matches(window.wm_class) or any(matches(p) for p in parts):
                    out.append(window)
            elif matches(window.name):
                out.append(window)
        return out

    def activate(self, window: Window) -> None:
        self.xdotool("windowactivate", "--sync", str(window.window_id), timeout=10)

    def close(self, window: Window) -> None:
        """Ask politely, as a window manager's close button does (``_NET_CLOSE_WINDOW``)."""
        try:
            send_close_request(self.display, window.window_id)
        except OSError as exc:
            raise ActionRejected(str(exc)) from None


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def encode_png(bgra: bytes, width: int, height: int, level: int = 1) -> bytes:
    """An RGB PNG of a BGRA frame: no row filters, fast zlib.

    About twice as fast as Pillow's encoder on screenshots (Pillow tries
    filters per row); the bytes are a little larger, which loopback does not mind.
    """
    frame = np.frombuffer(bgra, np.uint8).reshape(height, width, 4)
    rows = np.empty((height, width * 3 + 1), np.uint8)
    rows[:, 0] = 0  # filter type "none"
    rows[:, 1:] = frame[:, :, 2::-1].reshape(height, width * 3)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(
        b"IDAT", zlib.compress(rows.tobytes(), level)) + _png_chunk(b"IEND", b"")


def resolve_path(path: str, home: str) -> str:
    """Expand ``~`` against the desktop's home and environment variables; relative paths are under home;
    the result is normalized (``a/../b`` -> ``b``), so what is checked is what is opened."""
    if "\0" in path:
        raise ValueError("a path must not contain NUL bytes")
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    path = os.path.expandvars(path)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(home, path))
