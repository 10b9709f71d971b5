"""Benchmark of the local-desktop backend: startup, reset, action+screenshot latency, screenshot rate, concurrency.

``python bench/environment.py [--quick]`` prints one JSON object on stdout (logs go to stderr):

* ``startup_s``: one desktop from nothing to a probe that answers (Xvfb + D-Bus + openbox + probe);
* ``reset_s``: reset with no setup, and with a setup that launches an app and waits for its window;
* ``step_latency_ms``: ``env.step`` (the action with real X input plus a fresh screenshot), p50/p95, settle 0;
* ``screenshots_per_s``: back-to-back ``GET /screenshot`` on one desktop;
* ``concurrency``: wall time of 1 desktop doing N steps vs 4 desktops doing N steps each at once, and the
  throughput ratio (4 desktops' steps/s over 1 desktop's; 4.0 would be perfect scaling).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

from core.runtime import logs
from core.types import Action, ActionType, Task
from core.commands.recipe_report import machine
from environments.local_desktop import LocalDesktop, LocalDesktopBackend, LocalDesktopOptions


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"p50": round(percentile(ms, 50), 1), "p95": round(percentile(ms, 95), 1),
            "mean": round(statistics.fmean(ms), 1), "n": len(ms)}


def step_actions(n: int) -> list[Action]:
    """A mix of what agents do: clicks, moves, keys, short typing, scrolls."""
    cycle = [
        Action(type=ActionType.LEFT_CLICK, x=500, y=500),
        Action(type=ActionType.MOUSE_MOVE, x=200, y=700),
        Action(type=ActionType.KEY, keys=["ctrl", "a"]),
        Action(type=ActionType.TYPE, text="hello"),
        Action(type=ActionType.SCROLL, direction="down", amount=2, x=500, y=500),
    ]
    return [cycle[i % len(cycle)] for i in range(n)]


TERMINAL_TASK = Task.model_validate({
    "id": "bench-terminal", "instruction": "bench", "evaluator": {"func": "infeasible"},
    "config": [
        {"type": "launch", "parameters": {"command": ["xterm", "-T", "bench-term"]}},
        {"type": "execute_with_verification", "parameters": {
            "command": "true", "verification": {"window_exists": "bench-term"}, "max_wait_time": 20,
            "check_interval": 0.05}},
    ],
})
EMPTY_TASK = Task.model_validate({"id": "bench-empty", "instruction": "bench", "evaluator": {"func": "infeasible"}})


async def timed_steps(env: LocalDesktop, actions: list[Action]) -> list[float]:
    durations = []
    for action in actions:
        start = time.perf_counter()
        observation = await env.step(action)
        durations.append(time.perf_counter() - start)
        assert observation.screenshot is not None
    return durations


async def run(quick: bool) -> dict[str, Any]:
    steps = 15 if quick else 60
    resets = 2 if quick else 5
    shots = 20 if quick else 100
    # the backend makes its own work directory, one the unprivileged desktop user can reach, and removes it
    options = LocalDesktopOptions(max_environments=4, settle_s=0.0)
    pool = LocalDesktopBackend(options)
    result: dict[str, Any] = {}
    try:
        start = time.perf_counter()
        env = await pool.acquire()
        result["startup_s"] = round(time.perf_counter() - start, 3)
        assert isinstance(env, LocalDesktop)

        empty, terminal = [], []
        for _ in range(resets):
            start = time.perf_counter()
            await env.reset(EMPTY_TASK)
            empty.append(time.perf_counter() - start)
            start = time.perf_counter()
            await env.reset(TERMINAL_TASK)
            terminal.append(time.perf_counter() - start)
        result["reset_s"] = {"empty_task": round(statistics.median(empty), 3),
                             "launch_xterm_task": round(statistics.median(terminal), 3)}

        await env.step(Action(type=ActionType.SCREENSHOT))  # warm the grabber
        result["step_latency_ms"] = summary_ms(await timed_steps(env, step_actions(steps)))

        assert env.client is not None
        start = time.perf_counter()
        for _ in range(shots):
            await env.client.screenshot()
        result["screenshots_per_s"] = round(shots / (time.perf_counter() - start), 1)

        others = await asyncio.gather(*(pool.acquire() for _ in range(3)))
        envs = [env, *others]
        await asyncio.gather(*(e.reset(TERMINAL_TASK) for e in envs))
        start = time.perf_counter()
        await timed_steps(env, step_actions(steps))
        one = time.perf_counter() - start
        start = time.perf_counter()
        per_env = await asyncio.gather(*(timed_steps(e, step_actions(steps)) for e in envs))
        four = time.perf_counter() - start
        result["concurrency"] = {
            "steps_per_env": steps,
            "wall_s_1_env": round(one, 3),
            "wall_s_4_envs": round(four, 3),
            "wall_ratio_4_vs_1": round(four / one, 2),
            "throughput_ratio_4_vs_1": round((4 * steps / four) / (steps / one), 2),
            "step_latency_ms_4_envs": summary_ms([d for durations in per_env for d in durations]),
        }
        for other in others:
            await pool.release(other)
        await pool.release(env)
    finally:
        await pool.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (CI smoke run)")
    args = parser.parse_args()
    logs.configure("warning")
    load_at_start = os.getloadavg()[0]  # other work on the host skews every number here
    measured = asyncio.run(run(args.quick))
    report = {
        "benchmark": "environment",
        "machine": machine(),
        "settings": {"backend": "local-desktop", "screen": [1280, 800], "settle_s": 0.0, "quick": args.quick,
                     "cpus": os.cpu_count(), "python": platform.python_version(),
                     "load_average_1m_at_start": round(load_at_start, 2)},
        **measured,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
