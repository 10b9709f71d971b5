"""``python -m environments.probe`` started by hand, on a real Xvfb display: it always authenticates, bounds what
it serves and normalizes paths before use."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest

from tests.environments.desktop_fixtures import DesktopSession, desktop, http_call  # noqa: F401 (fixture)

pytestmark = pytest.mark.desktop


@contextlib.contextmanager
def standalone_probe(session: DesktopSession, *args: str) -> Iterator[dict]:
    """A second probe on the fixture's display, started as a user would; yields its ready line."""
    env = {k: v for k, v in os.environ.items() if k != "SCALECUA_PROBE_TOKEN"}
    proc = subprocess.Popen([sys.executable, "-m", "environments.probe", "--display", session.display, "--port", "0",
                             "--home", str(session.home), *args], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())  # blocks until it serves (or exits: then this fails)
        assert ready["probe"] == "ready"
        yield ready
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def call(port: int, method: str, path: str, *, token: str | None, form: dict[str, str] | None = None,
         body: dict | None = None) -> tuple[int, bytes]:
    if form is not None:
        return http_call(port, token, method, path, urllib.parse.urlencode(form).encode(),
                         {"Content-Type": "application/x-www-form-urlencoded"})
    data = json.dumps(body).encode() if body is not None else None
    return http_call(port, token, method, path, data, {"Content-Type": "application/json"} if data else None)


def test_without_a_token_it_generates_one_and_refuses_everyone_else(desktop: DesktopSession) -> None:
    with standalone_probe(desktop) as ready:
        token, port = ready["token"], ready["port"]
        assert isinstance(token, str) and len(token) >= 24
        # what the issue found open: any local process reading /etc/shadow or running commands as us
        assert call(port, "POST", "/file", token=None, form={"file_path": "/etc/shadow"})[0] == 401
        assert call(port, "POST", "/execute", token=None, body={"command": ["id"]})[0] == 401
        assert call(port, "GET", "/platform", token="not-" + token)[0] == 401
        status, answer = call(port, "POST", "/execute", token=token, body={"command": ["id", "-u"]})
        assert status == 200 and json.loads(answer)["output"].strip() == str(os.getuid())


def test_two_standalone_probes_get_different_tokens(desktop: DesktopSession) -> None:
    with standalone_probe(desktop) as first, standalone_probe(desktop) as second:
        assert first["token"] != second["token"]
        assert call(second["port"], "GET", "/platform", token=first["token"])[0] == 401


def test_no_auth_is_explicit_and_loopback_only(desktop: DesktopSession) -> None:
    with standalone_probe(desktop, "--no-auth") as ready:
        assert ready["token"] is None
        assert call(ready["port"], "GET", "/platform", token=None)[0] == 200
    env = {"PATH": "/usr/bin:/bin", "HOME": str(desktop.home)}
    wide = subprocess.run([sys.executable, "-m", "environments.probe", "--display", desktop.display, "--host",
                           "0.0.0.0", "--port", "0", "--no-auth"], capture_output=True, text=True, timeout=60, env=env)
    assert wide.returncode == 2 and "refusing to bind 0.0.0.0 without a token" in wide.stderr
    assert wide.stdout == ""
    both = subprocess.run([sys.executable, "-m", "environments.probe", "--display", desktop.display, "--port", "0",
                           "--no-auth", "--token", "t"], capture_output=True, text=True, timeout=60, env=env)
    assert both.returncode == 2 and "contradict" in both.stderr
    # the osworld-docker image's explicit exception qualifies --no-auth and nothing else
    alone = subprocess.run([sys.executable, "-m", "environments.probe", "--display", desktop.display, "--host",
                            "0.0.0.0", "--port", "0", "--no-auth-any-host"], capture_output=True, text=True,
                           timeout=60, env=env)
    assert alone.returncode == 2 and "only qualifies --no-auth" in alone.stderr


def test_served_files_and_downloads_are_bounded(desktop: DesktopSession, tmp_path: Path) -> None:
    home = Path(desktop.home)
    (home / "small.txt").write_text("x" * 100)
    (home / "big.txt").write_text("y" * 2000)
    with standalone_probe(desktop, "--max-served-bytes", "1000") as ready:
        port, token = ready["port"], ready["token"]
        status, data = call(port, "POST", "/file", token=token, form={"file_path": "~/small.txt"})
        assert status == 200 and data == b"x" * 100
        status, data = call(port, "POST", "/file", token=token, form={"file_path": "~/big.txt"})
        assert status == 413 and "larger than 1000 bytes" in json.loads(data)["error"]
        assert call(port, "GET", "/read?path=" + urllib.parse.quote(str(home / "big.txt")), token=token)[0] == 413
        status, data = call(port, "POST", "/setup/download_file", token=token,
                            body={"url": (home / "big.txt").as_uri(), "path": "~/copy.txt"})
        assert status == 413 and not (home / "copy.txt").exists()


def test_paths_are_normalized_before_use(desktop: DesktopSession) -> None:
    home = Path(desktop.home)
    (home / "target.txt").write_text("found")
    with standalone_probe(desktop) as ready:
        port, token = ready["port"], ready["token"]
        status, data = call(port, "POST", "/file", token=token, form={"file_path": "~/no/such/dir/../../../target.txt"})
        assert status == 200 and data == b"found"  # a/../b is b, whether or not a exists
        status, data = call(port, "POST", "/file", token=token, form={"file_path": "~/target.txt\x00.png"})
        assert status == 400 and "NUL" in json.loads(data)["error"]
