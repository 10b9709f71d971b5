"""Helpers for the judge-executor tests: executors with short limits and a host-invariants guard."""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from plugins.judges.options import SandboxOptions
from plugins.judges.sandbox import SandboxExecutor

#: every executor made here keeps its per-call directories under this one, so leftovers are ours alone
WORK_DIR = tempfile.mkdtemp(prefix="scalecua-judges-tests-")
PR_SET_CHILD_SUBREAPER = 36


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def make_executor(**options: Any) -> SandboxExecutor:
    # generous limits, so no judge that ends fails for being slow on a loaded machine; the tests about limits
    # set small ones for judges that never end
    defaults = {"wall_timeout_s": 60.0, "cpu_time_s": 60, "work_dir": WORK_DIR}
    return SandboxExecutor(SandboxOptions(**{**defaults, **options}))


@dataclass
class DesktopHandle:
    """The attributes of a live environment that judge executors read (env_id, isolated, home_dir, client)."""

    env_id: str
    isolated: bool
    home_dir: Path | None
    client: Any = None


def _status_field(pid: str, field: str) -> str | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def leftover_processes() -> list[str]:
    """Live descendants of this test process (orphans come back to it: it is a child subreaper)."""
    parents: dict[int, int] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        ppid = _status_field(pid, "PPid")
        if ppid is not None:
            parents[int(pid)] = int(ppid)
    me, found = os.getpid(), []
    for pid in parents:
        ancestor, hops = parents.get(pid), 0
        while ancestor and ancestor != me and hops < 64:
            ancestor, hops = parents.get(ancestor), hops + 1
        if ancestor != me:
            continue
        if (_status_field(str(pid), "State") or "").startswith("Z") and parents[pid] == me:
            try:
                os.waitpid(pid, os.WNOHANG)  # an orphan handed to us that already exited
            except ChildProcessError:
                pass
            continue
        found.append(f"{pid} ({_status_field(str(pid), 'Name')}, {_status_field(str(pid), 'State')})")
    return found


@pytest.fixture(scope="session", autouse=True)
def _reap_orphans() -> Iterator[None]:
    """Make this process the subreaper of everything it starts, so no escaped process goes unnoticed."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    yield
    shutil.rmtree(WORK_DIR, ignore_errors=True)


def _workdirs() -> set[str]:
    return set(os.listdir(WORK_DIR))


def _mounts() -> list[str]:
    """Host mounts that belong to a sandbox (there must never be any: they live in private namespaces)."""
    return [line for line in Path("/proc/self/mounts").read_text().splitlines() if "scalecua-sandbox-" in line]


def _digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


@pytest.fixture
def host_guard() -> Iterator[None]:
    """After the test: no process left behind, no scratch dirs or mounts left, /etc/shadow unchanged."""
    before_shadow = _digest("/etc/shadow")
    # descendants that predate the test (e.g. another area's session-wide podman service) are not ours
    existing = {entry.split(" ", 1)[0] for entry in leftover_processes()}

    def new_processes() -> list[str]:
        return [entry for entry in leftover_processes() if entry.split(" ", 1)[0] not in existing]

    yield
    deadline = time.monotonic() + 30.0  # bounds a hang only: killed processes may take a while to be reaped
    while new_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert new_processes() == [], "processes left behind 30 s after the test"
    assert _workdirs() == set()
    assert _mounts() == []
    assert _digest("/etc/shadow") == before_shadow


@pytest.fixture(scope="session")
def executor() -> SandboxExecutor:
    """Validation off: these tests prove the sandbox itself contains what the validator would refuse."""
    return make_executor(validate_code=False)
