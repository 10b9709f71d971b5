"""``osworld-docker``: clear errors without the disk, the image or KVM; its request sequence against the probe.

OSWorld's VM image cannot run here (no registry to pull ``happysixd/osworld-docker`` from, no Ubuntu.qcow2),
so the sequence runs against ``osworld_standin/``: a real container started the way the backend starts the
VM image (disk mounted read-only, RAM/CPU/disk settings, NET_ADMIN, the KVM device, an engine-assigned port)
whose port 5000 speaks OSWorld's protocol through our probe on a real desktop, with actions executed by
the real pyautogui, and which records every request.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.commands import envcheck
from core.errors import ScaleCUAError
from core.pluginmanager import Plugins
from core.interfaces import JudgeServices
from environments.containers import pyautogui_code
from environments.containers.osworld_docker import OSWorldDockerBackend
from environments.containers.podman_service import PodmanService
from environments.tasks import load_bundled_tasks
from tests.containers.conftest import ULIMITS

pytestmark = [pytest.mark.containers, pytest.mark.slow]


@pytest.fixture
def qcow2(tmp_path: Path) -> Path:
    disk = tmp_path / "Ubuntu.qcow2"
    disk.write_bytes(b"QFI\xfb" + bytes(1020))
    return disk


def create(plugins: Plugins, podman: PodmanService, **options: Any) -> OSWorldDockerBackend:
    settings = {"hosts": [podman.url], "ulimits": ULIMITS, "runtime": "runc", **options}
    return plugins.registry("environment").create("osworld-docker", settings)


def test_without_a_disk_the_error_says_where_to_get_it(plugins: Plugins, podman_service: PodmanService,
                                                       tmp_path: Path) -> None:
    with pytest.raises(ScaleCUAError, match="set vm_path to OSWorld's Ubuntu.qcow2.*xlangai/ubuntu_osworld"):
        create(plugins, podman_service)
    with pytest.raises(ScaleCUAError, match=r"vm_path .*nowhere.qcow2 does not exist"):
        create(plugins, podman_service, vm_path=str(tmp_path / "nowhere.qcow2"))


def test_without_the_image_the_error_names_it_and_the_fix(plugins: Plugins, podman_service: PodmanService,
                                                          qcow2: Path) -> None:
    with pytest.raises(ScaleCUAError) as caught:
        create(plugins, podman_service, vm_path=str(qcow2), image="localhost/scalecua/no-such-osworld-image:1")
    message = str(caught.value)
    assert "localhost/scalecua/no-such-osworld-image:1 is not on the container engine" in message
    assert "podman pull" in message and podman_service.url in message


def test_without_kvm_it_refuses_unless_allowed_then_warns_loudly(plugins: Plugins, podman_service: PodmanService,
                                                                 standin_image: str, qcow2: Path,
                                                                 tmp_path: Path) -> None:
    absent = str(tmp_path / "kvm")
    with pytest.raises(ScaleCUAError, match="no usable KVM device.*allow_no_kvm: true"):
        create(plugins, podman_service, vm_path=str(qcow2), image=standin_image, kvm_device=absent)
    with pytest.warns(RuntimeWarning, match="NO KVM.*10x slower"):
        backend = create(plugins, podman_service, vm_path=str(qcow2), image=standin_image, kvm_device=absent,
                         allow_no_kvm=True)
    try:
        spec = backend.container_spec(backend.engines[0], "probe-spec", None)
        assert spec.environment["KVM"] == "N" and spec.devices == []  # upstream's software-emulation switch
    finally:
        asyncio.run(backend.close())


def test_request_sequence_against_the_probe_protocol(plugins: Plugins, podman_service: PodmanService,
                                                     standin_image: str, qcow2: Path) -> None:
    # /dev/null stands for the KVM device: the backend passes whatever device it is given as /dev/kvm
    backend = create(plugins, podman_service, image=standin_image, vm_path=str(qcow2), kvm_device="/dev/null",
                     ram_size="1G", cpu_cores=1, disk_size="8G", max_environments=1, warm=0, publish_vnc=True,
                     hosts=[{"url": podman_service.url, "access": "published"}], startup_timeout_s=120)
    task = load_bundled_tasks(ids=["os-make-executable"])[0]
    oracle = envcheck.oracle_of(task)

    async def episode() -> tuple[dict[str, Any], dict[str, Any], float, str]:
        env = await backend.acquire()
        try:
            async with httpx.AsyncClient(base_url=env.slot.url) as http:
                given = (await http.get("/standin")).json()
                await env.reset(task)
                for action in oracle:
                    await env.step(action)
                judgement = await backend.evaluate(env, task, judge=JudgeServices.of(plugins), last_action=oracle[-1])
                seen = (await http.get("/standin")).json()
            return given, seen, judgement.score, env.slot.url
        finally:
            await backend.release(env)
            await backend.close()

    given, seen, score, url = asyncio.run(episode())
    assert score == 1.0
    # how the container was started: upstream's settings, the disk read-only, the KVM device, NET_ADMIN
    assert given["env"] == {"RAM_SIZE": "1G", "CPU_CORES": "1", "DISK_SIZE": "8G", "KVM": None}
    assert given["qcow2"] == {"mounted": True, "read_only": True}
    assert given["kvm_device"] and given["net_admin"]
    # reached through a port the engine assigned (no scanning), not the container's 5000
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":5000")

    requests = seen["requests"]
    first_other = next(i for i, r in enumerate(requests) if r != "GET /screenshot")
    assert first_other >= 1  # readiness: GET /screenshot until the VM answers
    assert requests[first_other] == "POST /screen_size"  # the VM's real screen, used for coordinates
    assert not any(r.startswith("POST /action") for r in requests)  # OSWorld's server has no /action
    typed = next(a for a in oracle if a.type.value == "type")
    pressed = next(a for a in oracle if a.type.value == "key")
    commands = [json.loads(r.split(" ", 2)[2]) for r in requests if r.startswith("POST /execute ")]
    sent = [c for c in commands if isinstance(c, list) and c[:2] == ["python", "-c"]]
    assert sent == [pyautogui_code.command(typed, (1280, 720)), pyautogui_code.command(pressed, (1280, 720))]
    assert sent[0][2] == pyautogui_code.PREFIX + "pyautogui.write('chmod u+x ~/bin/backup.sh', interval=0.01)"
    # each pyautogui action is followed by the screenshot the agent sees
    after = [requests[i + 1] for i, r in enumerate(requests) if r.startswith("POST /execute [\"python\"")]
    assert after == ["GET /screenshot", "GET /screenshot"]
