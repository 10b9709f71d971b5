"""``python -m core.envcheck [--tasks ID ...] [--judge-only] [--mirror DIR] [--json]``: check tasks on real desktops.

For each task, on real desktops of an environment backend (default
``local-desktop``): reset (setup steps) -> the judge must score 0; then the
task's oracle (``metadata.oracle``, a list of actions) runs through the probe
-> the judge must score 1. Prints a report (``--json``: one JSON object with
per-task results and timings) and exits non-zero when any task fails.

``--judge-only`` checks a suite without oracles (e.g. upstream OSWorld's):
per task, reset -> judge the untouched state; the task passes when the reset
worked, the judge ran (status ok) and scored 0 (an untouched desktop must not
pass). A task nothing here can set up or judge (unknown step type, getter or
metric) fails without a desktop. The report counts per domain: tasks, reset
ok, judge ok, score 0, files missing, failed, and names each failure's reason.

``--mirror DIR`` serves every http(s) file a task fetches (``download`` setup
and postconfig steps, ``cloud_file`` gold files) from DIR instead of the
network, so the check runs offline: it sets the backend's ``download_mirror``
option (local-desktop, the container backends, scienceboard). Layout:
``https://HOST/A/B%20C.xlsx?x=1`` is ``DIR/HOST/A/B C.xlsx`` (host, then the
URL path percent-decoded; scheme, port, query and fragment ignored; symlinks
are followed, so a Hugging Face snapshot can be linked in, e.g.
``DIR/huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main``
-> the snapshot). A task whose files the mirror lacks (its reset, or its
judgement, ends in :class:`~core.errors.FilesMissing`) is reported as "files
missing" with the URLs (not a failure), and the check goes on. Exit status: 0
when every task passed or only misses files, 1 when any failed, 2 for bad
input (e.g. no such mirror).

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
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import structlog

from core.runtime import logs
from core.commands.cli import main_guard
from core.errors import ConfigError, EnvironmentFailure, FilesMissing, ScaleCUAError
from core.interfaces import EnvironmentBackend, JudgeServices
from core.pluginmanager import Plugins, load_plugins
from core.runtime.task_check import task_problems
from core.runtime.tasks import load_tasks
from core.types import Action, Judgement, Task

log = structlog.get_logger("core.envcheck")

DEFAULT_PATH = "package:environments.tasks/osworld"


@dataclass
class TaskCheck:
    """The outcome for one task; ``ok`` when it scored 0 before and 1 after its oracle (``--judge-only``: when its
    reset worked and the untouched state was judged, status ok, score 0). ``outcome``: ``ok``, ``files_missing``
    (the download mirror lacks ``files_missing``' URLs: not a failure) or ``failed``."""

    task_id: str
    domain: str
    ok: bool = False
    outcome: str = "failed"
    #: whether the reset (setup steps) completed; None when no desktop was tried
    reset_ok: bool | None = None
    files_missing: list[str] = field(default_factory=list)
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


def _missing_files(result: TaskCheck, *judgements: Judgement) -> bool:
    """Whether a judgement failed for files the download mirror lacks (recorded in ``result``)."""
    urls = [url for j in judgements for url in j.details.get("files_missing") or []]
    if urls:
        result.files_missing = list(dict.fromkeys(urls))
        result.error = next(j.error for j in judgements if j.details.get("files_missing"))
    return bool(urls)


async def _run_once(backend: EnvironmentBackend, judge: JudgeServices, task: Task, result: TaskCheck,
                    oracle: Sequence[Action] | None) -> tuple[Judgement, Judgement | None]:
    """Acquire, reset, judge the untouched state and, with an ``oracle``, replay it and judge again; timings into
    ``result``. Raises what the reset or the desktop raises. Without an oracle (``--judge-only``) a desktop whose
    task setup failed is kept for the next task (only an environment failure discards it)."""
    started = time.monotonic()
    env = await backend.acquire()
    result.env_id = env.env_id
    result.timings["acquire_s"] = round(time.monotonic() - started, 2)
    discard = True
    after = None
    try:
        t0 = time.monotonic()
        result.reset_ok = False
        try:
            await env.reset(task)
        except ScaleCUAError as exc:
            discard = oracle is not None or isinstance(exc, EnvironmentFailure)
            raise
        result.reset_ok = True
        t1 = time.monotonic()
        before = await backend.evaluate(env, task, judge=judge, last_action=None)
        t2 = time.monotonic()
        result.timings.update(reset_s=round(t1 - t0, 2), judge_before_s=round(t2 - t1, 2))
        if oracle is not None:
            for action in oracle:
                await env.step(action)
            t3 = time.monotonic()
            after = await backend.evaluate(env, task, judge=judge, last_action=oracle[-1])
            result.timings.update(oracle_s=round(t3 - t2, 2), judge_after_s=round(time.monotonic() - t3, 2))
        discard = False
    finally:
        await backend.release(env, discard=discard)
    result.score_before, result.status_before = before.score, before.status.value
    if after is not None:
        result.score_after, result.status_after = after.score, after.status.value
    return before, after


async def _judge_once(backend: EnvironmentBackend, judge: JudgeServices, task: Task, result: TaskCheck) -> None:
    """``--judge-only``: reset, then judge the untouched state; raises like :func:`_check_once`."""
    before, _ = await _run_once(backend, judge, task, result, None)
    result.error = None  # an earlier attempt's environment failure is behind us
    if _missing_files(result, before):
        pass  # reported as files missing, not as a failure
    elif before.status.value != "ok":
        result.error = f"the judge failed on the untouched state: {before.status.value}: {before.error or ''}".strip()
    elif before.score != 0.0:
        result.error = (f"the untouched state scores {before.score} (it must score 0: the task is solved before "
                        f"the agent acts) {before.details.get('metrics') or ''}").strip()
    result.ok = result.error is None


async def _check_once(backend: EnvironmentBackend, judge: JudgeServices, task: Task, result: TaskCheck) -> None:
    """One attempt; raises only for environment failures (the caller retries those on a fresh desktop)."""
    before, after = await _run_once(backend, judge, task, result, oracle_of(task))
    assert after is not None
    if _missing_files(result, before, after):
        return
    problems = []
    if not (before.status.value == "ok" and before.score == 0.0):
        problems.append(f"before the oracle: score {before.score} ({before.status.value}) {before.error or ''}")
    if not after.success:
        problems.append(f"after the oracle: score {after.score} ({after.status.value}) {after.error or ''} "
                        f"{after.details.get('metrics')}")
    result.ok = not problems
    result.error = "; ".join(p.strip() for p in problems) or None


async def check_task(backend: EnvironmentBackend, plugins: Plugins, task: Task, *, env_retries: int = 1,
                     judge_only: bool = False) -> TaskCheck:
    """Reset, judge (expect 0), run the oracle, judge (expect 1); ``judge_only``: reset and judge (expect 0).
    Files the backend's download mirror lacks (:class:`~core.errors.FilesMissing` from the reset, or recorded by
    the judge) make the outcome ``files_missing``. Never raises: problems land in the result."""
    result = TaskCheck(task.id, task.domain)
    started = time.monotonic()
    judge = JudgeServices.of(plugins)  # bundled tasks judge with registered getters and metrics only
    problems = task_problems(task, backend, judge) if judge_only else []
    if problems:
        result.error = "cannot be set up or judged here: " + "; ".join(problems)
    for attempt in range(0 if problems else env_retries + 1):
        try:
            if judge_only:
                await _judge_once(backend, judge, task, result)
            else:
                await _check_once(backend, judge, task, result)
            break
        except Exception as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            if (missing := FilesMissing.within(exc)) is not None:  # backends raise setup errors from it
                result.files_missing = missing.urls
                break
            if isinstance(exc, ScaleCUAError) and not isinstance(exc, EnvironmentFailure):
                break  # a bad task (no oracle, broken setup): retrying cannot help
            # the desktop failed; like the training loop, retry on a fresh one
            if attempt < env_retries:
                result.env_retries += 1
                log.warning("environment failure; retrying the task on a fresh desktop", task_id=task.id,
                            error=result.error)
    result.outcome = "files_missing" if result.files_missing else ("ok" if result.ok else "failed")
    result.timings["total_s"] = round(time.monotonic() - started, 2)
    log.info("task checked", task_id=task.id, outcome=result.outcome, error=result.error, **result.timings)
    return result


def mirror_dir(path: str | Path) -> Path:
    """``--mirror``'s directory, absolute; a ConfigError (exit 2) naming the fix when it is not a directory."""
    mirror = Path(path).expanduser()
    if not mirror.is_dir():
        raise ConfigError([f"--mirror: download mirror {mirror} is not a directory: create it and put each file at "
                           "<mirror>/<host>/<url path, percent-decoded> (e.g. <mirror>/huggingface.co/datasets/..."
                           "/file.xlsx), or leave --mirror out to download from the network"])
    return mirror.resolve()


def create_backend(plugins: Plugins, backend_name: str, backend_options: dict[str, Any] | None,
                   workers: int, mirror: Path | None = None) -> EnvironmentBackend:
    """The backend, with ``mirror`` as its ``download_mirror`` option (a ConfigError when it has none)."""
    registry = plugins.registry("environment")
    options = {"max_environments": workers, **(backend_options or {})}
    if mirror is not None:
        if backend_name in registry and "download_mirror" not in registry.get(backend_name).options_model.model_fields:
            raise ConfigError([f"--mirror: the {backend_name} backend takes no download_mirror option (local-desktop, "
                               "the container backends and scienceboard do)"])
        options["download_mirror"] = str(mirror)
    return registry.create(backend_name, options)


async def check_tasks(tasks: Sequence[Task], *, backend_name: str = "local-desktop",
                      backend_options: dict[str, Any] | None = None, workers: int = 2,
                      plugins: Plugins | None = None, backend: EnvironmentBackend | None = None,
                      judge_only: bool = False, mirror: str | Path | None = None) -> dict[str, Any]:
    """Check ``tasks`` on ``workers`` desktops side by side; the JSON-ready report. A given ``backend`` (already
    created, e.g. to convert the tasks' format) is used instead of creating one, and closed at the end.
    ``judge_only`` and ``mirror``: see the module docstring (a mirror that is not a directory: ConfigError); a
    given backend was created with the mirror (:func:`create_backend`), ``mirror`` then only names it in the report."""
    mirror = mirror_dir(mirror) if mirror is not None else None
    plugins = plugins or load_plugins()
    started = time.monotonic()
    backend = backend or create_backend(plugins, backend_name, backend_options, workers, mirror)
    queue: asyncio.Queue[Task] = asyncio.Queue()
    # slowest applications first so the workers finish together
    for task in sorted(tasks, key=lambda t: 0 if "libreoffice" in t.domain else 1):
        queue.put_nowait(task)
    results: list[TaskCheck] = []

    async def worker() -> None:
        while not queue.empty():
            results.append(await check_task(backend, plugins, queue.get_nowait(), judge_only=judge_only))

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(workers, len(tasks))))))
    finally:
        await backend.close()
    order = {t.id: i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: order[r.task_id])
    failed = [r.task_id for r in results if r.outcome == "failed"]
    missing = [r.task_id for r in results if r.outcome == "files_missing"]
    report: dict[str, Any] = {
        "backend": backend_name,
        "workers": workers,
        "judge_only": judge_only,
        "mirror": str(mirror) if mirror is not None else None,
        "tasks": len(results),
        "passed": len(results) - len(failed) - len(missing),
        "failed": failed,
        "files_missing": missing,
        "wall_s": round(time.monotonic() - started, 2),
    }
    if judge_only:
        report["domains"] = domain_counts(results)
    report["results"] = [asdict(r) for r in results]
    return report


def domain_counts(results: Sequence[TaskCheck]) -> dict[str, dict[str, int]]:
    """Per domain (sorted): tasks, reset ok, judge ok (status ok), score 0 (judge ok and 0), files missing, failed."""
    counts: dict[str, dict[str, int]] = {}
    for r in sorted(results, key=lambda r: r.domain):
        c = counts.setdefault(r.domain or "(none)", dict.fromkeys(DOMAIN_COLUMNS, 0))
        c["tasks"] += 1
        c["reset_ok"] += bool(r.reset_ok)
        c["judge_ok"] += r.status_before == "ok"
        c["score_0"] += r.status_before == "ok" and r.score_before == 0.0
        c["files_missing"] += r.outcome == "files_missing"
        c["failed"] += r.outcome == "failed"
    return counts


DOMAIN_COLUMNS = ("tasks", "reset_ok", "judge_ok", "score_0", "files_missing", "failed")


def select_tasks(paths: Sequence[str], ids: Sequence[str] | None, domains: Sequence[str] | None,
                 convert: Callable[[Mapping[str, Any]], Task] = Task.model_validate) -> list[Task]:
    """Tasks from ``paths``; ``convert`` reads each file's JSON (a backend's ``convert_task`` for its format)."""
    tasks = load_tasks(paths, include=ids or None, domains=domains or None, convert=convert)
    if not tasks:
        raise ScaleCUAError(f"no tasks selected from {list(paths)} (ids={ids}, domains={domains})")
    return tasks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m core.envcheck", description=__doc__.splitlines()[0],
        epilog="Mirror layout (--mirror DIR): the file for https://HOST/A/B%20C.xlsx?x=1 is DIR/HOST/A/B C.xlsx "
               "(host, then the URL path percent-decoded; scheme, port, query and fragment ignored; symlinks "
               "followed). Exit status: 0 when every task passed or only misses mirror files, 1 when any failed, "
               "2 for bad input.")
    parser.add_argument("--tasks", nargs="*", metavar="ID", help="only these task ids")
    parser.add_argument("--domains", nargs="*", help="only these domains (e.g. libreoffice_calc os)")
    parser.add_argument("--path", action="append", help=f"task file or directory (default: {DEFAULT_PATH})")
    parser.add_argument("--workers", type=int, default=2, help="desktops running side by side (default 2)")
    parser.add_argument("--backend", default="local-desktop", help="environment backend name")
    parser.add_argument("--backend-options", default="{}", help="JSON options for the backend")
    parser.add_argument("--judge-only", action="store_true",
                        help="no oracle: reset each task and judge the untouched state, which must score 0; "
                             "per-domain counts of reset ok, judge ok, score 0, files missing, failed")
    parser.add_argument("--mirror", metavar="DIR",
                        help="serve http(s) task files (download steps, cloud_file gold files) from DIR instead of "
                             "the network, laid out as DIR/<host>/<url path> (see below); tasks whose files DIR "
                             "lacks are reported as files missing, not as failures")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args(argv)
    if args.workers < 1:
        raise ConfigError(["--workers must be at least 1"])
    try:
        backend_options = json.loads(args.backend_options)
    except ValueError as exc:
        raise ConfigError([f"--backend-options is not JSON: {exc}"]) from None
    mirror = mirror_dir(args.mirror) if args.mirror is not None else None  # before any backend starts

    logs.configure("warning" if args.json else "info")
    plugins = load_plugins()
    backend = create_backend(plugins, args.backend, backend_options, args.workers, mirror)
    try:
        tasks = select_tasks(args.path or [DEFAULT_PATH], args.tasks, args.domains, convert=backend.convert_task)
    except BaseException:
        asyncio.run(backend.close())
        raise
    report = asyncio.run(check_tasks(tasks, backend_name=args.backend, workers=args.workers, plugins=plugins,
                                     backend=backend, judge_only=args.judge_only, mirror=mirror))
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_report(report)
    return 0 if not report["failed"] else 1


def print_report(report: Mapping[str, Any]) -> None:
    marks = {"ok": "ok  ", "files_missing": "MISS", "failed": "FAIL"}
    for r in report["results"]:
        print(f"{marks[r['outcome']]} {r['task_id']:<36} {r['timings'].get('total_s', 0):6.1f}s  {r['error'] or ''}")
    if report.get("domains"):
        print(f"\n{'domain':<20}" + "".join(f"{c:>14}" for c in DOMAIN_COLUMNS))
        for domain, counts in report["domains"].items():
            print(f"{domain:<20}" + "".join(f"{counts[c]:>14}" for c in DOMAIN_COLUMNS))
    print(f"{report['passed']}/{report['tasks']} tasks passed, {len(report['files_missing'])} with files missing, "
          f"{len(report['failed'])} failed, in {report['wall_s']:.1f}s with {report['workers']} workers")


if __name__ == "__main__":
    sys.exit(main_guard(main))
