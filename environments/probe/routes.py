"""The probe's endpoints: OSWorld's in-VM server protocol plus ``/action`` and ScienceBoard's file I/O.

Request and response shapes follow OSWorld's server so OSWorld clients work
unchanged, status codes included; differences are deliberate and listed in the
endpoint docstrings (mostly: bad input gets a 4xx JSON error instead of a 500
or a crash). This module holds the observation endpoints and ``/action`` and
puts the table together: commands, windows, desktop settings, the terminal,
files and screen recordings have modules of their own.
"""

from __future__ import annotations

import platform
from typing import Any

from pydantic import ValidationError

from core.types import Action
from environments.probe import accessibility, commands, desktop_settings, files, recording, terminal, windows
from environments.probe.desktop import ActionRejected
from environments.probe.server import HTTPError, Request, Response, json_response, text_response
from environments.probe.state import ProbeState

__all__ = ["ROUTES", "ProbeState"]


# -- observation ---------------------------------------------------------------------


def index(state: ProbeState, req: Request) -> Response:
    return json_response({"service": "scalecua-probe", "display": state.desktop.display, "endpoints": sorted(
        f"{m} {p}" for m, p in (state.routes or ROUTES))})


def screenshot(state: ProbeState, req: Request) -> Response:
    try:
        png = state.desktop.screenshot_png()
    except Exception as exc:  # mss / Xlib fail in many ways (even AssertionError) once the X server is gone
        raise HTTPError(503, f"the display cannot be captured: {exc!r}") from None
    return Response(png, content_type="image/png")


def get_accessibility(state: ProbeState, req: Request) -> Response:
    tree, reason = accessibility.dump_tree(state.env, state.as_user)
    return json_response({"AT": tree} if tree is not None else {"AT": None, "reason": reason})


def screen_size(state: ProbeState, req: Request) -> Response:
    width, height = state.desktop.screen_size()
    return json_response({"width": width, "height": height})


def cursor_position(state: ProbeState, req: Request) -> Response:
    try:
        return json_response(list(state.desktop.cursor_position()))
    except ActionRejected as exc:
        raise HTTPError(500, str(exc)) from None


def get_platform(state: ProbeState, req: Request) -> Response:
    return text_response(platform.system())


# -- actions ---------------------------------------------------------------------------


def action(state: ProbeState, req: Request) -> Response:
    """``{action: {type, x, y, ...}}`` (grid coordinates) -> ``{status, output, cursor?}``."""
    data = req.json()
    raw = req.field(data, "action", dict)
    try:
        parsed = Action.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'action'}: {e['msg']}" for e in exc.errors())
        raise HTTPError(400, f"invalid action: {problems}") from None
    try:
        with state.writing_as_user():  # write_file lands where the agent's own shell could write, owned by it
            return json_response(state.desktop.perform(parsed, state.home))
    except ActionRejected as exc:
        raise HTTPError(400, f"{parsed.type.value} failed: {exc}") from None
    except OSError as exc:  # write_file into a place it cannot write
        raise HTTPError(400, f"{parsed.type.value} failed: {exc}") from None


ROUTES: dict[tuple[str, str], Any] = {
    ("GET", "/"): index,
    ("GET", "/screenshot"): screenshot,
    ("GET", "/accessibility"): get_accessibility,
    ("POST", "/screen_size"): screen_size,
    ("GET", "/screen_size"): screen_size,
    ("GET", "/cursor_position"): cursor_position,
    ("GET", "/platform"): get_platform,
    ("POST", "/action"): action,
    **commands.ROUTES,
    **windows.ROUTES,
    **desktop_settings.ROUTES,
    **terminal.ROUTES,
    **files.ROUTES,
    **recording.ROUTES,
}
