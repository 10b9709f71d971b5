"""One container engine reached through the ``docker`` SDK: Docker, or podman's Docker-compatible socket.

A backend gets a list of :class:`EngineHost` entries, so one pool can span
machines (``unix://`` for this host, ``ssh://`` or ``tcp://`` for others).
Nothing here scans host ports: a desktop is reached either at its container's
own address on the engine's network (``container_ip``; routable from the
engine's host) or through a port the engine assigns itself (``published``;
works across machines).

Every container carries labels naming its backend, its pool and its owner
(``host:pid:start-time``), so :meth:`Engine.sweep_orphans` removes what a dead
process left behind, and nothing else.

The SDK is blocking; the pool calls these methods through
``asyncio.to_thread``.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.errors import ScaleCUAError
from environments.containers.bridge import pin_bridge_of
from environments.containers.podman_service import PodmanService

log = structlog.get_logger(__name__)

LABEL_BACKEND = "scalecua.backend"
LABEL_POOL = "scalecua.pool"
LABEL_OWNER = "scalecua.owner"
#: sockets tried, in order, when no host is configured and DOCKER_HOST is unset
API_VERSION = "1.41"
DEFAULT_SOCKETS = ("/run/podman/podman.sock", "/var/run/docker.sock", "/run/user/{uid}/podman/podman.sock")


class EngineError(ScaleCUAError):
    """The engine refused or failed a request; the message names the engine and the fix."""


class EngineHost(BaseModel):
    """One container engine a pool may place containers on."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="engine API: unix:///run/podman/podman.sock, tcp://10.0.0.5:2375, ssh://user@host")
    max_containers: int | None = Field(None, ge=1, description="most containers of this pool on this engine")
    access: Literal["auto", "container_ip", "published"] = Field(
        "auto",
        description="how desktops are reached: the container's own address on the engine network (container_ip), "
        "or a port the engine assigns (published); auto: container_ip for unix sockets, published otherwise",
    )
    address: str | None = Field(
        None, description="address of this engine's machine for published ports (default: the URL's host, or 127.0.0.1)"
    )

    @property
    def is_local(self) -> bool:
        return self.url.startswith("unix://")

    @property
    def resolved_access(self) -> str:
        if self.access != "auto":
            return self.access
        return "container_ip" if self.is_local else "published"

    @property
    def published_address(self) -> str:
        if self.address:
            return self.address
        return "127.0.0.1" if self.is_local else (urlsplit(self.url).hostname or "127.0.0.1")


def start_socket_command(socket_path: str = "/run/podman/podman.sock") -> str:
    """The shell command that serves podman's API on ``socket_path`` (podman creates the socket, not its folder)."""
    return f"mkdir -p {os.path.dirname(socket_path)} && podman system service --time=0 unix://{socket_path} &"


def existing_host_url() -> str | None:
    """``DOCKER_HOST``, else the first engine socket that exists on this machine, else None."""
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    for candidate in DEFAULT_SOCKETS:
        path = candidate.format(uid=os.getuid())
        if Path(path).exists():
            return f"unix://{path}"
    return None


def engine_hosts(hosts: list[EngineHost], *, runtime: str | None = None
                 ) -> tuple[list[EngineHost], PodmanService | None]:
    """``hosts``; when none are configured, this machine's engine: ``DOCKER_HOST`` or an engine socket that exists,
    else podman's API served for this run on a private socket (returned: its owner stops it when it closes)."""
    if hosts:
        return list(hosts), None
    url = existing_host_url()
    if url is not None:
        return [EngineHost(url=url)], None
    if shutil.which("podman") is None:
        raise ScaleCUAError(
            "no container engine found: none of " + ", ".join(s.format(uid=os.getuid()) for s in DEFAULT_SOCKETS)
            + " exists, DOCKER_HOST is unset and podman is not installed. Install podman (`apt-get install podman "
            "runc`; the backend then serves its API for the run itself), start an engine's socket "
            f"(`{start_socket_command()}`), or list engines in the backend's `hosts` option."
        )
    service = PodmanService.private(runtime=runtime).start()
    log.info("no container engine socket on this machine: serving podman's API for this run", url=service.url)
    return [EngineHost(url=service.url)], service


def _process_start_ticks(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "?"


def owner_label() -> str:
    """``hostname:pid:start-ticks`` of this process (a recycled pid has another start time)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start_ticks(os.getpid())}"


def owner_is_gone(label: str) -> bool:
    """True when ``label`` names a process of this machine that no longer runs."""
    try:
        hostname, pid, ticks = label.rsplit(":", 2)
    except ValueError:
        return False
    if hostname != socket.gethostname() or not pid.isdigit():
        return False  # another machine's process: not ours to judge
    return _process_start_ticks(int(pid)) != ticks


@dataclass
class ContainerSpec:
    """What to start; engine-neutral (Docker and podman understand the same fields)."""

    image: str
    name: str
    labels: dict[str, str]
    command: list[str] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    #: container port the desktop's server listens on
    port: int = 5000
    ulimits: dict[str, int] = field(default_factory=dict)
    runtime: str | None = None
    network: str | None = None
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    cap_add: list[str] = field(default_factory=list)
    memory: str | None = None
    cpus: float | None = None
    shm_size: str | None = None
    #: also publish these container ports (engine-assigned host ports), e.g. OSWorld's VNC 8006
    extra_ports: list[int] = field(default_factory=list)


class Engine:
    """A connection to one engine (``host``); blocking calls."""

    def __init__(self, host: EngineHost, *, timeout_s: float = 120.0):
        self.host = host
        self.timeout_s = timeout_s
        self._client: Any = None
        self.kind = "unknown"
        self.version = ""

    @property
    def url(self) -> str:
        return self.host.url

    @property
    def client(self) -> Any:
        if self._client is None:
            self.open()
        return self._client

    def open(self) -> Engine:
        """Connect and ping; a clear error when the engine cannot be reached."""
        import docker  # heavy: only when an engine is used

        try:
            # a fixed API version (Docker >= 20.10, podman >= 3): "auto" costs a /version call, which podman
            # answers in seconds
            client = docker.DockerClient(base_url=self.url, version=API_VERSION, timeout=int(self.timeout_s),
                                         max_pool_size=64, use_ssh_client=self.url.startswith("ssh://"))
            pong = client.api._get(client.api._url("/_ping"))
            pong.raise_for_status()
        except Exception as exc:  # docker raises many kinds here: all mean "unreachable"
            hint = (f"start it with `{start_socket_command(self.url.removeprefix('unix://'))}` (or start the Docker "
                    "daemon)" if self.host.is_local else "check that the engine runs and the URL")
            raise EngineError(f"container engine {self.url} is unreachable ({exc}); {hint}") from exc
        server = pong.headers.get("Server", "")
        self.kind = "podman" if "Libpod-Api-Version" in pong.headers or "libpod" in server.lower() else "docker"
        self.version = pong.headers.get("Libpod-Api-Version") or server.split("/", 1)[-1].split(" ")[0]
        self._client = client
        return self

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- images --------------------------------------------------------------

    def has_image(self, image: str) -> bool:
        import docker.errors

        try:
            self.client.images.get(image)
            return True
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code == 404:
                return False
            raise EngineError(f"{self.url}: cannot inspect image {image}: {exc.explanation or exc}") from exc

    def image_labels(self, image: str) -> dict[str, str]:
        """The labels of ``image`` (empty when it has none; EngineError when it is missing)."""
        import docker.errors

        try:
            return dict(self.client.images.get(image).labels or {})
        except docker.errors.DockerException as exc:
            raise EngineError(f"{self.url}: cannot inspect image {image}: {exc}") from exc

    # -- containers ------------------------------------------------------------

    def run(self, spec: ContainerSpec) -> str:
        """Create and start a container; returns its id."""
        import docker.errors
        from docker.types import Ulimit

        access = self.host.resolved_access
        publish_ip = "127.0.0.1" if self.host.is_local else "0.0.0.0"
        ports: dict[str, Any] = {}
        if access == "published":
            ports[f"{spec.port}/tcp"] = (publish_ip, None)  # None: the engine picks a free host port
        for extra in spec.extra_ports:
            ports[f"{extra}/tcp"] = (publish_ip, None)
        kwargs: dict[str, Any] = {
            "image": spec.image, "command": spec.command, "name": spec.name, "labels": spec.labels, "detach": True,
            "environment": spec.environment,
            "ulimits": [Ulimit(name=n, soft=v, hard=v) for n, v in spec.ulimits.items()],
            "volumes": spec.volumes or None, "devices": spec.devices or None, "cap_add": spec.cap_add or None,
            "ports": ports or None, "mem_limit": spec.memory, "shm_size": spec.shm_size,
            "nano_cpus": int(spec.cpus * 1e9) if spec.cpus else None,
        }
        if spec.runtime:
            kwargs["runtime"] = spec.runtime
        if spec.network:
            kwargs["network"] = spec.network
        try:
            container = self.client.containers.run(**{k: v for k, v in kwargs.items() if v is not None})
        except docker.errors.ImageNotFound as exc:
            raise EngineError(f"{self.url}: image {spec.image} not found ({exc.explanation or exc})") from exc
        except docker.errors.APIError as exc:
            self.remove(spec.name)  # created but not started: do not leave it behind
            raise EngineError(f"{self.url}: cannot start container {spec.name}: {exc.explanation or exc}") from exc
        return str(container.id)

    def address(self, container_id: str, port: int) -> tuple[str, int]:
        """Where this machine reaches ``port`` of the container."""
        attrs = self.client.api.inspect_container(container_id)
        settings = attrs.get("NetworkSettings") or {}
        if self.host.resolved_access == "published":
            bindings = (settings.get("Ports") or {}).get(f"{port}/tcp") or []
            for binding in bindings:
                if binding.get("HostPort"):
                    return self.host.published_address, int(binding["HostPort"])
            raise EngineError(f"{self.url}: container {container_id[:12]} has no published port for {port}/tcp")
        networks = list((settings.get("Networks") or {}).values())
        for gateway in {settings.get("Gateway")} | {n.get("Gateway") for n in networks}:
            if gateway and self.host.is_local:  # a bridge on this machine: its MAC must not move (see bridge.py)
                pin_bridge_of(gateway)
        for address in [settings.get("IPAddress")] + [n.get("IPAddress") for n in networks]:
            if address:
                return address, port
        raise EngineError(
            f"{self.url}: container {container_id[:12]} has no IP address on a network (host network or none?); "
            "set access: published for this host"
        )

    def published_ports(self, container_id: str) -> dict[int, int]:
        """Container port -> engine-assigned host port, for every published port."""
        settings = self.client.api.inspect_container(container_id).get("NetworkSettings") or {}
        out = {}
        for key, bindings in (settings.get("Ports") or {}).items():
            for binding in bindings or []:
                if binding.get("HostPort"):
                    out[int(key.split("/")[0])] = int(binding["HostPort"])
                    break
        return out

    def state(self, container_id: str) -> str | None:
        """``running``, ``exited``, ... or None when the container is gone."""
        import docker.errors

        try:
            return str(self.client.api.inspect_container(container_id)["State"]["Status"])
        except docker.errors.NotFound:
            return None

    def states(self, labels: dict[str, str]) -> dict[str, str]:
        """Container id -> status of every container carrying ``labels`` (one request)."""
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        return {c["Id"]: str(c.get("State", "")).lower() for c in self.client.api.containers(all=True, filters=filters)}

    def logs(self, container_id: str, *, tail: int | str = 50, stdout: bool = True, stderr: bool = True) -> str:
        """The container's output: the last ``tail`` lines, or all of it with ``tail="all"``."""
        import docker.errors

        try:
            data = self.client.api.logs(container_id, stdout=stdout, stderr=stderr, tail=tail)
        except docker.errors.APIError:
            return ""
        return data.decode(errors="replace") if isinstance(data, bytes) else str(data)

    def logs_after_exit(self, container_id: str, *, tail: int = 50, timeout_s: float = 10.0) -> str:
        """The log of a container that stopped, once the engine has it: waits (up to ``timeout_s``) for the
        container to be exited, then for its log to be non-empty (the engine's log writer may still be draining
        the container's output when its state already changed)."""
        import docker.errors
        import requests

        deadline = time.monotonic() + timeout_s
        try:
            self.client.api.wait(container_id, timeout=max(1, int(timeout_s)))
        except (docker.errors.APIError, requests.exceptions.RequestException):
            pass  # gone, or still not exited at the deadline: read what there is
        while True:
            text = self.logs(container_id, tail=tail)
            if text.strip() or time.monotonic() >= deadline or self.state(container_id) is None:
                return text
            time.sleep(0.1)

    def kill(self, container_id: str) -> None:
        import docker.errors

        try:
            self.client.api.kill(container_id)
        except docker.errors.APIError:
            pass  # already stopped or gone

    def remove(self, container_id: str) -> None:
        """Force-remove (kill first); a container that is already gone is fine."""
        import docker.errors

        try:
            self.client.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 404 and "no such container" not in str(exc).lower():
                log.warning("container removal failed", engine=self.url, container=container_id[:12], error=str(exc))

    def sweep_orphans(self) -> list[str]:
        """Remove containers whose owning process (on this machine) is gone; returns their names."""
        removed = []
        for c in self.client.api.containers(all=True, filters={"label": [LABEL_OWNER]}):
            owner = (c.get("Labels") or {}).get(LABEL_OWNER, "")
            if owner_is_gone(owner):
                self.remove(c["Id"])
                removed.extend(n.lstrip("/") for n in c.get("Names") or [c["Id"][:12]])
        if removed:
            log.info("removed containers of dead processes", engine=self.url, containers=removed)
        return removed
