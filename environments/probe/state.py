"""What every endpoint of the probe sees: the display, the desktop user's home and environment, the launcher,
the screen recorder."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from environments import desktop_user
from environments.probe.desktop import Desktop, resolve_path
from environments.probe.processes import Launcher
from environments.probe.recorder import ScreenRecorder
from environments.probe.server import MAX_SERVED_BYTES, HTTPError


@dataclass
class ProbeState:
    """What every handler sees: the display, the desktop user's home, the process launcher."""

    desktop: Desktop
    home: str
    env: dict[str, str]
    python: str = sys.executable
    #: every endpoint served, extensions included (set by whoever starts the server; default: the probe's own)
    routes: dict[tuple[str, str], Any] | None = None
    #: the most bytes a file endpoint reads back or downloads (larger: 413)
    max_served_bytes: int = MAX_SERVED_BYTES
    #: the unprivileged user everything started here runs as (None: the probe's own user)
    user: Any = None
    #: where the desktop's xterms log what they show (shims.TERMINAL_LOGS; None: no transcripts, /terminal is null)
    terminal_logs: str | None = None
    launcher: Launcher = field(init=False)
    #: the display's screen recording (/start_recording, /end_recording); ffmpeg runs as the probe's user
    recorder: ScreenRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.launcher = Launcher(self.home, self.env, self.as_user)
        self.recorder = ScreenRecorder(self.desktop.display, self.env)

    @property
    def as_user(self) -> dict[str, Any]:
        return self.user.popen_kwargs() if self.user is not None else {}

    def writing_as_user(self) -> Any:
        """A context in which this thread's file access happens as the desktop's user (see desktop_user)."""
        return desktop_user.filesystem_identity(self.user)

    def path(self, raw: Any, name: str = "path") -> str:
        if not isinstance(raw, str) or not raw:
            raise HTTPError(400, f"field {name!r} must be a non-empty path string")
        try:
            return resolve_path(raw, self.home)
        except ValueError as exc:
            raise HTTPError(400, f"field {name!r}: {exc}") from None
