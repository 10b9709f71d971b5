"""The desktop's own settings as OSWorld's server reads and sets them: ``/desktop_path``, ``/wallpaper`` and
``/setup/change_wallpaper``.

The wallpaper is GNOME's setting ``org.gnome.desktop.background picture-uri``, read and written with ``gsettings``
as the desktop's user (Debian ``libglib2.0-bin``, ``gsettings-desktop-schemas``; it persists through
``dconf-service`` on the desktop's session bus, in the home). Setting it does not repaint this desktop's
background (no GNOME shell draws it here), but what OSWorld's getters read back is the same.
"""

from __future__ import annotations

import os
import shutil
from typing import Any
from urllib.parse import unquote

from environments.probe.processes import run_command
from environments.probe.server import HTTPError, Request, Response, json_response, text_response
from environments.probe.state import ProbeState

BACKGROUND = ("org.gnome.desktop.background", "picture-uri")
GSETTINGS_TIMEOUT_S = 15.0


def desktop_path(state: ProbeState, req: Request) -> Response:
    """``{desktop_path}``: the home's ``Desktop`` folder; 404 when it does not exist (as OSWorld)."""
    path = os.path.join(state.home, "Desktop")
    with state.writing_as_user():
        exists = os.path.isdir(path)
    if not exists:
        raise HTTPError(404, f"desktop path not found: {path} does not exist")
    return json_response({"desktop_path": path})


def _gsettings(state: ProbeState, *args: str) -> tuple[int, str, str]:
    program = shutil.which("gsettings", path=state.env.get("PATH"))
    if program is None:
        raise HTTPError(500, "gsettings is not installed on this desktop (Debian package libglib2.0-bin), so the "
                             "wallpaper setting cannot be read or changed")
    try:
        result = run_command([program, *args], timeout=GSETTINGS_TIMEOUT_S, cwd=state.home, env=state.env,
                             as_user=state.as_user)
    except OSError as exc:
        raise HTTPError(500, f"cannot run gsettings: {exc}") from None
    if result.timed_out:
        raise HTTPError(500, f"gsettings did not answer within {GSETTINGS_TIMEOUT_S:g} s")
    return result.returncode, result.stdout.strip(), result.stderr.strip()


def _wallpaper_path(state: ProbeState) -> str | None:
    code, out, _ = _gsettings(state, "get", *BACKGROUND)
    if code != 0:
        return None
    path = out.replace("'", "")
    path = path[len("file://"):] if path.startswith("file://") else path
    return path or None


def wallpaper(state: ProbeState, req: Request) -> Response:
    """The wallpaper's bytes (``image/png``, whatever the file holds, as OSWorld); 404 when no wallpaper is set,
    500 when the file it names cannot be read."""
    path = _wallpaper_path(state)
    if path is None:
        raise HTTPError(404, "Wallpaper file not found: gsettings names none")
    limit = state.max_served_bytes
    for candidate in dict.fromkeys((path, unquote(path))):  # the URI may be percent-encoded
        try:
            with state.writing_as_user(), open(candidate, "rb") as handle:  # only what the desktop's user may read
                data = handle.read(limit + 1)
        except OSError:
            continue
        if len(data) > limit:
            raise HTTPError(413, f"{candidate} is larger than {limit} bytes, more than the probe serves")
        return Response(data, content_type="image/png")
    raise HTTPError(500, f"Unable to serve the wallpaper file {path}")


def change_wallpaper(state: ProbeState, req: Request) -> Response:
    """``{path}``: make that image the wallpaper setting; 404 when it does not exist. Unlike OSWorld's server, a
    setting that does not stick (no session bus for dconf) is a 500 rather than a silent success."""
    raw = req.json().get("path")
    if not raw:
        raise HTTPError(400, "Path not supplied!")
    path = state.path(raw)
    with state.writing_as_user():
        exists = os.path.exists(path)
    if not exists:
        raise HTTPError(404, f"File not found: {path}")
    code, _, err = _gsettings(state, "set", *BACKGROUND, f"file://{path}")
    if code != 0:
        raise HTTPError(500, f"Failed to change wallpaper: gsettings exited {code}: {err[-300:]}")
    if _wallpaper_path(state) != path:
        raise HTTPError(500, f"Failed to change wallpaper: the setting did not persist ({err[-300:] or 'no error'}); "
                             "gsettings needs the desktop's D-Bus session bus and dconf-service")
    return text_response("Wallpaper changed successfully")


ROUTES: dict[tuple[str, str], Any] = {
    ("POST", "/desktop_path"): desktop_path,
    ("POST", "/wallpaper"): wallpaper,
    ("POST", "/setup/change_wallpaper"): change_wallpaper,
}
