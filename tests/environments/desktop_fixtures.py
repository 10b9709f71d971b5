"""A real desktop for tests: one supervised session (Xvfb + openbox + the probe) per test module.

Import the fixture into a test module (``from tests.environments.desktop_fixtures import desktop``);
pytest then starts the session once for that module and stops it afterwards.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import pytest

from environments import desktop_user
from environments import display as display_mod
from environments.client import EnvironmentClient

T = TypeVar("T")


@dataclass
class DesktopSession:
    env_id: str
    display: str
    port: int
    token: str | None
    home: Path
    pids: dict[str, int]
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kwargs: Any) -> EnvironmentClient:
        return EnvironmentClient(self.url, self.token, **kwargs)

    def run(self, body: Callable[[EnvironmentClient], Awaitable[T]]) -> T:
        """Run ``body(client)`` in a fresh event loop with a fresh client."""

        async def main() -> T:
            async with self.client() as client:
                return await body(client)

        return asyncio.run(main())


def start_session(root: Path, *, token: str | None = None, extra_args: tuple[str, ...] = (), no_auth: bool = False,
                  user: str | None = None) -> DesktopSession:
    """``no_auth``: the probe serves without a token, as OSWorld's clients expect (``token`` is then None);
    ``user``: the desktop runs as that unprivileged user (we must be root; ``root`` must be reachable by it)."""
    env_id = f"test-{secrets.token_hex(4)}"
    token = None if no_auth else token or secrets.token_urlsafe(16)
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    args = [*extra_args, *(["--no-auth"] if no_auth else []), *(["--user", user] if user else [])]
    if user:
        desktop_user.chown_tree(home, desktop_user.lookup(user))
    env = {k: v for k, v in os.environ.items() if k != "SCALECUA_PROBE_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "environments.display", "--env-id", env_id, "--home", str(home),
         "--runtime-dir", str(root / "runtime"), *args],
        stdout=subprocess.PIPE, stderr=open(root / "session.log", "wb"),  # noqa: SIM115
        env={**env, "SCALECUA_PROBE_TOKEN": token} if token else env, start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    info = json.loads(line)
    assert "error" not in info, info
    return DesktopSession(env_id, info["display"], info["probe_port"], token, home, info["pids"], proc)


def stop_session(session: DesktopSession) -> None:
    if session.process.poll() is None:
        session.process.send_signal(signal.SIGTERM)
        try:
            session.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(session.process.pid, signal.SIGKILL)
            session.process.wait()
    display_mod.sweep(session.env_id, grace_s=0.5)


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    session = start_session(tmp_path_factory.mktemp("desktop"))
    try:
        yield session
    finally:
        stop_session(session)


#: the unprivileged user a root trainer's desktops run as (local-desktop's default desktop_user)
DESKTOP_USER = "scalecua-desktop"


@pytest.fixture(scope="module")
def osworld_desktop():  # type: ignore[no-untyped-def]
    """A desktop whose probe speaks OSWorld's protocol as OSWorld's own clients expect it: without a token, and,
    when the tests run as root, run by the unprivileged desktop user, as a root trainer's desktops are."""
    root = Path(tempfile.mkdtemp(prefix="scalecua-osworld-"))  # not under pytest's 0700 root: the user reaches it
    root.chmod(0o755)
    user = desktop_user.resolve(DESKTOP_USER) if os.geteuid() == 0 else None
    if user is not None:
        desktop_user.check_reachable(root, user)
    session = start_session(root, no_auth=True, user=user.name if user else None)
    try:
        yield session
    finally:
        stop_session(session)
        shutil.rmtree(root, ignore_errors=True)


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def tagged(env_id: str) -> list[int]:
    """Live (non-zombie) processes of an environment."""
    return [pid for pid in display_mod.tagged_processes(env_id) if display_mod.is_alive(pid)]


def http_call(port: int, token: str | None, method: str, path: str, body: bytes | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One raw HTTP exchange with a probe on loopback (``token``: sent as a bearer token; None: none sent)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    all_headers = {"Authorization": f"Bearer {token}"} if token else {}
    all_headers.update(headers or {})
    conn.request(method, path, body=body, headers=all_headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data
