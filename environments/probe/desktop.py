"""The X side of the probe: screenshots, real input through xdotool, windows.

Everything that touches the display goes through this module so the HTTP
layer stays free of X details. Input is xdotool (Debian ``xdotool``); screen
capture is ``mss`` (XShm / XGetImage) with the XFixes cursor drawn in, encoded
to PNG with numpy + zlib.
"""

from __future__ import annotations

import ctypes
import ctypes.util
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
            name = props.get("_NET_WM_NAME") or props.get("WM_NAME") or [""]
            found.append(Window(int(wid), name[0], ".".join(props.get("WM_CLASS", []))))
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
        send_close_request(self.display, window.window_id)


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


# -- a single EWMH client message, through libX11 directly --------------------------


class _XClientMessageEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("serial", ctypes.c_ulong),
        ("send_event", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("window", ctypes.c_ulong),
        ("message_type", ctypes.c_ulong),
        ("format", ctypes.c_int),
        ("data", ctypes.c_long * 5),
    ]


class _XEvent(ctypes.Union):
    _fields_ = [("xclient", _XClientMessageEvent), ("pad", ctypes.c_long * 24)]


_CLIENT_MESSAGE = 33
_SUBSTRUCTURE_MASKS = (1 << 19) | (1 << 20)  # SubstructureNotify | SubstructureRedirect


def send_close_request(display: str, window_id: int) -> None:
    """Send ``_NET_CLOSE_WINDOW`` to the root window (xdotool has no polite close).

    Only the root window is addressed, so no X error (and no Xlib exit) can
    follow from a window that vanished meanwhile.
    """
    libname = ctypes.util.find_library("X11") or "libX11.so.6"
    x11 = ctypes.CDLL(libname)
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XDefaultRootWindow.restype = ctypes.c_ulong
    x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    x11.XFlush.argtypes = [ctypes.c_void_p]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    dpy = x11.XOpenDisplay(display.encode())
    if not dpy:
        raise ActionRejected(f"cannot open display {display}")
    try:
        root = x11.XDefaultRootWindow(dpy)
        event = _XEvent()
        msg = event.xclient
        msg.type = _CLIENT_MESSAGE
        msg.send_event = 1
        msg.window = window_id
        msg.message_type = x11.XInternAtom(dpy, b"_NET_CLOSE_WINDOW", 0)
        msg.format = 32
        msg.data[0] = 0  # CurrentTime
        msg.data[1] = 2  # source indication: pager / tool
        x11.XSendEvent(dpy, root, 0, _SUBSTRUCTURE_MASKS, ctypes.byref(event))
        x11.XFlush(dpy)
    finally:
        x11.XCloseDisplay(dpy)
