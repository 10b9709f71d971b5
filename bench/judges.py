"""Benchmark: sandboxed judge metric calls per second, sequential and with 8 workers, vs an in-process call.

Prints ONE JSON object on stdout (logs go to stderr)::

    python bench/judges.py [--quick] [--calls N] [--workers 8]

Variants, side by side:

* ``in_process``: the metric exec'd once and called directly (no isolation; the floor).
* ``sandbox_sequential``: ``SandboxExecutor.run_metric`` one call at a time (validator + a confined
  process per call: user/mount/net/pid namespaces, rlimits).
* ``sandbox_workers``: the same with ``--workers`` calls in flight (asyncio; one process each).
* ``unisolated_sequential``: the runner's rlimits-only fallback (``allow_unisolated``), to show what
  the namespaces cost.
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
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.runtime import logs  # noqa: E402
from plugins.judges.options import SandboxOptions  # noqa: E402
from plugins.judges.sandbox import SandboxExecutor, detect_isolation  # noqa: E402
from plugins.judges.validator import EntryPoint, validate_judge_code  # noqa: E402

#: a typical generated metric: compare an extracted state dict with the expected rule
METRIC = '''\
import json


def check_state(result, expected, **options):
    keys = options.get("keys") or sorted(expected)
    matched = sum(1 for key in keys if result.get(key) == expected.get(key))
    return matched / len(keys) if keys else 0.0
'''
RESULT = {"font": "Arial", "size": 12, "bold": True, "slides": 9}
EXPECTED = {"font": "Arial", "size": 12, "bold": True, "slides": 10}


def summarize(latencies_s: list[float], wall_s: float) -> dict[str, float]:
    ordered = sorted(latencies_s)
    return {
        "calls": len(ordered),
        "calls_per_s": round(len(ordered) / wall_s, 2),
        "mean_ms": round(1000 * statistics.fmean(ordered), 3),
        "min_ms": round(1000 * ordered[0], 3),  # the least disturbed call: robust to a loaded machine
        "p50_ms": round(1000 * ordered[len(ordered) // 2], 3),
        "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
    }


def bench_in_process(calls: int) -> dict[str, float]:
    namespace: dict[str, Any] = {}
    exec(compile(METRIC, "<judge>", "exec"), namespace)
    function = namespace["check_state"]
    latencies = []
    started = time.perf_counter()
    for _ in range(calls):
        t = time.perf_counter()
        function(RESULT, EXPECTED)
        latencies.append(time.perf_counter() - t)
    return summarize(latencies, time.perf_counter() - started)


def bench_validator(calls: int) -> dict[str, float]:
    latencies = []
    started = time.perf_counter()
    for _ in range(calls):
        t = time.perf_counter()
        assert validate_judge_code(METRIC, [EntryPoint("check_state", "metric")]).ok
        latencies.append(time.perf_counter() - t)
    return summarize(latencies, time.perf_counter() - started)


async def timed(make_call: Callable[[], Awaitable[Any]], calls: int, workers: int) -> dict[str, float]:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            t = time.perf_counter()
            call = await make_call()
            latencies.append(time.perf_counter() - t)
            statuses[call.status] = statuses.get(call.status, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    result: dict[str, Any] = summarize(latencies, time.perf_counter() - started)
    result["statuses"] = statuses
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls (a smoke run)")
    parser.add_argument("--calls", type=int, default=None, help="calls per sandboxed variant")
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    logs.configure("warning")
    calls = args.calls or (16 if args.quick else 120)

    options = SandboxOptions(max_concurrency=args.workers)
    sandbox = SandboxExecutor(options)
    unisolated = SandboxExecutor(SandboxOptions(max_concurrency=args.workers, allow_unisolated=True))
    unisolated.sandbox.isolation = "none"  # force the fallback for comparison, even where namespaces work

    def metric_call(executor: SandboxExecutor) -> Callable[[], Awaitable[Any]]:
        return lambda: executor.run_metric(METRIC, "check_state", RESULT, EXPECTED, {})

    async def sandboxed() -> dict[str, Any]:
        await metric_call(sandbox)()  # warm the page cache
        return {
            "sandbox_sequential": await timed(metric_call(sandbox), calls, 1),
            "sandbox_workers": await timed(metric_call(sandbox), calls * 2, args.workers),
            "unisolated_sequential": await timed(metric_call(unisolated), max(8, calls // 2), 1),
        }

    results: dict[str, Any] = {"in_process": bench_in_process(calls * 100), "validator": bench_validator(calls * 5)}
    results.update(asyncio.run(sandboxed()))
    in_process_ms = results["in_process"]["mean_ms"]
    sequential, parallel = results["sandbox_sequential"], results["sandbox_workers"]
    report = {
        "benchmark": "judges",
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "euid": os.geteuid(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "isolation": sandbox.sandbox.isolation,
            "isolation_probe": detect_isolation(sandbox.sandbox.python).reason,
        },
        "settings": {
            "quick": args.quick,
            "calls_sequential": calls,
            "calls_workers": calls * 2,
            "workers": args.workers,
            "limits": options.limits_for_runner(),
        },
        "results": results,
        "ratios": {
            "overhead_ms_per_call": round(sequential["mean_ms"] - in_process_ms, 3),
            "overhead_ms_per_call_best": round(sequential["min_ms"] - results["in_process"]["min_ms"], 3),
            "sandbox_vs_in_process_latency": round(sequential["mean_ms"] / max(in_process_ms, 1e-9), 1),
            "workers_vs_sequential_throughput": round(parallel["calls_per_s"] / sequential["calls_per_s"], 2),
            "namespaces_vs_unisolated_latency": round(
                sequential["mean_ms"] / results["unisolated_sequential"]["mean_ms"], 2),
            "validator_share_of_sandbox_call": round(results["validator"]["mean_ms"] / sequential["mean_ms"], 4),
        },
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
