"""Benchmark of the environment pool's own cost at scale, on the ``simulated`` backend (a SIMULATION).

``python bench/simulated_pool.py [--quick]`` prints one JSON object on stdout (logs go to stderr).

Every session of a pool of N is acquired, reset, stepped ``steps`` times and judged, all N at once in one
asyncio process, as the rollout loop drives real desktops. Each reset and step of the simulation sleeps a
latency drawn uniformly from ``step_latency_s`` (OSWorld-like: 1-3 s); what it takes beyond the drawn
latency is the framework's scheduling overhead (event loop, pool, observation objects). Reported per N (side by side; N = 100, 1,000 and 10,000, AgentRL's published
scale): p50 / p99 / max step overhead in ms, reset overhead, wall time against the slowest possible
session (``(steps + 1) x max latency``), and ratios against N = 100. Target: p99 step overhead under 10 ms at 10,000.
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
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from core.runtime import logs  # noqa: E402
from core.types import Action, ActionType, Task  # noqa: E402
from core.interfaces import JudgeServices  # noqa: E402
from core.registry import Registry  # noqa: E402
from environments.simulated import SimulatedBackend, SimulatedOptions  # noqa: E402

TARGET_P99_MS = 10.0


#: the simulated judge reads no getter or metric
NO_REGISTRIES = JudgeServices(Registry("getter"), Registry("metric"))


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _pool(sessions: int, steps: int, latency: tuple[float, float]) -> dict[str, Any]:
    backend = SimulatedBackend(SimulatedOptions(max_environments=sessions, step_latency_s=latency,
                                                reset_latency_s=latency, success_rate=0.5))
    tasks = [Task(id=f"task-{i % 100}", instruction="simulated", evaluator={"func": "simulated"})
             for i in range(sessions)]
    step_overhead: list[float] = []
    reset_overhead: list[float] = []
    wait, done = Action(type=ActionType.WAIT), Action(type=ActionType.DONE)

    async def session(task: Task) -> float:
        env = await backend.acquire()
        try:
            t0 = time.perf_counter()
            await env.reset(task)
            reset_overhead.append(time.perf_counter() - t0 - env.last_latency_s)
            for i in range(steps):
                t0 = time.perf_counter()
                await env.step(done if i == steps - 1 else wait)
                step_overhead.append(time.perf_counter() - t0 - env.last_latency_s)
            judgement = await backend.evaluate(env, task, judge=NO_REGISTRIES, last_action=done)
            return judgement.score
        finally:
            await backend.release(env)

    started = time.perf_counter()
    scores = await asyncio.gather(*(session(t) for t in tasks))
    wall = time.perf_counter() - started
    await backend.close()
    ideal = latency[1] * (steps + 1)  # the slowest possible session
    ms = [1000 * x for x in step_overhead]
    return {
        "sessions": sessions, "steps": len(ms), "success_share": round(sum(scores) / len(scores), 3),
        "step_overhead_ms": {"p50": round(_quantile(ms, 0.5), 3), "p99": round(_quantile(ms, 0.99), 3),
                             "max": round(max(ms), 3), "mean": round(statistics.fmean(ms), 3)},
        "reset_overhead_ms_p99": round(1000 * _quantile(reset_overhead, 0.99), 3),
        "wall_s": round(wall, 3), "ideal_s": round(ideal, 3), "wall_over_ideal": round(wall / ideal, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps per session (under a minute)")
    args = parser.parse_args(argv)
    logs.configure("warning")
    steps, latency = (3, (0.5, 1.5)) if args.quick else (10, (1.0, 3.0))
    sizes = (100, 1_000, 10_000)
    results = {str(n): asyncio.run(_pool(n, steps, latency)) for n in sizes}
    base = results["100"]["step_overhead_ms"]["p99"] or 1e-9
    at_scale = results["10000"]["step_overhead_ms"]["p99"]
    out = {
        "bench": "simulated_pool",
        "note": "the simulated backend is a simulation: latencies are sleeps, verdicts are draws",
        "settings": {"steps_per_session": steps, "step_latency_s": list(latency), "quick": args.quick},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "pools": results,
        "p99_vs_100_sessions": {n: round(r["step_overhead_ms"]["p99"] / base, 2) for n, r in results.items()},
        "target": {"p99_step_overhead_ms_at_10000": TARGET_P99_MS, "measured": at_scale,
                   "met": at_scale < TARGET_P99_MS},
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
