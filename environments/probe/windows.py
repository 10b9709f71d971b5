"""Window and application endpoints of the probe: OSWorld's ``/setup/launch``, ``/setup/open_file``,
``/setup/activate_window``, ``/setup/close_window`` and ``/window_size``, with OSWorld's status codes."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from environments.probe import files
from environments.probe.commands import MAX_COMMAND_TIMEOUT_S, command_argv
from environments.probe.desktop import ActionRejected, Window
from environments.probe.server import HTTPError, Request, Response, json_response, text_response
from environments.probe.state import ProbeState

OPEN_FILE_TIMEOUT_S = 60.0


def launch(state: ProbeState, req: Request) -> Response:
    """Start a program without waiting for it; one that cannot start is a 500 ``{status, message}`` (as OSWorld)."""
    command, shell = command_argv(state, req, req.json())
    try:
        state.launcher.launch(command, shell=shell)
    except OSError as exc:
        message = f"cannot start {command if isinstance(command, str) else command[0]}: {exc.strerror or exc}"
        raise HTTPError(500, message, {"status": "error", "message": message}) from None
    shown = command if isinstance(command, str) else " ".join(command)
    return text_response(f"{shown} launched successfully")


def _titled(window: Window, names: list[str]) -> bool:
    """OSWorld's test: the file's name (or its stem) appears in the window's title, case-sensitively."""
    return any(n and n in window.name for n in names)


def open_file(state: ProbeState, req: Request) -> Response:
    """Open ``path`` with its application and wait (``timeout_seconds``, default 60) until a window's title shows the
    file's name or stem (``window_name``: that text instead). Another window of the application (a recovery or
    encoding dialog) is not the file. An application named instead of a file (``path: "xterm"``) counts as open
    once a window titled with its name, or a new window of its class, shows: its title need not name it."""
    data = req.json()
    raw = req.field(data, "path", str)
    window_name = req.field(data, "window_name", str, None)
    timeout = float(req.field(data, "timeout_seconds", (int, float), OPEN_FILE_TIMEOUT_S))
    if not 0 < timeout <= MAX_COMMAND_TIMEOUT_S:
        raise HTTPError(400, f"timeout_seconds must be within (0, {MAX_COMMAND_TIMEOUT_S:g}]")
    path = state.path(raw)
    before = {w.window_id for w in state.desktop.windows()}
    app_class = ""
    if os.path.exists(path):
        argv = files.opener_for(path)
        name = os.path.basename(path.rstrip("/"))
        names = [window_name] if window_name else [name, os.path.splitext(name)[0]]
    elif shutil.which(raw, path=state.env.get("PATH")):
        argv, app_class = [raw], raw.lower()
        names = [window_name or raw]
    else:
        raise HTTPError(404, f"Application/file not found: {raw}")
    try:
        state.launcher.launch(argv)
    except OSError as exc:
        raise HTTPError(500, f"Failed to open {raw}: cannot start {argv[0]}: {exc.strerror or exc}") from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for window in state.desktop.windows():
            new_of_app = bool(app_class) and window.window_id not in before and app_class in window.wm_class.lower()
            if _titled(window, names) or new_of_app:
                try:
                    state.desktop.activate(window)
                except ActionRejected:
                    pass  # shown but not activatable yet: still opened
                return text_response(f"opened {path} in window {window.name!r}")
        time.sleep(0.2)
    raise HTTPError(500, f"no window titled with {' or '.join(map(repr, names))} appeared within {timeout:g} s "
                         f"after starting {argv[0]}")


def _window_request(state: ProbeState, req: Request) -> tuple[list[Window], str]:
    data = req.json()
    name = req.field(data, "window_name", str)
    strict = req.field(data, "strict", bool, False)
    by_class = req.field(data, "by_class", bool, False)
    return state.desktop.find_windows(name, strict=strict, by_class=by_class), name


def activate_window(state: ProbeState, req: Request) -> Response:
    """200 whether or not a window matches, as OSWorld's server (wmctrl's result is not checked there); the text
    says which."""
    windows, name = _window_request(state, req)
    if not windows:
        return text_response(f"Window {name} not found; nothing activated")
    try:
        state.desktop.activate(windows[0])
    except ActionRejected as exc:
        raise HTTPError(500, str(exc)) from None
    return text_response("Window activated successfully")


def close_window(state: ProbeState, req: Request) -> Response:
    """200 whether or not a window matches, as OSWorld's server; the text says which."""
    windows, name = _window_request(state, req)
    if not windows:
        return text_response(f"Window {name} not found; nothing closed")
    try:
        state.desktop.close(windows[0])
    except ActionRejected as exc:
        raise HTTPError(500, str(exc)) from None
    return text_response("Window closed successfully.")


def window_size(state: ProbeState, req: Request) -> Response:
    """Form field ``app_class_name`` -> ``{width, height}`` of the first managed window whose WM_CLASS name or
    class equals it, ignoring case; 500 when none does (OSWorld's server fails there too)."""
    wanted = req.form().get("app_class_name")
    if not wanted:
        raise HTTPError(400, "app_class_name is required")
    for window in state.desktop.client_windows():
        if wanted.lower() in (c.lower() for c in window.classes):
            size = state.desktop.window_size(window)
            if size is not None:  # else it went away meanwhile: try the next
                return json_response({"width": size[0], "height": size[1]})
    raise HTTPError(500, f"no window of class {wanted!r} on the desktop")


ROUTES: dict[tuple[str, str], Any] = {
    ("POST", "/setup/launch"): launch,
    ("POST", "/setup/open_file"): open_file,
    ("POST", "/setup/activate_window"): activate_window,
    ("POST", "/setup/close_window"): close_window,
    ("POST", "/window_size"): window_size,
}
