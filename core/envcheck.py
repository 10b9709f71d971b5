"""``python -m core.envcheck [--tasks ID ...] [--json] [--workers N]``: prove every task is solvable and judged.

For each task, on real desktops of an environment backend (default
``local-desktop``): reset (setup steps) -> the judge must score 0; then the
task's oracle (``metadata.oracle``, a list of actions) runs through the probe
-> the judge must score 1. Prints a report (``--json``: one JSON object with
per-task results and timings) and exits non-zero when any task fails.

Tasks come from ``--path`` (default: the bundled suite,
``package:environments.tasks/osworld``); relative file paths in a task
resolve against the task file's directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

import structlog

from core import logs
from core.cli import main_guard
from core.errors import EnvironmentFailure, ScaleCUAError
from core.interfaces import EnvironmentBackend, JudgeServices
from core.pluginmanager import Plugins, load_plugins
from core.tasks import load_tasks
from core.types import Action, Task

log = structlog.get_logger("core.envcheck")

DEFAULT_PATH = "package:environments.tasks/osworld"


@dataclass
class TaskCheck:
    """The outcome for one task; ``ok`` when it scored 0 before and 1 after its oracle."""

    task_id: str
    domain: str
    ok: bool = False
    score_before: float | None = None
    score_after: float | None = None
    status_before: str | None = None
    status_after: str | None = None
    error: str | None = None
    env_id: str | None = None
    #: environment failures (setup crashed, desktop died) retried on a fresh desktop
    env_retries: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def oracle_of(task: Task) -> list[Action]:
    raw = task.metadata.get("oracle")
    if not isinstance(raw, list) or not raw:
        raise ScaleCUAError(f"task {task.id}: metadata.oracle must be a non-empty list of actions")
    return [Action.model_validate(a) for a in raw]


async def _check_once(backend: EnvironmentBackend, plugins: Plugins, task: Task, result: TaskCheck) -> None:
    """One attempt; raises only for environment failures (the caller retries those on a fresh desktop)."""
    judge = JudgeServices.of(plugins)  # bundled tasks judge with registered getters and metrics only
    actions = oracle_of(task)
    started = time.monotonic()
    env = await backend.acquire()
    result.env_id = env.env_id
    result.timings["acquire_s"] = round(time.monotonic() - started, 2)
    discard = True
    try:
        t0 = time.monotonic()
        await env.reset(task)
        t1 = time.monotonic()
        before = await backend.evaluate(env, task, judge=judge, last_action=None)
        t2 = time.monotonic()
        for action in actions:
            await env.step(action)
        t3 = time.monotonic()
        after = await backend.evaluate(env, task, judge=judge, last_action=actions[-1])
        t4 = time.monotonic()
        discard = False
    finally:
        await backend.release(env, discard=discard)
    result.timings.update(reset_s=round(t1 - t0, 2), judge_before_s=round(t2 - t1, 2),
                          oracle_s=round(t3 - t2, 2), judge_after_s=round(t4 - t3, 2))
    result.score_before, result.status_before = before.score, before.status.value
    result.score_after, result.status_after = after.score, after.status.value
    problems = []
    if not (before.status.value == "ok" and before.score == 0.0):
        problems.append(f"before the oracle: score {before.score} ({before.status.value}) {before.error or ''}")
    if not after.success:
        problems.append(f"after the oracle: score {after.score} ({after.status.value}) {after.error or ''} "
                        f"{after.details.get('metrics')}")
    result.ok = not problems
    result.error = "; ".join(p.strip() for p in problems) or None


async def check_task(backend: EnvironmentBackend, plugins: Plugins, task: Task, *, env_retries: int = 1) -> TaskCheck:
    """Reset, judge (expect 0), run the oracle, judge (expect 1). Never raises: problems land in the result."""
    result = TaskCheck(task.id, task.domain)
    started = time.monotonic()
    for attempt in range(env_retries + 1):
        try:
            await _check_once(backend, plugins, task, result)
            break
        except ScaleCUAError as exc:
            if not isinstance(exc, EnvironmentFailure):  # a bad task (no oracle, broken setup): retrying cannot help
                result.error = f"{type(exc).__name__}: {exc}"
                break
            result.error = f"{type(exc).__name__}: {exc}"
            if attempt < env_retries:
                result.env_retries += 1
                log.warning("environment failure; retrying the task on a fresh desktop", task_id=task.id,
                            error=result.error)
        except Exception as exc:  # the desktop failed; like the training loop, retry on a fresh one
            result.error = f"{type(exc).__name__}: {exc}"
            if attempt < env_retries:
                result.env_retries += 1
                log.warning("environment failure; retrying the task on a fresh desktop", task_id=task.id,
                            error=result.error)
    result.timings["total_s"] = round(time.monotonic() - started, 2)
    log.info("task checked", task_id=task.id, ok=result.ok, error=result.error, **result.timings)
    return result


def create_backend(plugins: Plugins, backend_name: str, backend_options: dict[str, Any] | None,
                   workers: int) -> EnvironmentBackend:
    options = {"max_environments": workers, **(backend_options or {})}
    return plugins.registry("environment").create(backend_name, options)


async def check_tasks(tasks: Sequence[Task], *, backend_name: str = "local-desktop",
                      backend_options: dict[str, Any] | None = None, workers: int = 2,
                      plugins: Plugins | None = None, backend: EnvironmentBackend | None = None) -> dict[str, Any]:
    """Check ``tasks`` on ``workers`` desktops side by side; the JSON-ready report. A given ``backend`` (already
    created, e.g. to convert the tasks' format) is used instead of creating one, and closed at the end."""
    plugins = plugins or load_plugins()
    started = time.monotonic()
    backend = backend or create_backend(plugins, backend_name, backend_options, workers)
    queue: asyncio.Queue[Task] = asyncio.Queue()
    # slowest applications first so the workers finish together
    for task in sorted(tasks, key=lambda t: 0 if "libreoffice" in t.domain else 1):
        queue.put_nowait(task)
    results: list[TaskCheck] = []

    async def worker() -> None:
        while not queue.empty():
            results.append(await check_task(backend, plugins, queue.get_nowait()))

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(workers, len(tasks))))))
    finally:
        await backend.close()
    order = {t.id: i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: order[r.task_id])
    failed = [r.task_id for r in results if not r.ok]
    return {
        "backend": backend_name,
        "workers": workers,
        "tasks": len(results),
        "passed": len(results) - len(failed),
        "failed": failed,
        "wall_s": round(time.monotonic() - started, 2),
        "results": [asdict(r) for r in results],
    }


def select_tasks(paths: Sequence[str], ids: Sequence[str] | None, domains: Sequence[str] | None,
                 convert: Callable[[Mapping[str, Any]], Task] = Task.model_validate) -> list[Task]:
    """Tasks from ``paths``; ``convert`` reads each file's JSON (a backend's ``convert_task`` for its format)."""
    tasks = load_tasks(paths, include=ids or None, domains=domains or None, convert=convert)
    if not tasks:
        raise ScaleCUAError(f"no tasks selected from {list(paths)} (ids={ids}, domains={domains})")
    return tasks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.envcheck", description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", metavar="ID", help="only these task ids")
    parser.add_argument("--domains", nargs="*", help="only these domains (e.g. libreoffice_calc os)")
    parser.add_argument("--path", action="append", help=f"task file or directory (default: {DEFAULT_PATH})")
    parser.add_argument("--workers", type=int, default=2, help="desktops running side by side (default 2)")
    parser.add_argument("--backend", default="local-desktop", help="environment backend name")
    parser.add_argument("--backend-options", default="{}", help="JSON options for the backend")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args(argv)
    if args.workers < 1:
        raise ScaleCUAError("--workers must be at least 1")
    try:
        backend_options = json.loads(args.backend_options)
    except ValueError as exc:
        raise ScaleCUAError(f"--backend-options is not JSON: {exc}") from None

    logs.configure("warning" if args.json else "info")
    plugins = load_plugins()
    backend = create_backend(plugins, args.backend, backend_options, args.workers)
    try:
        tasks = select_tasks(args.path or [DEFAULT_PATH], args.tasks, args.domains, convert=backend.convert_task)
    except BaseException:
        asyncio.run(backend.close())
        raise
    report = asyncio.run(check_tasks(tasks, backend_name=args.backend, workers=args.workers, plugins=plugins,
                                     backend=backend))
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for r in report["results"]:
            mark = "ok  " if r["ok"] else "FAIL"
            print(f"{mark} {r['task_id']:<36} {r['timings'].get('total_s', 0):6.1f}s  {r['error'] or ''}")
        print(f"{report['passed']}/{report['tasks']} tasks passed in {report['wall_s']:.1f}s "
              f"with {report['workers']} workers")
    return 0 if not report["failed"] else 1


if __name__ == "__main__":
    sys.exit(main_guard(main))
