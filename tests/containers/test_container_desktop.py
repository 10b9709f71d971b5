"""``container-desktop`` on podman through the docker SDK: a pool of 4, bundled oracles judged 1, a container
killed mid-episode replaced, soft resets between episodes, and nothing left behind.

Real parts only: the minimal image built from Debian packages, podman with runc behind its Docker API
socket, our probe in each container, the bundled tasks' oracles and judges.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from core.commands import envcheck
from core.errors import EnvironmentFailure
from core.pluginmanager import Plugins, load_plugins
from core.types import Task
from core.interfaces import JudgeServices
from environments.containers.bridge import SYSFS, interface_with_address, is_pinned
from environments.containers.container_desktop import ContainerDesktopBackend
from environments.containers.engine import LABEL_POOL, Engine, EngineHost
from environments.containers.podman_service import PodmanService
from environments.containers.pool import STOPPED_STATES
from environments.tasks import load_bundled_tasks
from tests.containers.conftest import ULIMITS, ours

pytestmark = [pytest.mark.containers, pytest.mark.slow]

T = TypeVar("T")
TASK_IDS = ["os-make-executable", "os-archive-logs", "os-symlink-release",
            "editor-change-port", "editor-append-host", "editor-new-todo-list"]


def running(pool_id: str) -> set[str]:
    proc = subprocess.run(["podman", "ps", "--filter", f"label={LABEL_POOL}={pool_id}", "--format", "{{.ID}}"],
                          capture_output=True, text=True, check=True)
    return {line[:12] for line in proc.stdout.split()}


class EngineCensus:
    """How many containers of a pool the engine itself lists as not stopped (booting, running, being removed),
    sampled every 50 ms by a connection of its own (and whenever a test calls ``sample``): the pool's cap
    measured from outside the pool."""

    def __init__(self, backend: ContainerDesktopBackend):
        self.pool_id = backend.pool_id
        self.engine = Engine(EngineHost(url=backend.engines[0].url)).open()
        self.peak = 0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def sample(self) -> int:
        states = await asyncio.to_thread(self.engine.states, {LABEL_POOL: self.pool_id})
        count = sum(1 for state in states.values() if state not in STOPPED_STATES)
        self.peak = max(self.peak, count)
        self.samples += 1
        return count

    async def _loop(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(0.05)

    async def __aenter__(self) -> EngineCensus:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self.engine.close()


class Harness:
    """One event loop for the module, so the backend (and its pool) lives across tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.plugins: Plugins = load_plugins(environ={})

    def run(self, coro: Awaitable[T], timeout: float = 300) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def backend(self, podman: PodmanService, image: str, **options: Any) -> ContainerDesktopBackend:
        settings = {"hosts": [podman.url], "image": image, "ulimits": ULIMITS, "runtime": "runc", **options}
        return self.plugins.registry("environment").create("container-desktop", settings)


@pytest.fixture(scope="module")
def harness() -> Any:
    h = Harness()
    yield h
    h.loop.close()


@pytest.fixture(scope="module")
def pool(harness: Harness, podman_service: PodmanService, minimal_image: str) -> Any:
    backend = harness.backend(podman_service, minimal_image, max_environments=4, warm=2, max_parallel_starts=4,
                              health_interval_s=0.5)
    yield backend
    harness.run(backend.close())
    assert not running(backend.pool_id)


def test_pool_of_four_runs_bundled_oracles_with_judges_scoring_one(harness: Harness, pool: ContainerDesktopBackend):
    """max_environments is a cap on live containers (booting, warm, in use and being removed count): the engine never
    lists more than 4 of the pool's containers as running, although 4 workers recycle a container per episode
    while the pool also keeps 2 warm spares."""
    tasks = load_bundled_tasks(ids=TASK_IDS)
    queue = list(tasks)

    async def worker() -> list[envcheck.TaskCheck]:
        out = []
        while queue:
            out.append(await envcheck.check_task(pool, harness.plugins, queue.pop()))
            await census.sample()  # at least one sample per episode, however fast or slow the loop samples
        return out

    census = EngineCensus(pool)

    async def four_workers() -> tuple[list[envcheck.TaskCheck], EngineCensus]:
        async with census:
            acquired = await asyncio.gather(*(pool.acquire() for _ in range(4)))  # the pool of 4, all at once
            ids = {env.container_id[:12] for env in acquired}
            assert len(ids) == 4 and ids <= running(pool.pool_id)
            assert await census.sample() == 4  # no warm spare beside 4 in use
            await asyncio.gather(*(pool.release(env) for env in acquired))
            results = [r for batch in await asyncio.gather(*(worker() for _ in range(4))) for r in batch]
        return results, census

    results, census = harness.run(four_workers(), timeout=600)
    failures = {r.task_id: r.error for r in results if not r.ok}
    assert not failures
    assert sorted(r.task_id for r in results) == sorted(TASK_IDS)
    assert all((r.score_before, r.score_after) == (0.0, 1.0) for r in results)
    assert census.samples > len(TASK_IDS) and census.peak == 4, (census.samples, census.peak)  # as the engine sees it
    assert pool.pool.stats["peak_alive"] == 4 and pool.pool.stats["failed_starts"] == 0  # as the pool counts
    # reset = a fresh container: every episode ran in a container of its own (4 first ones + one per episode)
    assert pool.pool.stats["started"] >= len(TASK_IDS)
    assert all(r.env_id and r.env_id.startswith(pool.pool_id) for r in results)


async def solve(harness: Harness, pool: ContainerDesktopBackend, env: Any, task: Task) -> None:
    """Play the task's oracle on ``env`` (already reset) and require a judgement of 1."""
    oracle = envcheck.oracle_of(task)
    for action in oracle:
        await env.step(action)
    judgement = await pool.evaluate(env, task, judge=JudgeServices.of(harness.plugins), last_action=oracle[-1])
    assert judgement.score == 1.0, judgement


def test_container_killed_mid_episode_is_replaced(harness: Harness, pool: ContainerDesktopBackend):
    """The episode fails, the next one runs on a live container, and the pool gets back to its warm spares."""
    task = load_bundled_tasks(ids=["os-make-executable"])[0]
    oracle = envcheck.oracle_of(task)
    started_before = pool.pool.stats["started"]

    async def episode() -> tuple[str, str]:
        env = await pool.acquire()
        await env.reset(task)
        await env.step(oracle[0])
        victim = env.container_id  # after the reset: a reset that stalls moves the episode to a fresh container
        await asyncio.to_thread(env.slot.engine.kill, victim)  # the container dies mid-episode
        with pytest.raises(EnvironmentFailure):
            for action in oracle[1:]:
                await env.step(action)
        await pool.release(env, discard=True)
        # the health check noticed too; the pool boots a replacement, and the next episode gets a live one
        env = await pool.acquire()
        try:
            assert env.container_id != victim
            await env.reset(task)
            await solve(harness, pool, env, task)
        finally:
            await pool.release(env)
        # the event the replacement shows up as: the warm spares are back (both episodes used theirs up)
        await pool.pool.wait_warm(120)
        return victim, env.container_id

    victim, _replacement = harness.run(episode())
    gone = subprocess.run(["podman", "container", "exists", victim], check=False).returncode
    assert gone == 1  # the dead container was removed, not just abandoned
    spares = pool.pool.slots()
    assert pool.pool.idle >= pool.pool.warm == 2 and victim not in {s.container_id for s in spares}
    assert {s.container_id[:12] for s in spares} <= running(pool.pool_id)
    # two containers were used up (the victim, the second episode's) and two spares are idle: whatever was idle
    # or booting when the test began, at least two of these four were started during the test
    assert pool.pool.stats["started"] >= started_before + 2 and pool.pool.stats["failed_starts"] == 0


def test_a_desktop_that_stops_answering_during_reset_is_swapped_for_a_fresh_one(harness: Harness,
                                                                               pool: ContainerDesktopBackend):
    """The container keeps running but its processes (probe included) are frozen with SIGSTOP from the host, so the
    health check (which asks in-use containers for their state only) sees nothing: the reset's first request gets
    no answer, and the reset goes on in a fresh container instead of failing the episode."""
    task = load_bundled_tasks(ids=["os-make-executable"])[0]

    async def episode() -> str:
        env = await pool.acquire()
        frozen = env.container_id
        top = subprocess.run(["podman", "top", frozen, "hpid"], capture_output=True, text=True, check=True).stdout
        pids = [line.strip() for line in top.splitlines()[1:] if line.strip().isdigit()]
        assert pids, top
        subprocess.run(["kill", "-STOP", *pids], check=True)
        try:
            await env.reset(task)
            assert env.container_id != frozen
            await solve(harness, pool, env, task)
        finally:
            await pool.release(env)
        return frozen

    frozen = harness.run(episode())
    assert subprocess.run(["podman", "container", "exists", frozen], check=False).returncode == 1  # removed


def test_the_bridge_keeps_its_mac_address_while_containers_come_and_go(harness: Harness,
                                                                      pool: ContainerDesktopBackend) -> None:
    """A Linux bridge takes the lowest MAC of its ports unless one was set, so netavark's bridge changed its
    address whenever a swapped-out container's veth left it, and the next desktop's replies went to a MAC that
    was gone (connections stalled 1 to 25 s in SYN retransmits). The engine pins the bridge's address: it is
    one set by hand (addr_assign_type 3) and stays the same across swaps (each reset here is a fresh
    container: the old one is removed)."""
    if os.geteuid() != 0:
        pytest.skip("a rootless engine's bridge lives in its own network namespace")
    task = load_bundled_tasks(ids=["os-make-executable"])[0]

    async def swaps() -> tuple[str, set[str], set[str]]:
        env = await pool.acquire()
        try:
            settings = await asyncio.to_thread(env.slot.engine.client.api.inspect_container, env.container_id)
            gateway = next(n["Gateway"] for n in settings["NetworkSettings"]["Networks"].values() if n["Gateway"])
            bridge = interface_with_address(gateway)
            assert bridge is not None, f"no interface here holds the containers' gateway {gateway}"
            macs, containers = set(), set()
            for _ in range(4):
                await env.reset(task)
                containers.add(env.container_id)
                macs.add((SYSFS / bridge / "address").read_text().strip())
                assert is_pinned(bridge)
        finally:
            await pool.release(env)
        return bridge, macs, containers

    bridge, macs, containers = harness.run(swaps())
    assert len(containers) >= 3, "the resets did not swap containers"
    assert len(macs) == 1, f"{bridge} changed its MAC address as containers came and went: {sorted(macs)}"


def test_health_check_replaces_a_dead_idle_container(harness: Harness, podman_service: PodmanService,
                                                     minimal_image: str):
    backend = harness.backend(podman_service, minimal_image, max_environments=1, warm=1, health_interval_s=0.3)

    async def scenario() -> None:
        try:
            await backend.prewarm(120)
            (slot,) = backend.pool.slots()
            await asyncio.to_thread(slot.engine.kill, slot.container_id)
            deadline = time.monotonic() + 180  # bounds a hang only: a replacement boots at the machine's pace
            while not ([s for s in backend.pool.slots() if s is not slot] and backend.pool.idle == 1):
                assert time.monotonic() < deadline, f"no replacement became idle: {backend.pool.stats}"
                await asyncio.sleep(0.2)
            assert backend.pool.stats["replaced_dead"] == 1
            (replacement,) = backend.pool.slots()
            assert replacement is not slot and slot.dead
            assert await replacement.client.screen_size() == (1280, 800)
        finally:
            await backend.close()

    harness.run(scenario())
    assert not running(backend.pool_id)


def test_episodes_per_container_cleans_the_container_in_place(harness: Harness, podman_service: PodmanService,
                                                              minimal_image: str):
    backend = harness.backend(podman_service, minimal_image, max_environments=1, warm=0, episodes_per_container=2)
    first, second = load_bundled_tasks(ids=["os-archive-logs", "editor-change-port"])
    getters, metrics = harness.plugins.registry("getter"), harness.plugins.registry("metric")

    async def solve(env: Any, task: Any) -> float:
        await env.reset(task)
        oracle = envcheck.oracle_of(task)
        for action in oracle:
            await env.step(action)
        judgement = await backend.evaluate(env, task, judge=JudgeServices(getters, metrics),
                                           last_action=oracle[-1])
        return judgement.score

    async def three_episodes() -> None:
        try:
            env = await backend.acquire()
            assert await solve(env, first) == 1.0
            used = env.container_id
            assert await solve(env, second) == 1.0  # second episode: cleaned in place
            assert env.container_id == used and env.slot.episodes == 2
            home = (await env.client.execute("ls -A ~", shell=True))["output"].split()
            assert "server.ini" in home and "archive" not in home and "work" not in home  # home restored
            xterms = await env.client.execute(["pgrep", "-x", "xterm"])
            assert xterms["returncode"] == 1  # the first episode's terminal was killed
            await env.reset(first)  # third episode: over the limit, a fresh container from the image
            assert env.container_id != used and env.slot.episodes == 1
            judgement = await backend.evaluate(env, first, judge=JudgeServices(getters, metrics),
                                               last_action=None)
            assert judgement.score == 0.0
            await backend.release(env)
        finally:
            await backend.close()

    harness.run(three_episodes())
    assert backend.pool.stats["started"] == 2
    assert not running(backend.pool_id)


GENERATED_GETTER = Task.model_validate({
    "id": "generated-getter", "instruction": "Leave the answer in ~/Documents/answer.txt",
    "config": [{"type": "execute", "parameters": {
        "command": "mkdir -p ~/Documents && echo 42 > ~/Documents/answer.txt && id -un > ~/Documents/who.txt",
        "shell": True}}],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "answer_in_home", "name": "answer.txt"},
        "expected": {"type": "rule", "rules": {"expected": "42 (read as user in /home/user)"}},
        "code": (
            "import os\n\n"
            "def get_answer_in_home(config):\n"
            "    with open(os.path.join('Documents', config['name'])) as handle:\n"
            "        answer = handle.read().strip()\n"
            "    with open(os.path.join('Documents', 'who.txt')) as handle:\n"
            "        user = handle.read().strip()\n"
            "    return f'{answer} (read as {user} in {os.getcwd()})'\n"
        ),
    },
})


def test_generated_getters_run_inside_the_container(harness: Harness, pool: ContainerDesktopBackend) -> None:
    """The container is isolated (no home on this host): the in-environment executor runs the getter in it."""
    executor = harness.plugins.registry("judge_executor").create("in-environment", {"wall_timeout_s": 20})

    async def judge() -> Any:
        env = await pool.acquire()
        try:
            assert env.isolated and env.home_dir is None
            await env.reset(GENERATED_GETTER)
            return await pool.evaluate(env, GENERATED_GETTER, judge=JudgeServices.of(harness.plugins, executor),
                                       last_action=None)
        finally:
            await pool.release(env)

    judgement = harness.run(judge())
    assert (judgement.status.value, judgement.score) == ("ok", 1.0), judgement


def test_a_pool_spans_engines_and_reaches_each_its_own_way(harness: Harness, podman_service: PodmanService,
                                                           minimal_image: str, tmp_path: Any) -> None:
    """Two engine sockets stand for two machines: containers spread by load, one reached by container IP, the
    other through an engine-assigned port."""
    with PodmanService(tmp_path / "second.sock", runtime="runc") as second:
        backend = harness.backend(podman_service, minimal_image, max_environments=2, warm=0, hosts=[
            {"url": podman_service.url, "max_containers": 1},
            {"url": second.url, "max_containers": 1, "access": "published"},
        ])

        async def two() -> list[tuple[str, str, tuple[int, int]]]:
            try:
                envs = await asyncio.gather(backend.acquire(), backend.acquire())
                out = [(env.slot.engine.url, env.slot.url, await env.client.screen_size()) for env in envs]
                await asyncio.gather(*(backend.release(env) for env in envs))
                return out
            finally:
                await backend.close()

        placed = sorted(harness.run(two()))
    assert [engine for engine, _, _ in placed] == sorted([podman_service.url, second.url])
    urls = {engine: url for engine, url, _ in placed}
    assert urls[podman_service.url].startswith("http://10.") and urls[podman_service.url].endswith(":5000")
    assert urls[second.url].startswith("http://127.0.0.1:") and not urls[second.url].endswith(":5000")
    assert all(size == (1280, 800) for _, _, size in placed)


def test_containers_that_fail_to_boot_fail_acquire_with_the_reason(harness: Harness, podman_service: PodmanService,
                                                                   minimal_image: str) -> None:
    backend = harness.backend(podman_service, minimal_image, max_environments=1, warm=0, max_start_failures=2,
                              window_manager="no-such-window-manager", startup_timeout_s=20)

    async def acquire() -> None:
        try:
            await backend.acquire()
        finally:
            await backend.close()

    with pytest.raises(EnvironmentFailure, match="2 container starts failed in a row.*stopped while booting") as caught:
        harness.run(acquire(), timeout=120)
    assert "no-such-window-manager" in str(caught.value)  # the container's own log says what went wrong
    assert backend.pool.stats["failed_starts"] == 2 and backend.pool.stats["started"] == 0
    assert not running(backend.pool_id)


def test_containers_of_a_killed_process_are_removed_by_the_next_backend(harness: Harness,
                                                                        podman_service: PodmanService,
                                                                        minimal_image: str) -> None:
    script = (
        "import asyncio\n"
        "from environments.containers.container_desktop import ContainerDesktopBackend, ContainerDesktopOptions\n"
        f"options = ContainerDesktopOptions(hosts=[{podman_service.url!r}], image={minimal_image!r}, "
        f"ulimits={ULIMITS!r}, runtime='runc', max_environments=1, warm=0)\n"
        "async def main():\n"
        "    env = await ContainerDesktopBackend(options).acquire()\n"
        "    print('CONTAINER', env.container_id, flush=True)\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    assert owner.stdout is not None
    container_id = next(line.split()[1] for line in owner.stdout if line.startswith("CONTAINER "))
    owner.kill()  # SIGKILL: no close(), no atexit
    owner.wait()
    exists = ["podman", "container", "exists", container_id]
    assert container_id and subprocess.run(exists, check=False).returncode == 0  # left behind...
    backend = harness.backend(podman_service, minimal_image, max_environments=1, warm=0)
    harness.run(backend.close())
    assert subprocess.run(exists, check=False).returncode == 1  # ...until the next backend on this machine


def test_nothing_is_left_behind(harness: Harness, pool: ContainerDesktopBackend) -> None:
    harness.run(pool.close())
    assert ours() == []

