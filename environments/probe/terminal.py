"""``GET /terminal``: the text of the active terminal, as OSWorld's server answers it.

OSWorld reads the focused gnome-terminal's text through AT-SPI. xterm, this project's terminal, has no
accessibility interface, so the desktop's ``xterm`` logs everything it is sent (the ``xterm`` shim in
:mod:`environments.probe.shims`): when the active window is an xterm with such a log, the answer is that log
replayed as lines of text (:func:`transcript`); otherwise, as OSWorld's server without an active terminal, null.
The replay is of a line-oriented terminal: shells, prompts and line editing come out as they showed; full-screen
programs (vim, top) that address the cursor by screen position come out only approximately.

The logs stay small (:func:`keep_logs_bounded`): one grown past :data:`MAX_LOG_BYTES` is emptied (xterm appends,
so it writes on at the new end) and one whose xterm has exited is deleted.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from environments.probe.server import Request, Response, json_response
from environments.probe.state import ProbeState

#: how much of a log is replayed (its end); older output is left out
TRANSCRIPT_TAIL_BYTES = 256 << 10
#: a log longer than this is emptied (a terminal running ``yes`` must not fill the disk)
MAX_LOG_BYTES = 8 << 20
LOG_CHECK_INTERVAL_S = 1.0
_LOG_NAME = re.compile(r"xterm-(\d+)\.log")
TAB_WIDTH = 8

_TOKEN = re.compile(
    r"\x1b\[(?P<params>[0-?]*)[ -/]*(?P<final>[@-~])"  # CSI: cursor moves, erasing, colours (ignored), modes
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles
    r"|\x1bP[^\x1b]*(?:\x1b\\)?"  # DCS
    r"|\x1b[()*+\-./#%]."  # character set designations
    r"|\x1b."  # any other escape
    r"|(?P<control>[\x00-\x1a\x1c-\x1f\x7f])"
    r"|(?P<text>[^\x00-\x1f\x7f]+)",
    re.S,
)


class _Lines:
    """Lines of text with a cursor (row, column) that the replay writes into."""

    def __init__(self) -> None:
        self.lines: list[list[str]] = [[]]
        self.row = 0
        self.col = 0

    @property
    def line(self) -> list[str]:
        return self.lines[self.row]

    def write(self, text: str) -> None:
        line = self.line
        for char in text:
            if self.col < len(line):
                line[self.col] = char
            else:
                line.extend(" " * (self.col - len(line)))
                line.append(char)
            self.col += 1

    def move_row(self, delta: int) -> None:
        self.row = max(0, self.row + delta)
        while self.row >= len(self.lines):
            self.lines.append([])

    def control(self, char: str) -> None:
        if char == "\n":
            self.move_row(1)
            self.col = 0
        elif char == "\r":
            self.col = 0
        elif char == "\b":
            self.col = max(0, self.col - 1)
        elif char == "\t":
            self.col = (self.col // TAB_WIDTH + 1) * TAB_WIDTH
        # bell, shift in/out and the rest show nothing

    def csi(self, params: str, final: str) -> None:
        if params[:1] in ("?", ">", "=", "<"):
            return  # private modes (bracketed paste, cursor keys, ...): nothing to show
        numbers = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else [0]
        n, count = numbers[0], max(1, numbers[0])
        line = self.line
        if final == "K":  # erase in line: 0 to the end, 1 to the start, 2 all of it
            if n == 0:
                del line[self.col:]
            elif n == 1:
                line[: self.col + 1] = [" "] * min(len(line), self.col + 1)
            else:
                line.clear()
        elif final == "J":  # erase in display: 0 below the cursor, 2 and 3 everything (clear)
            if n == 0:
                del line[self.col:]
                del self.lines[self.row + 1:]
            elif n in (2, 3):
                self.lines, self.row, self.col = [[]], 0, 0
        elif final == "C":
            self.col += count
        elif final == "D":
            self.col = max(0, self.col - count)
        elif final == "G":
            self.col = count - 1
        elif final == "A":
            self.move_row(-count)
        elif final == "B":
            self.move_row(count)
        elif final == "P":  # delete characters
            del line[self.col:self.col + count]
        elif final == "@" and self.col < len(line):  # insert blanks
            line[self.col:self.col] = [" "] * count
        elif final == "X":  # erase characters
            end = min(len(line), self.col + count)
            line[self.col:end] = [" "] * max(0, end - self.col)

    def text(self) -> str:
        return "\n".join("".join(line).rstrip() for line in self.lines)


def transcript(data: str) -> str:
    """What a line-oriented terminal shows after being sent ``data`` (text with control and escape sequences)."""
    lines = _Lines()
    for token in _TOKEN.finditer(data):
        if token.group("text") is not None:
            lines.write(token.group("text"))
        elif token.group("control") is not None:
            lines.control(token.group("control"))
        elif token.group("final") is not None:
            lines.csi(token.group("params"), token.group("final"))
    return lines.text()


def read_log_tail(path: str, limit: int = TRANSCRIPT_TAIL_BYTES) -> str:
    """The end of a terminal log as text, from a line's start when the log is longer than ``limit``."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - limit))
        data = handle.read(limit)
    if size > limit:
        data = data[data.find(b"\n") + 1:]
    return data.decode("utf-8", "replace")


def active_terminal_text(state: ProbeState) -> str | None:
    """The active window's text when it is an xterm that logs (one the shim started), else None."""
    if state.terminal_logs is None:
        return None
    window = state.desktop.active_window()
    if window is None or "xterm" not in (c.lower() for c in window.classes):
        return None
    pid = state.desktop.window_pid(window)
    if pid is None:
        return None
    try:
        with state.writing_as_user():  # the log directory is the desktop user's: read nothing it could not
            data = read_log_tail(os.path.join(state.terminal_logs, f"xterm-{pid}.log"))
    except OSError:
        return None  # an xterm started some other way: no log
    return transcript(data).rstrip()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_logs(state: ProbeState) -> None:
    """Delete the logs of xterms that have exited and empty those grown past :data:`MAX_LOG_BYTES`; as the desktop's
    user (the directory is its: a link planted there must not make the probe truncate anything else)."""
    if state.terminal_logs is None:
        return
    with state.writing_as_user():
        for entry in os.scandir(state.terminal_logs):
            match = _LOG_NAME.fullmatch(entry.name)
            if match is None:
                continue
            try:
                if not _running(int(match.group(1))):
                    os.unlink(entry.path)
                elif entry.stat(follow_symlinks=False).st_size > MAX_LOG_BYTES:
                    fd = os.open(entry.path, os.O_WRONLY | os.O_NOFOLLOW)
                    try:
                        os.ftruncate(fd, 0)
                    finally:
                        os.close(fd)
            except OSError:
                continue  # gone meanwhile, or not a file the user may write


def keep_logs_bounded(state: ProbeState, stop: threading.Event) -> threading.Thread:
    """A thread that prunes the terminal logs every :data:`LOG_CHECK_INTERVAL_S` until ``stop`` is set."""

    def loop() -> None:
        while not stop.wait(LOG_CHECK_INTERVAL_S):
            try:
                prune_logs(state)
            except OSError:
                pass  # the directory went away (the probe is shutting down)

    thread = threading.Thread(target=loop, name="terminal-logs", daemon=True)
    thread.start()
    return thread


def terminal(state: ProbeState, req: Request) -> Response:
    """``{output, status}``: the active terminal's text, or null when the active window is no logging xterm."""
    return json_response({"output": active_terminal_text(state), "status": "success"})


ROUTES: dict[tuple[str, str], Any] = {("GET", "/terminal"): terminal}
