"""``osworld-docker``: OSWorld's Ubuntu VM (``happysixd/osworld-docker``) in containers, pooled.

The container runs QEMU against the read-only ``Ubuntu.qcow2`` (mounted at
``/System.qcow2``) with upstream's settings (``RAM_SIZE``, ``CPU_CORES``,
``DISK_SIZE``, ``NET_ADMIN``, ``/dev/kvm``) and OSWorld's Flask server on port
5000 inside the VM. What differs from upstream's provider:

* no host-port scanning under a global lock: the VM is reached at the
  container's own address, or through a port the engine assigns;
* readiness is ``GET /screenshot`` polled with a deadline that fails at once
  when the container exits;
* a warm pool boots VMs ahead of episodes (upstream has no snapshots: every
  reset is a cold boot, minutes under KVM), recycles each after
  ``episodes_per_container`` episodes (the default 1 matches upstream; more
  reuses a VM *without* restoring it: only the next task's setup runs) and
  replaces dead ones;
* no KVM is an error unless ``allow_no_kvm`` (then a loud warning: software
  emulation is about 10x slower); a missing image or disk is an error that
  says how to get it.

Actions go as upstream's clients send them: pyautogui code through
``POST /execute`` (:mod:`environments.containers.pyautogui_code`).
"""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path
from typing import Any

import structlog
from pydantic import Field

from core.errors import ScaleCUAError
from core.types import Action, ActionType, Observation
from environments.client import ProbeError, act_and_observe
from environments.containers import pyautogui_code
from environments.containers.backend import (
    ContainerBackend,
    ContainerEnvironment,
    ContainerPoolOptions,
    check_image,
)
from environments.containers.engine import ContainerSpec, Engine
from environments.containers.osworld_harness import LABEL as OSWORLD_HARNESS_LABEL
from environments.containers.pool import Slot

log = structlog.get_logger(__name__)

VNC_PORT = 8006


class OSWorldDockerOptions(ContainerPoolOptions):
    """Options of the ``osworld-docker`` backend (engines and pool options are shared with container-desktop)."""

    image: str = Field("happysixd/osworld-docker", description="the VM runner image")
    vm_path: str | None = Field(None, description="Ubuntu.qcow2 on the engine's machine (mounted read-only)")
    ram_size: str = Field("4G", description="VM memory (upstream: 4G)")
    cpu_cores: int = Field(4, ge=1, description="VM vCPUs (upstream: 4)")
    disk_size: str = Field("32G", description="VM disk size (upstream: 32G)")
    kvm_device: str = Field("/dev/kvm", description="the KVM device on the engine's machine")
    allow_no_kvm: bool = Field(False, description="boot under software emulation when there is no KVM (~10x slower)")
    width: int = Field(1920, ge=320, description="the VM's screen width (OSWorld: 1920)")
    height: int = Field(1080, ge=200, description="the VM's screen height (OSWorld: 1080)")
    startup_timeout_s: float = Field(300.0, gt=0, description="limit for one VM to boot and answer (upstream: 300)")
    python: str = Field("python", description="interpreter in the VM that runs pyautogui (upstream: python)")
    publish_vnc: bool = Field(False, description="also publish the VM's noVNC page (port 8006) on an engine port")


class OSWorldDockerBackend(ContainerBackend):
    kind = "osworld-docker"

    def __init__(self, options: OSWorldDockerOptions):
        self.options: OSWorldDockerOptions = options
        self.kvm: dict[str, bool] = {}
        super().__init__(options)

    @property
    def screen_size(self) -> tuple[int, int]:
        return self.options.width, self.options.height

    @property
    def startup_timeout_s(self) -> float:
        return self.options.startup_timeout_s

    def uses_token(self) -> bool:
        return False  # OSWorld's server has no authentication (keep its port off untrusted networks)

    def preflight(self, engine: Engine) -> None:
        o = self.options
        if not o.vm_path:
            raise ScaleCUAError("osworld-docker: set vm_path to OSWorld's Ubuntu.qcow2 (download it once from the "
                                "Hugging Face dataset xlangai/ubuntu_osworld and unzip it)")
        if engine.host.is_local and not Path(o.vm_path).is_file():
            raise ScaleCUAError(f"osworld-docker: vm_path {o.vm_path} does not exist (download Ubuntu.qcow2 from the "
                                "Hugging Face dataset xlangai/ubuntu_osworld)")
        check_image(engine, o.image, f"pull it with `{engine.kind} pull {o.image}` where a registry is reachable, "
                    f"or load a saved copy (`{engine.kind} load -i osworld-docker.tar`)")
        if OSWORLD_HARNESS_LABEL in engine.image_labels(o.image):
            raise ScaleCUAError(
                f"osworld-docker: {o.image} on {engine.url} is ScaleCUA's osworld desktop tagged for OSWorld's own "
                "harness (python -m environments.containers.osworld_harness build), not OSWorld's VM runner. Run it "
                "with the container-desktop backend (image localhost/scalecua/container-desktop:osworld), or load "
                "OSWorld's image under that name again")
        if not engine.host.is_local:
            self.kvm[engine.url] = True  # another machine's /dev/kvm: the engine reports it if it is missing
            return
        has_kvm = os.path.exists(o.kvm_device) and os.access(o.kvm_device, os.R_OK | os.W_OK)
        self.kvm[engine.url] = has_kvm
        if has_kvm:
            return
        if not o.allow_no_kvm:
            raise ScaleCUAError(
                f"osworld-docker: no usable KVM device ({o.kvm_device}) on {engine.url}'s machine. OSWorld VMs under "
                "software emulation boot and run about 10x slower. Enable KVM (kvm_intel/kvm_amd module, "
                "nested virtualization, access to /dev/kvm), or set allow_no_kvm: true to run anyway."
            )
        message = (f"osworld-docker: NO KVM on {engine.url} ({o.kvm_device} missing): the VMs run under software "
                   "emulation, about 10x slower; expect minutes per boot and slow steps")
        log.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=2)

    def container_spec(self, engine: Engine, name: str, token: str | None) -> ContainerSpec:
        o = self.options
        environment = {"DISK_SIZE": o.disk_size, "RAM_SIZE": o.ram_size, "CPU_CORES": str(o.cpu_cores)}
        kvm = self.kvm.get(engine.url, False)
        if not kvm:
            environment["KVM"] = "N"
        assert o.vm_path is not None  # preflight
        return ContainerSpec(
            image=o.image, name=name, labels=self.labels(), environment=environment, port=self.port,
            volumes={str(Path(o.vm_path).resolve()) if engine.host.is_local else o.vm_path:
                     {"bind": "/System.qcow2", "mode": "ro"}},
            devices=[f"{o.kvm_device}:/dev/kvm:rwm"] if kvm else [], cap_add=["NET_ADMIN"],
            ulimits=dict(o.ulimits), runtime=o.runtime, network=o.network, memory=o.memory, cpus=o.cpus,
            extra_ports=[VNC_PORT] if o.publish_vnc else [],
        )

    async def after_ready(self, slot: Slot) -> None:
        width, height = await slot.client.screen_size()
        slot.screen_size = (width, height)
        if (width, height) != self.screen_size:
            log.warning("the VM's screen differs from the configured size; actions use the VM's", vm=slot.name,
                        vm_size=f"{width}x{height}", configured=f"{self.options.width}x{self.options.height}")
        if self.options.publish_vnc:
            ports = await asyncio.to_thread(slot.engine.published_ports, slot.container_id)
            if VNC_PORT in ports:
                slot.info["vnc"] = f"http://{slot.engine.host.published_address}:{ports[VNC_PORT]}"

    async def perform(self, env: ContainerEnvironment, action: Action) -> Observation:
        async def run(action: Action) -> dict[str, Any]:
            return {"output": await self._run(env, action)}

        return await act_and_observe(action, run, env.capture, settle_s=self.options.settle_s,
                                     refused=(ProbeError, ValueError))

    async def _run(self, env: ContainerEnvironment, action: Action) -> str | None:
        t = action.type
        if t == ActionType.WAIT:
            await asyncio.sleep(action.duration if action.duration is not None else 1.0)
            return None
        if t == ActionType.CURSOR_POSITION:
            x, y = await env.client.cursor_position()
            return f"cursor at ({x}, {y}) pixels"
        if t == ActionType.ANSWER:
            return f"answer: {action.text}"
        if t == ActionType.WRITE_FILE:
            path = action.path or ""
            if path.startswith("~"):
                path = self.desktop_home + path[1:]
            await env.client.upload_file(path, (action.content or "").encode())
            return f"wrote {len(action.content or '')} characters to {path}"
        argv = pyautogui_code.command(action, env.screen_size, self.options.python)
        if argv is None:
            return None
        result = await env.client.execute(argv, timeout=60 + (action.duration or 0))
        if result.get("returncode") not in (0, None) or result.get("status") == "error":
            # OSWorld's server answers a command that cannot run with {status, message} (a 500)
            reason = result.get("error") or result.get("message") or result.get("output") or "pyautogui failed"
            raise ValueError(str(reason)[-500:])
        return None


def create_backend(options: OSWorldDockerOptions, **_: Any) -> OSWorldDockerBackend:
    return OSWorldDockerBackend(options)
