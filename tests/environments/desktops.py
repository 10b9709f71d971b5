"""What the real-desktop judge tests share: one local desktop for a test body, loopback HTTP servers."""

from __future__ import annotations

import contextlib
import functools
import http.server
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from core.interfaces import Environment
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions


@contextlib.asynccontextmanager
async def one_desktop(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[LocalDesktopBackend, Environment]]:
    """A pool of one local desktop (run as this user, short settle) and its environment, discarded after."""
    settings = {"work_dir": str(tmp_path / "envs"), "max_environments": 1, "desktop_user": None, "settle_s": 0.1,
                **options}
    pool = LocalDesktopBackend(LocalDesktopOptions(**settings))
    try:
        env = await pool.acquire()
        try:
            yield pool, env
        finally:
            await pool.release(env, discard=True)
    finally:
        await pool.close()


@contextlib.contextmanager
def serving(handler: Any) -> Iterator[str]:
    """``handler`` behind a threading HTTP server on a free loopback port; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serving_directory(root: Path) -> contextlib.AbstractContextManager[str]:
    return serving(functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root)))


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
