"""Helpers for the judge-executor tests: executors with short limits and a host-invariants guard."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from plugins.judges.options import SandboxOptions
from plugins.judges.sandbox import SandboxExecutor

#: the runner gives sandboxes host uids from here up when the host runs as root
SANDBOX_UID_MIN = 100_000_000


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def make_executor(**options: Any) -> SandboxExecutor:
    defaults = {"wall_timeout_s": 3.0, "cpu_time_s": 3}
    return SandboxExecutor(SandboxOptions(**{**defaults, **options}))


def _status_field(pid: str, field: str) -> str | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def leftover_processes() -> list[str]:
    """Descendants of this test process, and any process running under a sandbox uid."""
    parents: dict[int, int] = {}
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        ppid = _status_field(pid, "PPid")
        if ppid is not None:
            parents[int(pid)] = int(ppid)
        uid = _status_field(pid, "Uid")
        if uid and os.geteuid() == 0 and int(uid.split()[0]) >= SANDBOX_UID_MIN:
            found.append(f"{pid} (sandbox uid {uid.split()[0]})")
    me = os.getpid()
    for pid in parents:
        ancestor, hops = parents.get(pid), 0
        while ancestor and ancestor != me and hops < 64:
            ancestor, hops = parents.get(ancestor), hops + 1
        if ancestor == me:
            found.append(f"{pid} (child of the test)")
    return found


def _workdirs() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("scalecua-sandbox-")}


def _mounts() -> str:
    return Path("/proc/self/mounts").read_text()


def _digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


@pytest.fixture
def host_guard() -> Iterator[None]:
    """After the test: no process left behind, no scratch dirs or mounts left, /etc/shadow unchanged."""
    before_dirs, before_mounts, before_shadow = _workdirs(), _mounts(), _digest("/etc/shadow")
    yield
    deadline = time.monotonic() + 3.0
    while leftover_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftover_processes() == []
    assert _workdirs() - before_dirs == set()
    assert _mounts() == before_mounts
    assert _digest("/etc/shadow") == before_shadow


@pytest.fixture(scope="session")
def executor() -> SandboxExecutor:
    """Validation off: these tests prove the sandbox itself contains what the validator would refuse."""
    return make_executor(validate_code=False)
