"""``container-desktop``: our own desktop image in containers, pooled; reset = a fresh container.

Each container runs one supervised session (Xvfb, D-Bus, a window manager,
the probe on port 5000 behind a per-container token; see
:mod:`environments.containers.inside`). The image is built locally by
``python -m environments.containers.build`` (no registry); users without
KVM get real desktops that boot in seconds.

With the default ``episodes_per_container: 1`` every episode gets a container
straight from the image (the warm pool hides the boot). With more, a used
container is cleaned in place between episodes instead: the desktop's apps
are killed and the home directory is restored from the image's template.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import structlog
from pydantic import Field

from core.errors import EnvironmentFailure
from core.types import Action, ActionType, Observation
from environments.client import act_and_observe
from environments.containers.backend import (
    ContainerBackend,
    ContainerEnvironment,
    ContainerPoolOptions,
    check_image,
)
from environments.containers.engine import ContainerSpec, Engine
from environments.containers.pool import Slot

log = structlog.get_logger(__name__)

DEFAULT_IMAGE = "localhost/scalecua/container-desktop:full"


class ContainerDesktopOptions(ContainerPoolOptions):
    """Options of the ``container-desktop`` backend (engines and pool options are shared with osworld-docker)."""

    image: str = Field(DEFAULT_IMAGE, description="the desktop image (python -m environments.containers.build)")
    width: int = Field(1280, ge=320, le=7680, description="screen width in pixels (the paper: 1280)")
    height: int = Field(800, ge=200, le=4320, description="screen height in pixels (the paper: 800)")
    depth: int = Field(24, description="colour depth of the X screen")
    window_manager: str | None = Field(None, description="window manager binary in the image (default: the image's)")
    accessibility: bool = Field(False, description="let apps export AT-SPI trees (slower app start)")
    startup_timeout_s: float = Field(60.0, gt=0, description="limit for one container to boot and answer")
    shm_size: str | None = Field("512m", description="/dev/shm size (Chromium needs more than the default 64m)")
    probe_routes: list[str] = Field(default_factory=list, description="modules whose ROUTES the probe also serves "
                                                                      "(the image must carry them)")


class ContainerDesktopBackend(ContainerBackend):
    kind = "container-desktop"

    def __init__(self, options: ContainerDesktopOptions):
        self.options: ContainerDesktopOptions = options
        super().__init__(options)

    @property
    def screen_size(self) -> tuple[int, int]:
        return self.options.width, self.options.height

    @property
    def startup_timeout_s(self) -> float:
        return self.options.startup_timeout_s

    def preflight(self, engine: Engine) -> None:
        check_image(engine, self.options.image,
                    "build it with `python -m environments.containers.build --variant full` on that machine "
                    "(or copy it there: `podman save IMAGE | ssh HOST podman load`)")

    def container_spec(self, engine: Engine, name: str, token: str | None) -> ContainerSpec:
        o = self.options
        environment = {"SCALECUA_ENV_ID": name, "SCALECUA_SCREEN": f"{o.width}x{o.height}x{o.depth}",
                       "SCALECUA_PROBE_TOKEN": token or "", "SCALECUA_STARTUP_TIMEOUT": str(o.startup_timeout_s)}
        if o.window_manager:
            environment["SCALECUA_WINDOW_MANAGER"] = o.window_manager
        if o.accessibility:
            environment["SCALECUA_ACCESSIBILITY"] = "1"
        if o.probe_routes:
            environment["SCALECUA_PROBE_ROUTES"] = ",".join(o.probe_routes)
        return ContainerSpec(
            image=o.image, name=name, labels=self.labels(), environment=environment, port=self.port,
            ulimits=dict(o.ulimits), runtime=o.runtime, network=o.network, memory=o.memory, cpus=o.cpus,
            shm_size=o.shm_size,
        )

    async def after_ready(self, slot: Slot) -> None:
        slot.screen_size = self.screen_size

    @staticmethod
    def _ready_line(logs: str) -> dict[str, Any]:
        for line in logs.splitlines():
            line = line.strip()
            if line.startswith("{") and '"pids"' in line:
                try:
                    return dict(json.loads(line))
                except ValueError:
                    continue
        return {}

    async def soft_reset(self, slot: Slot) -> None:
        if not slot.info:  # the session's ready line names its own processes (read once, when first needed)
            # the whole log: the line comes first, and a long first episode (or a slow machine's many health
            # checks) can push it out of any fixed tail
            slot.info = self._ready_line(await asyncio.to_thread(slot.engine.logs, slot.container_id, tail="all",
                                                                 stderr=False))
        if not slot.info.get("pids"):
            raise EnvironmentFailure(f"{slot.name}: the container log has no session ready line, so its apps cannot "
                                     "be told from the desktop's own processes; use episodes_per_container: 1")
        keep = ",".join(str(pid) for pid in slot.info["pids"].values())
        result = await slot.client.execute(
            ["python3", "-m", "environments.containers.inside", "reset", "--env-id", slot.name, "--keep", keep],
            timeout=60,
        )
        if result.get("returncode") != 0:
            raise EnvironmentFailure(f"{slot.name}: cleaning the container for its next episode failed: "
                                     f"{str(result.get('error') or result.get('output'))[:500]}")

    async def prepare_episode(self, slot: Slot) -> None:
        # input state survives the apps: release anything held, put the cursor in the middle
        await slot.client.execute(["xdotool", "keyup", "shift", "ctrl", "alt", "super", "mouseup", "1"], timeout=10)
        await slot.client.act(Action(type=ActionType.MOUSE_MOVE, x=500, y=500))

    async def perform(self, env: ContainerEnvironment, action: Action) -> Observation:
        return await act_and_observe(action, env.client.act, env.capture, settle_s=self.options.settle_s)


def create_backend(options: ContainerDesktopOptions, **_: Any) -> ContainerDesktopBackend:
    return ContainerDesktopBackend(options)
