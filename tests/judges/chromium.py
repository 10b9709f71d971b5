"""A real headless Chromium for the judge tests: Debian's ``/usr/bin/chromium`` (never ``playwright install``),
``--headless --no-sandbox --remote-debugging-port=0``, its profile where a desktop's Chromium keeps it (a
stand-in VM home's ``~/.config/chromium``), where it writes ``DevToolsActivePort``: the port our DevTools program
(:mod:`environments.devtools`) finds from inside the desktop and upstream's Playwright is given."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest


def address_bar_tree(title: str, shown: str) -> str:
    """The one part of a desktop's accessibility tree upstream's address-bar getters read: Chrome's window titled
    ``title`` whose address bar shows ``shown`` (upstream's selector names Chromium on arm, Google Chrome
    elsewhere)."""
    app = "Chromium" if "arm" in platform.machine() else "Google Chrome"
    return (f'<desktop-frame name="main"><application name="{app}"><frame name="{escape(title)}">'
            f'<entry name="Address and search bar">{escape(shown)}</entry></frame></application></desktop-frame>')


def require_chromium() -> None:
    if shutil.which("chromium") is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium)")


class Chromium:
    """Headless Chromium with its profile in ``home``'s ``~/.config/chromium`` and ``args`` added to the
    command line; :attr:`port` is its DevTools port."""

    def __init__(self, home: Path, *args: str):
        self.profile = home / ".config" / "chromium"
        self.process = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", *args, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not active.is_file() or not active.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise AssertionError("chromium gave no DevTools port")
            time.sleep(0.1)
        self.port = int(active.read_text().split()[0])

    def devtools(self, path: str, method: str = "GET") -> Any:
        """DevTools' HTTP endpoint: the JSON answer of ``/json/...`` paths that answer JSON, else None."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = answer.read()
        return json.loads(body) if path.startswith(("/json/list", "/json/new", "/json/version")) else None

    def pages(self) -> list[dict[str, Any]]:
        """The open pages (``/json/list``: most recently active first)."""
        return [t for t in self.devtools("/json/list") if t["type"] == "page"]

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
