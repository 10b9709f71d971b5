"""What both container backends share: options, the pooled environment, the backend around the pool.

Lifecycle of one desktop (the paper's Table 11: deploy / interact / clean):

* **deploy** — :meth:`ContainerBackend.launch` starts a container on the least
  loaded engine, finds its address (container IP or an engine-assigned port:
  no port scanning), and polls the desktop's ``GET /screenshot`` until it
  answers or the deadline passes (failing at once when the container exits).
  The :class:`~environments.containers.pool.WarmPool` does this ahead of time.
* **interact** — :class:`ContainerEnvironment` talks to the desktop only
  through :class:`~environments.client.EnvironmentClient` (the probe / OSWorld
  protocol). ``reset`` on a container that already ran its
  ``episodes_per_container`` episodes swaps in a fresh one from the pool.
* **clean** — ``release`` recycles the container (removed, a replacement
  boots) or, below the episode limit, returns it to the pool.

The agent protocol (system prompt, action parsing, judging) is local-desktop's. ``download_mirror`` is a
directory on this host (:mod:`environments.mirror`): setup reads mirrored files here and uploads them.
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import secrets
import time
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import EnvironmentFailure, FilesMissing, ScaleCUAError
from core.interfaces import Environment, EnvironmentBackend
from core.types import Action, Observation, Screenshot, Task
from environments.client import EnvironmentClient, ProbeConnectionError, ProbeError
from environments.containers.engine import (
    LABEL_BACKEND,
    LABEL_OWNER,
    LABEL_POOL,
    ContainerSpec,
    Engine,
    EngineError,
    EngineHost,
    engine_hosts,
    owner_label,
)
from environments.containers.pool import Slot, WarmPool
from environments.containers.podman_service import CONTAINER_ULIMITS
from environments.desktop_protocol import DesktopProtocol
from environments.mirror import LAYOUT, check_mirror
from environments.setup import SetupContext, SetupError, run_setup

log = structlog.get_logger(__name__)

T = TypeVar("T")


class ContainerDied(EnvironmentFailure):
    """The environment's container stopped (killed, crashed, out of memory)."""


class ContainerPoolOptions(BaseModel):
    """Options every container backend has (engines, pool, limits, the agent protocol)."""

    model_config = ConfigDict(extra="forbid")

    hosts: list[EngineHost] = Field(
        default_factory=list,
        description="container engines to place desktops on (strings are URLs); default: DOCKER_HOST or the "
        "local podman/docker socket, else podman's API served for the run on a private socket",
    )
    max_environments: int = Field(
        4, ge=1, le=1024,
        description="most containers alive at once: in use, warm, booting and being removed (size it by memory)",
    )
    warm: int = Field(1, ge=0, le=256, description="booted idle containers kept ready, as far as max_environments "
                      "leaves room beside those in use")
    episodes_per_container: int = Field(1, ge=1, description="episodes before a container is replaced (1: fresh "
                                        "container every episode)")
    max_parallel_starts: int = Field(2, ge=1, le=64, description="containers booting at once (cold starts are CPU-heavy)")
    health_interval_s: float = Field(5.0, gt=0, description="how often dead containers are looked for")
    max_start_failures: int = Field(3, ge=1, description="failed starts in a row before waiting episodes get the error")
    request_timeout_s: float = Field(60.0, gt=0, description="limit for one request to a desktop")
    reset_timeout_s: float = Field(300.0, gt=0, description="limit for one reset, setup steps included")
    setup_retries: int = Field(1, ge=0, description="extra attempts (on a fresh container) when setup fails or the desktop stops answering during reset")
    setup_failures: Literal["fail", "warn"] = Field("fail", description="a failing setup command fails the reset "
                                                    "(retried, never scored); warn: OSWorld's harness behaviour")
    settle_s: float = Field(0.3, ge=0, description="pause after an action before the screenshot")
    ulimits: dict[str, int] = Field(
        default_factory=lambda: dict(CONTAINER_ULIMITS),
        description="per-container rlimits (soft = hard); must not exceed the engine host's own hard limits",
    )
    runtime: str | None = Field(None, description="OCI runtime name, e.g. runc (default: the engine's)")
    network: str | None = Field(None, description="engine network to attach containers to (default: the engine's)")
    memory: str | None = Field(None, description="memory limit per container, e.g. 2g (default: none)")
    cpus: float | None = Field(None, gt=0, description="CPU limit per container (default: none)")
    observe_accessibility: bool = Field(False, description="put the AT-SPI tree into each observation")
    client_password: str = Field("password", description="value of the {CLIENT_PASSWORD} placeholder")
    allowed_apps: list[str] | None = Field(None, description="programs setup 'launch' steps may start (None: any)")
    action_format: Literal["tool_call", "pyautogui", "computer_13"] = Field(
        "tool_call", description="how the agent writes actions (tool_call: ours; the others: OSWorld's)"
    )
    scienceboard_actions: bool = Field(False, description="offer ScienceBoard's answer and write_file actions")
    system_prompt: str | None = Field(None, min_length=1, description="the agent's system prompt, replacing the "
                                      "default (the full action space); it should still say how to write actions")
    download_mirror: str | None = Field(
        None, description="a directory on this host (not in the containers) serving the http(s) files tasks fetch "
        f"(download steps, cloud_file gold files) instead of the network, laid out as {LAYOUT}; setup uploads "
        "them into the desktop. A file it lacks fails the reset with FilesMissing (null: the network)"
    )

    @field_validator("hosts", mode="before")
    @classmethod
    def _urls_are_hosts(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"url": v} if isinstance(v, str) else v for v in value]
        return value


class ContainerEnvironment(Environment):
    """An environment bound to one pooled container (swapped for a fresh one when its episodes are used up)."""

    isolated = True  # generated getters run inside it (in-environment judge executor)
    home_dir: Path | None = None  # the desktop's files are not on this host

    def __init__(self, backend: ContainerBackend, slot: Slot):
        self.backend = backend
        self.slot = slot

    @property
    def env_id(self) -> str:  # type: ignore[override]
        return self.slot.name

    @property
    def client(self) -> EnvironmentClient:  # type: ignore[override]
        return self.slot.client

    @property
    def screen_size(self) -> tuple[int, int]:  # type: ignore[override]
        return self.slot.screen_size or self.backend.screen_size

    @property
    def container_id(self) -> str:
        return self.slot.container_id

    # -- episodes --------------------------------------------------------------

    async def reset(self, task: Task) -> Observation:
        attempts = self.backend.options.setup_retries + 1
        for attempt in range(attempts):
            try:
                return await asyncio.wait_for(self._reset_once(task, fresh=attempt > 0),
                                              self.backend.options.reset_timeout_s)
            except TimeoutError:
                raise EnvironmentFailure(f"{self.env_id}: reset for task {task.id} exceeded "
                                         f"{self.backend.options.reset_timeout_s:g} s") from None
            except SetupError as exc:
                if attempt + 1 == attempts or FilesMissing.within(exc):  # a fresh container lacks them too
                    raise SetupError(exc.index, exc.step_type, f"task {task.id}: {exc.reason}") from exc
                log.warning("setup failed; retrying on a fresh container", env_id=self.env_id, task_id=task.id,
                            error=str(exc))
            except (ProbeConnectionError, ContainerDied) as exc:
                # the desktop itself stopped answering (a wedged or killed container, a stalled network path):
                # a fresh container is what a retry needs, the task is not at fault
                if attempt + 1 == attempts:
                    raise
                log.warning("the desktop stopped answering during reset; retrying on a fresh container",
                            env_id=self.env_id, task_id=task.id, error=str(exc))
        raise AssertionError("unreachable")

    async def _reset_once(self, task: Task, *, fresh: bool) -> Observation:
        if fresh or self.slot.dead or self.slot.episodes >= self.backend.options.episodes_per_container:
            await self._swap()
        elif self.slot.dirty:
            await self._guarded(self.backend.soft_reset(self.slot))
        self.slot.episodes += 1
        self.slot.dirty = True
        return await self._guarded(self._start_episode(task))

    async def _start_episode(self, task: Task) -> Observation:
        await self.backend.prepare_episode(self.slot)
        await run_setup(self.client, task.config, self.setup_context(task))
        if self.backend.options.settle_s:
            await asyncio.sleep(self.backend.options.settle_s)
        return await self.capture()

    async def _guarded(self, operation: Coroutine[Any, Any, T]) -> T:
        """Run ``operation``, abandoning it with an EnvironmentFailure as soon as the pool finds the container dead
        (a killed container's address may black-hole connections for a minute)."""
        slot = self.slot
        if slot.dead:
            operation.close()
            raise ContainerDied(f"{slot.name}: the container is dead; release it with discard=True")
        work = asyncio.ensure_future(operation)
        died = asyncio.ensure_future(slot.died.wait())
        try:
            await asyncio.wait({work, died}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            died.cancel()
        if work.done():
            return work.result()
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        raise ContainerDied(f"{slot.name}: the container died during the episode (found by the health check)")

    async def _swap(self) -> None:
        """Give the used container back (it is removed) and take a fresh one from the pool."""
        old = self.slot
        await self.backend.pool.give_back(old, reuse=False)
        self.slot = await self.backend.pool.take()
        log.debug("container swapped", old=old.name, new=self.slot.name)

    def setup_context(self, task: Task | None = None) -> SetupContext:
        task_dir = (task.metadata.get("task_dir") or getattr(task, "source_dir", None)) if task is not None else None
        o = self.backend.options
        return SetupContext(screen_size=self.screen_size, task_dir=Path(task_dir) if task_dir else None,
                            allowed_apps=o.allowed_apps, client_password=o.client_password,
                            home=self.backend.desktop_home, command_failures=o.setup_failures,
                            download_mirror=Path(o.download_mirror) if o.download_mirror else None)

    async def step(self, action: Action) -> Observation:
        self.slot.dirty = True
        return await self._guarded(self.backend.perform(self, action))

    async def observe(self) -> Observation:
        return await self._guarded(self.capture())

    async def capture(self) -> Observation:
        """The observation, for callers that already run under :meth:`_guarded`."""
        screenshot = Screenshot.from_png(await self.client.screenshot())
        tree = await self.client.accessibility_tree() if self.backend.options.observe_accessibility else None
        return Observation(screenshot=screenshot, accessibility_tree=tree)

    async def healthy(self) -> bool:
        if self.slot.dead:
            return False
        try:
            await asyncio.wait_for(self.client.screen_size(), 10)
        except (TimeoutError, ProbeError):
            return False
        return await asyncio.to_thread(self.slot.engine.state, self.slot.container_id) == "running"


class ContainerBackend(DesktopProtocol, EnvironmentBackend):
    """A warm pool of containers on one or more engines; subclasses say what to start and how to act."""

    #: the registered backend name (also the containers' backend label)
    kind: ClassVar[str]
    #: the desktop user's home inside the container ({HOME} in task files)
    desktop_home: ClassVar[str] = "/home/user"
    #: container port the desktop's server listens on
    port: ClassVar[int] = 5000

    def __init__(self, options: ContainerPoolOptions):
        if options.download_mirror:  # absolute: read on this host whatever the working directory
            mirror = check_mirror(options.download_mirror, self.kind)
            options = options.model_copy(update={"download_mirror": str(mirror)})
        self.options = options
        hosts, self.podman_service = engine_hosts(options.hosts, runtime=options.runtime)
        if self.podman_service is not None:  # after the pool's own atexit cleanup (registered below), which needs it
            atexit.register(self.podman_service.stop)
        self.engines = [Engine(host, timeout_s=max(120.0, options.request_timeout_s)) for host in hosts]
        try:
            for engine in self.engines:
                engine.open()
                self.preflight(engine)
                engine.sweep_orphans()
        except BaseException:
            for engine in self.engines:
                engine.close()
            self._stop_podman_service()
            raise
        self.pool_id = f"scalecua-{self.kind}-{uuid.uuid4().hex[:8]}"
        self.pool = WarmPool(
            self.engines, self.launch, name_prefix=self.pool_id, capacity=options.max_environments,
            warm=options.warm, health_interval_s=options.health_interval_s,
            max_parallel_starts=options.max_parallel_starts, max_start_failures=options.max_start_failures,
        )
        atexit.register(self.pool.remove_all_sync)  # a run that never awaited close() still cleans up
        log.info("container backend ready", backend=self.kind, pool=self.pool_id,
                 engines=[f"{e.kind} {e.version} at {e.url}" for e in self.engines])

    # -- what subclasses provide -----------------------------------------------------

    @property
    @abc.abstractmethod
    def screen_size(self) -> tuple[int, int]: ...

    @abc.abstractmethod
    def preflight(self, engine: Engine) -> None:
        """Raise a clear error when this engine cannot run the desktops (image missing, no KVM, ...)."""

    @abc.abstractmethod
    def container_spec(self, engine: Engine, name: str, token: str | None) -> ContainerSpec: ...

    @abc.abstractmethod
    async def perform(self, env: ContainerEnvironment, action: Action) -> Observation:
        """Execute ``action`` on the desktop and observe."""

    async def soft_reset(self, slot: Slot) -> None:
        """Clean a used container for its next episode (only when ``episodes_per_container`` > 1)."""

    async def prepare_episode(self, slot: Slot) -> None:
        """Called before each episode's setup steps."""

    async def after_ready(self, slot: Slot) -> None:
        """Called once the desktop answers (read what the container announced, its screen, ...)."""

    def uses_token(self) -> bool:
        return True

    def labels(self) -> dict[str, str]:
        return {LABEL_BACKEND: self.kind, LABEL_POOL: self.pool_id, LABEL_OWNER: owner_label()}

    # -- deploy ----------------------------------------------------------------------

    async def launch(self, engine: Engine, name: str) -> Slot:
        token = secrets.token_urlsafe(24) if self.uses_token() else None
        spec = self.container_spec(engine, name, token)
        container_id = await asyncio.to_thread(engine.run, spec)
        client: EnvironmentClient | None = None
        try:
            host, port = await asyncio.to_thread(engine.address, container_id, spec.port)
            url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
            client = EnvironmentClient(url, token, timeout=self.options.request_timeout_s)
            await self.wait_ready(engine, container_id, name, client)
            slot = Slot(name=name, container_id=container_id, engine=engine, client=client, url=url)
            await self.after_ready(slot)
            return slot
        except BaseException:
            if client is not None:
                await client.close()
            await asyncio.to_thread(engine.remove, container_id)
            raise

    @property
    @abc.abstractmethod
    def startup_timeout_s(self) -> float: ...

    async def wait_ready(self, engine: Engine, container_id: str, name: str, client: EnvironmentClient) -> None:
        """Poll ``GET /screenshot`` until it answers; fail at once if the container stops, or at the deadline."""
        deadline = time.monotonic() + self.startup_timeout_s
        last_error = "no answer yet"
        next_state_check = 0.0
        while time.monotonic() < deadline:
            if self.pool.closed:
                raise EngineError(f"{name}: the pool closed while it was booting")
            try:
                await asyncio.wait_for(client.screenshot(), 10)
                return
            except TimeoutError:
                last_error = "GET /screenshot took over 10 s"
            except ProbeError as exc:
                if exc.status_code in (401, 403):
                    raise EngineError(f"{name}: the desktop refused our token ({exc.reason})") from exc
                last_error = exc.reason
            if time.monotonic() >= next_state_check:
                state = await asyncio.to_thread(engine.state, container_id)
                if state != "running":
                    logs = await asyncio.to_thread(engine.logs_after_exit, container_id, tail=15)
                    raise EngineError(f"{name} on {engine.url} stopped while booting (state {state}). "
                                      f"Container log: {logs.strip()[-1500:]}")
                next_state_check = time.monotonic() + 1.0
            await asyncio.sleep(0.1)
        logs = await asyncio.to_thread(engine.logs, container_id, tail=15)
        raise EngineError(f"{name} on {engine.url}: the desktop did not answer within {self.startup_timeout_s:g} s "
                          f"(last error: {last_error}). Container log: {logs.strip()[-1500:]}")

    # -- the pool ----------------------------------------------------------------------

    async def prewarm(self, timeout_s: float = 300.0) -> None:
        """Boot the warm containers now and wait for them (otherwise the first acquire starts them)."""
        self.pool.start()
        await self.pool.wait_warm(timeout_s)

    async def acquire(self) -> ContainerEnvironment:
        slot = await self.pool.take()
        return self.environment(slot)

    def environment(self, slot: Slot) -> ContainerEnvironment:
        return ContainerEnvironment(self, slot)

    async def release(self, env: Environment, *, discard: bool = False) -> None:
        if not isinstance(env, ContainerEnvironment) or env.backend is not self:
            raise ValueError(f"environment {getattr(env, 'env_id', env)!r} does not belong to this backend")
        slot = env.slot
        reuse = (not discard and not slot.dead and slot.episodes < self.options.episodes_per_container
                 and await env.healthy())
        await self.pool.give_back(slot, reuse=reuse)

    async def close(self) -> None:
        try:
            await self.pool.close()
        finally:
            atexit.unregister(self.pool.remove_all_sync)
            for engine in self.engines:
                engine.close()
            await asyncio.to_thread(self._stop_podman_service)

    def _stop_podman_service(self) -> None:
        """Stop the podman API this backend started for its run (none when an engine was configured or running)."""
        if self.podman_service is not None:
            atexit.unregister(self.podman_service.stop)
            self.podman_service.stop()

    @property
    def size(self) -> int:
        return self.pool.alive


def check_image(engine: Engine, image: str, how_to_get_it: str) -> None:
    if not engine.has_image(image):
        raise ScaleCUAError(f"image {image} is not on the container engine {engine.url} ({engine.kind}); "
                            f"{how_to_get_it}")
