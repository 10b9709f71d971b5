"""Benchmark of the container backends' machinery: image build, start-to-ready, reset, concurrency.

``python bench/containers.py [--quick] [--cold-build]`` prints one JSON object on stdout (logs go to stderr).
It starts its own podman API socket (runtime runc) and drives ``container-desktop`` through the docker SDK:

* ``image_build``: the minimal image built by ``environments.containers.build``: from nothing
  (``--cold-build``: Debian packages -> base filesystem -> image) and with every stage cached;
* ``start_to_ready_s``: container created -> probe answers ``GET /screenshot``, one at a time and 4 at once;
* ``reset_s``: an episode's reset (setup launches xterm and waits for its window) on a warm container from
  the pool, on a container that has to boot first (cold), cleaned in place (``episodes_per_container`` > 1),
  and on a ``local-desktop`` desktop (no container) for comparison;
* ``concurrency``: N containers held at once, each stepping (action + screenshot, settle 0) back to back
  (no think time: the worst case) and paced (``--think-s`` between steps, as an agent waits on its model)
  -> p50/p95 step latency, steps/s, memory per container (cgroup). N grows until p95 reaches 1 s or memory
  runs short; ``max_containers_p95_under_1s`` is the answer for this machine, per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from core.runtime import logs
from core.types import Action, ActionType, Task
from environments.containers import build
from environments.containers.container_desktop import (
    ContainerDesktopBackend,
    ContainerDesktopOptions,
)
from environments.containers.podman_service import PodmanService
from environments.containers.rootless import rootless_problem
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions
from core.commands.recipe_report import machine

#: the backend's default rlimits (what users get), soft = hard
ULIMITS = ContainerDesktopOptions().ulimits
TERMINAL_TASK = Task.model_validate({
    "id": "bench-terminal", "instruction": "bench", "evaluator": {"func": "infeasible"},
    "config": [
        {"type": "launch", "parameters": {"command": ["xterm", "-T", "bench-term"]}},
        {"type": "execute_with_verification", "parameters": {
            "command": "true", "verification": {"window_exists": "bench-term"}, "max_wait_time": 20,
            "check_interval": 0.05}},
    ],
})
ACTIONS = [
    Action(type=ActionType.LEFT_CLICK, x=500, y=500),
    Action(type=ActionType.MOUSE_MOVE, x=200, y=700),
    Action(type=ActionType.KEY, keys=["ctrl", "a"]),
    Action(type=ActionType.TYPE, text="hello"),
    Action(type=ActionType.SCROLL, direction="down", amount=2, x=500, y=500),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summary(values: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    scaled = [v * scale for v in values]
    return {"p50": round(percentile(scaled, 50), digits), "p95": round(percentile(scaled, 95), digits),
            "mean": round(statistics.fmean(scaled), digits), "n": len(scaled)}


def mem_available_gib() -> float:
    with open("/proc/meminfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    return 0.0


def backend(service: PodmanService, image: str, **options: Any) -> ContainerDesktopBackend:
    settings = {"hosts": [service.url], "image": image, "ulimits": ULIMITS, "runtime": "runc", **options}
    return ContainerDesktopBackend(ContainerDesktopOptions.model_validate(settings))


def measure_build(cold: bool) -> tuple[str, dict[str, Any]]:
    out: dict[str, Any] = {"variant": "minimal", "packages": len(build.VARIANTS["minimal"].packages)}
    if cold:
        result = build.build_image("minimal", runtime="runc", force=True)
        out["cold"] = {**result.timings, "size_mb": result.size_mb}
    result = build.build_image("minimal", runtime="runc")
    out["cached"] = {**result.timings, "base_cached": result.base_cached, "image_cached": result.image_cached}
    if cold:
        out["cold_vs_cached_ratio"] = round(out["cold"]["total_s"] / max(result.timings["total_s"], 1e-3), 1)
    return result.image, out


async def start_to_ready(service: PodmanService, image: str, sequential: int) -> dict[str, Any]:
    one = backend(service, image, max_environments=1, warm=0)
    try:
        for _ in range(sequential):
            env = await one.acquire()
            await one.release(env, discard=True)  # an unused container would be handed out again
        alone = list(one.pool.stats["ready_s"])
    finally:
        await one.close()
    four = backend(service, image, max_environments=4, warm=0, max_parallel_starts=4)
    try:
        start = time.perf_counter()
        envs = await asyncio.gather(*(four.acquire() for _ in range(4)))
        wall = time.perf_counter() - start
        together = list(four.pool.stats["ready_s"])
        await asyncio.gather(*(four.release(e) for e in envs))
    finally:
        await four.close()
    return {"one_at_a_time": summary(alone), "four_at_once": {**summary(together), "wall_s": round(wall, 3)},
            "four_at_once_vs_one_p50_ratio": round(percentile(together, 50) / percentile(alone, 50), 2)}


async def timed_reset(env: Any) -> float:
    start = time.perf_counter()
    await env.reset(TERMINAL_TASK)
    return time.perf_counter() - start


async def resets(service: PodmanService, image: str, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # warm: each reset after the first swaps the used container for a pre-booted one (the spare needs room: 2 alive)
    warm = backend(service, image, max_environments=2, warm=1)
    try:
        await warm.prewarm(120)
        env = await warm.acquire()
        first = await timed_reset(env)  # a fresh container straight from the pool: setup only
        swaps = []
        for _ in range(repeats):
            await warm.pool.wait_warm(120)  # the replacement booted while the episode ran
            swaps.append(await timed_reset(env))
        await warm.release(env)
        out["fresh_container_warm_pool"] = {**summary(swaps), "first_episode_s": round(first, 3)}
    finally:
        await warm.close()
    cold = backend(service, image, max_environments=1, warm=0)
    try:
        env = await cold.acquire()
        await timed_reset(env)
        out["fresh_container_cold"] = summary([await timed_reset(env) for _ in range(repeats)])
        await cold.release(env)
    finally:
        await cold.close()
    in_place = backend(service, image, max_environments=1, warm=0, episodes_per_container=1000)
    try:
        env = await in_place.acquire()
        await timed_reset(env)
        out["cleaned_in_place"] = summary([await timed_reset(env) for _ in range(repeats)])
        await in_place.release(env)
    finally:
        await in_place.close()
    # its own work directory (reachable by the unprivileged desktop user, removed on close)
    local = LocalDesktopBackend(LocalDesktopOptions(max_environments=1, window_manager="openbox"))
    try:
        env = await local.acquire()
        await timed_reset(env)
        out["local_desktop_no_container"] = summary([await timed_reset(env) for _ in range(repeats)])
        await local.release(env)
    finally:
        await local.close()
    base = out["local_desktop_no_container"]["p50"]
    out["p50_ratio_vs_local_desktop"] = {k: round(v["p50"] / base, 2) for k, v in out.items()
                                         if isinstance(v, dict) and "p50" in v and k != "local_desktop_no_container"}
    return out


def container_mib(env: Any) -> float:
    """The container's memory use as its engine reports it (cgroup), MiB."""
    stats = env.slot.engine.client.api.stats(env.container_id, stream=False)
    return float((stats.get("memory_stats") or {}).get("usage") or 0) / 2**20


async def stepping(envs: list[Any], seconds: float, think_s: float) -> dict[str, Any]:
    """Every env steps for ``seconds`` (pausing ``think_s`` after each step, as an agent waits on its model)."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def loop(env: Any, offset: float) -> None:
        await asyncio.sleep(offset)  # paced agents do not all act in the same instant
        i = 0
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            await env.step(ACTIONS[i % len(ACTIONS)])
            latencies.append(time.perf_counter() - start)
            i += 1
            if think_s:
                await asyncio.sleep(think_s)

    await asyncio.gather(*(loop(e, think_s * i / len(envs)) for i, e in enumerate(envs)))
    return {"step_latency_s": summary(latencies), "steps_per_s": round(len(latencies) / seconds, 1)}


async def concurrency(service: PodmanService, image: str, ladder: list[int], seconds: float,
                      think_s: float) -> dict[str, Any]:
    """One pool grows along ``ladder``; at each size, back-to-back stepping (until its p95 passes 1 s) and
    paced stepping (``think_s`` between steps, until its p95 passes 1 s or memory runs short)."""
    pool = backend(service, image, max_environments=ladder[-1], warm=0, max_parallel_starts=4, settle_s=0.0)
    levels: list[dict[str, Any]] = []
    best = {"back_to_back": 0, "paced": 0}
    envs: list[Any] = []
    try:
        for n in ladder:
            start = time.perf_counter()
            new = await asyncio.gather(*(pool.acquire() for _ in range(n - len(envs))))
            await asyncio.gather(*(e.reset(TERMINAL_TASK) for e in new))
            envs.extend(new)
            level: dict[str, Any] = {"containers": n, "grow_s": round(time.perf_counter() - start, 1)}
            for mode, pause in (("back_to_back", 0.0), ("paced", think_s)):
                if best[mode] == ladder[ladder.index(n) - 1] or n == ladder[0]:  # still under 1 s so far
                    level[mode] = await stepping(envs, seconds, pause)
                    if level[mode]["step_latency_s"]["p95"] < 1.0:
                        best[mode] = n
            memory = await asyncio.gather(*(asyncio.to_thread(container_mib, e) for e in envs))
            level["mem_per_container_mib"] = round(statistics.fmean(memory), 1)
            level["mem_available_gib"] = round(mem_available_gib(), 1)
            levels.append(level)
            print(json.dumps(level), file=sys.stderr, flush=True)
            if best["paced"] != n or level["mem_available_gib"] < 3.0:
                break
    finally:
        await pool.close()
    return {"seconds_per_level": seconds, "think_s": think_s, "levels": levels,
            "max_containers_p95_under_1s": best,
            "paced_limited_by": "ladder end" if best["paced"] == ladder[-1] else "p95 step latency or memory"}


async def run(args: argparse.Namespace, service: PodmanService) -> dict[str, Any]:
    image, built = await asyncio.to_thread(measure_build, args.cold_build)
    report: dict[str, Any] = {"image_build": built, "image": image}
    report["start_to_ready_s"] = await start_to_ready(service, image, 2 if args.quick else 6)
    report["reset_s"] = await resets(service, image, 2 if args.quick else 5)
    ladder = [1, 4] if args.quick else [1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64]
    report["concurrency"] = await concurrency(service, image, ladder, 5.0 if args.quick else 20.0, args.think_s)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, 1 and 4 containers for 5 s each (CI smoke run, under a minute)")
    parser.add_argument("--cold-build", action="store_true", help="also rebuild the image from Debian packages")
    parser.add_argument("--think-s", type=float, default=2.0, help="pause between paced steps (an agent's model)")
    args = parser.parse_args()
    logs.configure("warning")
    problem = rootless_problem()
    if problem:  # before any podman state is made: the message is the whole answer
        print(f"error: {problem}", file=sys.stderr)
        return 2
    # a plain SIGTERM would skip every finally: turn it into SystemExit so the pools remove their containers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_at_start = os.getloadavg()[0]  # other work on the host skews every number here
    with tempfile.TemporaryDirectory(prefix="bench-podman-") as scratch, \
            PodmanService(Path(scratch) / "podman.sock", runtime="runc") as service:
        measured = asyncio.run(run(args, service))
    report = {
        "benchmark": "containers",
        "machine": machine(),
        "settings": {"backend": "container-desktop", "engine": "podman API socket via the docker SDK",
                     "runtime": "runc", "ulimits": ULIMITS, "screen": [1280, 800], "quick": args.quick,
                     "cpus": os.cpu_count(), "mem_total_gib": round(os.sysconf("SC_PHYS_PAGES")
                                                                    * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
                     "python": platform.python_version(), "load_average_1m_at_start": round(load_at_start, 2),
                     "load_average_1m_at_end": round(os.getloadavg()[0], 2)},
        **measured,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
