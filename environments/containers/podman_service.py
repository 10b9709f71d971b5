"""Serve podman's Docker-compatible API on a socket of our own (``podman system service``).

For machines without a Docker engine (CI, this project's development
machines): the backends then reach podman through the ``docker`` SDK at
``unix://<socket>``. The service dies with the process that started it.
A container backend with no engine configured and none running starts one for
its run itself (:func:`environments.containers.engine.engine_hosts`):
:meth:`PodmanService.private` puts its socket into a fresh directory that
:meth:`PodmanService.stop` removes again.

    with PodmanService(Path("/tmp/scalecua-podman.sock"), runtime="runc") as service:
        options = {"hosts": [service.url], ...}
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from core.errors import ScaleCUAError

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class PodmanService:
    """``podman [--runtime R] system service --time=0 unix://SOCKET`` as a child process."""

    def __init__(self, socket_path: Path, *, runtime: str | None = None, log_path: Path | None = None,
                 config: Path | None = None):
        self.socket_path = Path(socket_path)
        self.runtime = runtime
        self.config = config  # a containers.conf for the service (CONTAINERS_CONF), e.g. from fitted_ulimits_conf
        self.log_path = log_path or self.socket_path.with_suffix(".log")
        self.process: subprocess.Popen[bytes] | None = None
        self._private_dir: Path | None = None

    @classmethod
    def private(cls, *, runtime: str | None = None) -> PodmanService:
        """A service (not started yet) on a socket in a fresh directory of its own, removed by :meth:`stop`."""
        directory = Path(tempfile.mkdtemp(prefix="scalecua-podman-"))
        service = cls(directory / "podman.sock", runtime=runtime)
        service._private_dir = directory
        return service

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def start(self, timeout_s: float = 30.0) -> Self:
        if shutil.which("podman") is None:
            self.stop()  # a private directory goes again
            raise ScaleCUAError("podman is not installed: `apt-get install podman runc` (it serves the Docker API "
                                "the container backends use when no Docker engine runs)")
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        argv = ["podman", *(["--runtime", self.runtime] if self.runtime else []), "system", "service", "--time=0",
                self.url]
        with open(self.log_path, "ab") as log_file:
            env = {**os.environ, "CONTAINERS_CONF": str(self.config)} if self.config else None
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                                            env=env, preexec_fn=_die_with_parent)  # noqa: PLW1509 (before threads matter)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                reason = f"podman system service exited ({self.process.returncode}): {self._log_tail()}"
                self.stop()
                raise ScaleCUAError(reason)
            if self._accepts():
                return self
            time.sleep(0.05)
        reason = f"podman system service did not open {self.socket_path} within {timeout_s:g} s: {self._log_tail()}"
        self.stop()
        raise ScaleCUAError(reason)

    def _accepts(self) -> bool:
        if not self.socket_path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(self.socket_path))
                return True
            except OSError:
                return False

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-5:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.socket_path.unlink(missing_ok=True)
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: podman's own default open-file limit for containers (containers.conf ``default_ulimits`` unset)
PODMAN_DEFAULT_NOFILE = 1048576
SYSTEM_CONF = Path("/etc/containers/containers.conf")
#: the rlimits our container backends give each container (soft = hard; ContainerPoolOptions.ulimits)
CONTAINER_ULIMITS = {"nofile": 4096, "nproc": 16384}


def fitted_ulimits_conf(directory: Path) -> Path | None:
    """A containers.conf whose ``default_ulimits`` are our backends' (:data:`CONTAINER_ULIMITS`), for clients that create
    containers without ulimits of their own (OSWorld's docker provider), or None where podman's defaults fit.

    Where the hard open-file limit is below podman's default, runc cannot set the default and every such container
    fails to start ("error setting rlimit type 7: operation not permitted"). ``CONTAINERS_CONF`` replaces the
    system's file, so a machine that has one (or a caller that set ``CONTAINERS_CONF``) is told what to add instead.
    """
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if nofile == resource.RLIM_INFINITY or nofile >= PODMAN_DEFAULT_NOFILE:
        return None
    hard = {"nofile": nofile, "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[1]}
    fitted = {name: value if hard[name] == resource.RLIM_INFINITY else min(value, hard[name])
              for name, value in CONTAINER_ULIMITS.items()}
    limits = [f"{name}={value}:{value}" for name, value in fitted.items()]
    line = "default_ulimits = [" + ", ".join(f'"{limit}"' for limit in limits) + "]"
    if os.environ.get("CONTAINERS_CONF") or SYSTEM_CONF.exists():
        raise ScaleCUAError(
            f"this machine's hard open-file limit ({nofile}) is below podman's default for containers "
            f"({PODMAN_DEFAULT_NOFILE}), so containers created without ulimits fail to start; add `{line}` under "
            f"[containers] in {os.environ.get('CONTAINERS_CONF') or SYSTEM_CONF}")
    path = directory / "containers.conf"
    path.write_text(f"[containers]\n{line}\n")
    return path
