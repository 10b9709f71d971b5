"""Running commands for the probe without ever hanging.

``subprocess.run(timeout=...)`` can block forever when a command leaves a
background child holding its stdout (``xterm &`` in a shell): the child
inherits the pipe and ``communicate`` waits for EOF. Here the output is read by
threads, the command runs in its own process group (killed as a whole on
timeout), and once the command itself has exited, stragglers holding the pipe
get a short grace period and are then left alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

AFTER_EXIT_GRACE_S = 0.5
MAX_OUTPUT_BYTES = 16 << 20


@dataclass
class CommandResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def _reader(stream, sink: bytearray) -> None:  # type: ignore[no-untyped-def]
    try:
        for chunk in iter(lambda: stream.read1(65536), b""):
            if len(sink) < MAX_OUTPUT_BYTES:
                sink.extend(chunk[: MAX_OUTPUT_BYTES - len(sink)])
    except (OSError, ValueError):
        pass  # the pipe was closed under us (after a kill): keep what we have


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(
    argv: Sequence[str] | str,
    *,
    shell: bool = False,
    timeout: float,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    merge_stderr: bool = False,
    as_user: Mapping[str, Any] | None = None,
) -> CommandResult:
    """Run to completion or ``timeout``; a missing program raises FileNotFoundError. ``as_user``: Popen's
    ``user``/``group``/``extra_groups`` (the desktop's unprivileged user, see environments/desktop_user.py)."""
    proc = subprocess.Popen(
        argv,
        shell=shell,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,  # its own process group: a timeout kills the whole tree
        **(as_user or {}),
    )
    out, err = bytearray(), bytearray()
    readers = [threading.Thread(target=_reader, args=(proc.stdout, out), daemon=True)]
    if not merge_stderr:
        readers.append(threading.Thread(target=_reader, args=(proc.stderr, err), daemon=True))
    for thread in readers:
        thread.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc.pid)
        proc.wait()
    deadline = time.monotonic() + AFTER_EXIT_GRACE_S
    for thread in readers:
        thread.join(max(0.0, deadline - time.monotonic()))
    for stream in (proc.stdout, proc.stderr):
        if stream is not None and not any(t.is_alive() for t in readers):
            stream.close()
    return CommandResult(
        returncode=proc.returncode if not timed_out else -1,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        timed_out=timed_out,
    )


class Launcher:
    """Starts programs that outlive the request (``/setup/launch``) and reaps them when they exit."""

    def __init__(self, cwd: str, env: Mapping[str, str], as_user: Mapping[str, Any] | None = None):
        self.cwd = cwd
        self.env = dict(env)
        self.as_user = dict(as_user or {})
        self._children: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()

    def launch(self, argv: Sequence[str] | str, *, shell: bool = False) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv,
            shell=shell,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **self.as_user,
        )
        with self._lock:
            self._children = [c for c in self._children if c.poll() is None]  # reap the ones that ended
            self._children.append(proc)
        return proc

    def reap(self) -> None:
        with self._lock:
            self._children = [c for c in self._children if c.poll() is None]

    def terminate_all(self, grace_s: float = 2.0) -> None:
        with self._lock:
            children, self._children = self._children, []
        for child in children:
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + grace_s
        for child in children:
            try:
                child.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
