"""``GET /terminal``: the active xterm's text (environments/probe/terminal.py), read by OSWorld's own client.

OSWorld's ``vm_terminal_output`` tasks type into a terminal and judge what it shows: here an xterm the probe's shim
started logs what it is sent, and the probe replays that log as text.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import pytest
import requests

from environments.probe.desktop import Desktop
from environments.probe.state import ProbeState
from environments.probe.terminal import MAX_LOG_BYTES, prune_logs, read_log_tail, transcript
from tests.environments.desktop_fixtures import DesktopSession, osworld_desktop  # noqa: F401 (fixture)


@pytest.mark.parametrize(("sent", "shown"), [
    # a bash prompt with bracketed paste, a window title (OSC) and a colour, the command's echo and its output
    ("\x1b[?2004h\x1b]0;user@vm: ~\x07\x1b[01;32muser@vm\x1b[00m$ stty size\r\n\x1b[?2004l\r43 132\r\n",
     "user@vm$ stty size\n43 132\n"),
    ("$ ecko\x08\x08\x1b[Kho hi\r\nhi\r\n", "$ echo hi\nhi\n"),  # line editing: back over a typo, erase, retype
    ("$ cat\x1b[3D\x1b[1P\x1b[1@X\r\n", "$ Xat\n"),  # cursor left, delete a character, insert a blank
    ("old\r\n\x1b[H\x1b[2J\x1b[3J$ ", "$"),  # clear
    ("a\tb\r\nprogress 10%\rprogress 100%\r\n", "a       b\nprogress 100%\n"),
])
def test_a_transcript_shows_what_a_terminal_shows(sent: str, shown: str) -> None:
    assert transcript(sent) == shown


def test_a_long_log_is_read_from_the_start_of_a_line_near_its_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "xterm-1.log"
    log.write_bytes(b"".join(b"line %05d\r\n" % i for i in range(2000)))
    tail = read_log_tail(str(log), limit=1000)
    assert tail.startswith("line ") and tail.endswith("line 01999\r\n") and len(tail) <= 1000


def test_logs_stay_bounded_and_go_with_their_xterm(tmp_path) -> None:  # type: ignore[no-untyped-def]
    logs = tmp_path / "terminals"
    logs.mkdir()
    state = ProbeState(desktop=Desktop(":0"), home=str(tmp_path), env={}, terminal_logs=str(logs))
    exited = subprocess.Popen(["true"])
    exited.wait()
    big, small, gone = (logs / f"xterm-{pid}.log" for pid in (os.getpid(), os.getppid(), exited.pid))
    big.write_bytes(b"y\r\n" * (MAX_LOG_BYTES // 3 + 1))
    small.write_bytes(b"$ ls\r\n")
    gone.write_text("$ exit\r\n")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"x" * (MAX_LOG_BYTES + 1))
    (logs / "xterm-1.log").symlink_to(outside)  # pid 1 runs; a planted link is never followed
    prune_logs(state)
    assert big.stat().st_size == 0 and small.read_bytes() == b"$ ls\r\n" and not gone.exists()
    assert outside.stat().st_size == MAX_LOG_BYTES + 1


def post(session: DesktopSession, path: str, payload: dict) -> requests.Response:
    return requests.post(f"http://127.0.0.1:{session.port}{path}", data=json.dumps(payload),
                         headers={"Content-Type": "application/json"}, timeout=60)


@pytest.mark.desktop
def test_the_active_xterm_text_reaches_osworlds_client(osworld_desktop: DesktopSession) -> None:
    python: Any = pytest.importorskip("desktop_env.controllers.python").PythonController("127.0.0.1",
                                                                                        osworld_desktop.port)
    python.retry_interval = 0
    assert python.get_terminal_output() is None  # no terminal is active
    post(osworld_desktop, "/setup/launch", {"command": ["xterm", "-T", "osworld-terminal"], "shell": False})
    deadline = time.monotonic() + 60
    while "successfully" not in post(osworld_desktop, "/setup/activate_window",
                                     {"window_name": "osworld-terminal", "strict": True}).text:
        assert time.monotonic() < deadline, "the xterm never showed"
        time.sleep(0.2)
    time.sleep(1.0)  # the shell's first prompt
    # what OSWorld's task 13584542 types into its terminal before judging the terminal's text
    python.execute_python_command("pyautogui.write('stty size'); time.sleep(0.3); pyautogui.press('enter')")
    deadline = time.monotonic() + 30
    while "24 80" not in ((text := python.get_terminal_output()) or "").splitlines():
        assert time.monotonic() < deadline, text
        time.sleep(0.3)
    lines = text.splitlines()
    assert any(line.endswith("stty size") for line in lines), lines
    post(osworld_desktop, "/setup/close_window", {"window_name": "osworld-terminal", "strict": True})
    deadline = time.monotonic() + 30
    while python.get_terminal_output() is not None:  # the active window is no longer a terminal
        assert time.monotonic() < deadline
        time.sleep(0.3)
