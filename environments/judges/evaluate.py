"""OSWorld's ``DesktopEnv.evaluate`` semantics over registered and generated judges.

1. Run ``evaluator.postconfig`` (same step format as setup).
2. ``func == "infeasible"``: score 1 exactly when the last action was FAIL.
   Any other task scores 0 when the last action was FAIL.
3. For each metric: ``result = getter(env, result_cfg)``; the optional
   ``expected`` getter; ``metric(result, expected, **options)`` (or
   ``metric(result, **options)`` without an expected config).
4. Several metrics combine with ``conj``: ``and`` stops at the first 0 and
   otherwise averages; ``or`` stops at the first 1 and otherwise takes the max.
   A result getter's :class:`FileNotFoundError` scores that metric 0. A getter's None (``vm_file`` for a file
   the desktop does not give, alone or in a list) goes to the metric as it is, as upstream.

Getters and metrics are looked up by name: first among the functions defined
in ``task.evaluator.code`` (generated code, run through the
:class:`~core.interfaces.JudgeExecutor`), then in the registries. Whatever goes
wrong becomes a :class:`~core.types.Judgement` with a non-ok status and score 0;
this function never raises for a judge failure. An environment failure under the
judge (the probe unreachable or timing out: :class:`~core.errors.EnvironmentFailure`)
is raised, so the episode is retried on a fresh desktop instead of being scored.
Files the environment's download mirror lacks (:class:`~core.errors.FilesMissing`, from
postconfig or a getter) fail the judgement like any error, and ``details["files_missing"]``
lists their URLs (``details["mirror"]``: where they were looked for).
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Sequence

import structlog

from core.errors import EnvironmentFailure, FilesMissing
from core.runtime.task_check import generated_functions as defined_functions  # one definition, shared
from core.interfaces import Environment, JudgeExecutor, JudgeServices
from core.types import Action, ActionType, Judgement, JudgementStatus, SetupStep, Task
from environments.judges.sandboxed import SandboxedMetric

log = structlog.get_logger(__name__)

#: runs postconfig steps: ``await runner(env, steps)``
#: ``runner(env, steps, cache_dir=...)``: runs postconfig steps; ``command`` steps' ``stdout`` files land in
#: ``cache_dir``, where the ``cache_file`` getter reads them
PostconfigRunner = Callable[..., Awaitable[Any]]


class JudgeFailure(Exception):
    """A judge could not produce a score; carries the Judgement status to report."""

    def __init__(self, status: JudgementStatus, message: str):
        super().__init__(message)
        self.status = status


class EvaluationEnv:
    """What getters receive: the live environment plus this evaluation's ``cache_dir`` and ``task``.

    Attribute access falls through to the environment, so getters written for
    OSWorld (``env.client``, ``env.screen_size``, ...) work unchanged.
    """

    def __init__(self, env: Environment, task: Task, cache_dir: Path):
        self.env = env
        self.task = task
        self.cache_dir = str(cache_dir)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


def last_action_failed(last_action: Any) -> bool:
    """Whether the episode ended with FAIL (our Action, OSWorld's string, or a computer_13 dict)."""
    if isinstance(last_action, Action):
        return last_action.type == ActionType.FAIL
    if isinstance(last_action, str):
        return last_action.strip().upper() == "FAIL"
    if isinstance(last_action, Mapping):
        return str(last_action.get("action_type", last_action.get("type", ""))).upper() == "FAIL"
    return False


def _lookup(registry: Any, name: str) -> Callable[..., Any] | None:
    """A function from a :class:`core.registry.Registry` or a plain mapping; None when absent."""
    if registry is None or name not in registry:
        return None
    item = registry.get(name) if hasattr(registry, "get") else registry[name]
    return getattr(item, "factory", item)


def _per_metric(value: Any, count: int, what: str) -> list[Any]:
    if count == 1 and not isinstance(value, list):
        return [value]
    if value is None:
        return [None] * count
    if not isinstance(value, list) or len(value) != count:
        raise JudgeFailure(JudgementStatus.CRASHED, f"evaluator.{what} must be a list of {count} entries (one per func)")
    return value


def _check_score(name: str, value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, (int, float)) or isinstance(value, complex):
        raise JudgeFailure(JudgementStatus.INVALID_SCORE, f"metric {name} returned {value!r}, not a number")
    score = float(value)
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise JudgeFailure(JudgementStatus.INVALID_SCORE, f"metric {name} returned {score}, outside [0, 1]")
    return score


class _Judge:
    """One evaluation: resolves names, runs getters and metrics, records details."""

    def __init__(self, task: Task, env: Environment, services: JudgeServices, cache_dir: Path):
        self.task = task
        self.env = env
        self.view = EvaluationEnv(env, task, cache_dir)
        self.executor = services.executor
        self.getters = services.getters
        self.metrics = services.metrics
        self.generated = defined_functions(task.evaluator.code)

    def _require_executor(self, name: str) -> JudgeExecutor:
        if self.executor is None:
            raise JudgeFailure(
                JudgementStatus.CRASHED,
                f"'{name}' runs untrusted code (the task's generated judge, or a metric that imports the agent's "
                f"program) but no judge executor is configured (set the 'judge' slot in the config)",
            )
        return self.executor

    async def get(self, config: Mapping[str, Any]) -> Any:
        if not isinstance(config, Mapping) or "type" not in config:
            raise JudgeFailure(JudgementStatus.CRASHED, f"getter config {config!r} needs a 'type'")
        kind = str(config["type"])
        for candidate in (kind, f"get_{kind}"):
            if candidate in self.generated:
                call = await self._require_executor(candidate).run_getter(
                    self.task.evaluator.code or "", candidate, self.env, config
                )
                if call.status == "file_not_found" or (call.error or "").startswith("FileNotFoundError"):
                    raise FileNotFoundError(call.error or candidate)
                if call.status != JudgementStatus.OK.value:
                    raise JudgeFailure(JudgementStatus(call.status), f"getter {candidate}: {call.error}")
                return call.value
        getter = _lookup(self.getters, kind)
        if getter is None:
            names = sorted(self.getters.names()) if hasattr(self.getters, "names") else sorted(self.getters or [])
            raise JudgeFailure(JudgementStatus.CRASHED, f"unknown getter type '{kind}'; available: {', '.join(names)}")
        return await getter(self.view, dict(config))

    async def score(self, name: str, result: Any, expected: Any, has_expected: bool, options: Mapping[str, Any]) -> float:
        if name in self.generated:
            call = await self._require_executor(name).run_metric(
                self.task.evaluator.code or "", name, result, expected, dict(options)
            )
            if call.status != JudgementStatus.OK.value:
                raise JudgeFailure(JudgementStatus(call.status), f"metric {name}: {call.error}")
            return _check_score(name, call.value)
        metric = _lookup(self.metrics, name)
        if metric is None:
            names = sorted(self.metrics.names()) if hasattr(self.metrics, "names") else sorted(self.metrics or [])
            raise JudgeFailure(JudgementStatus.CRASHED, f"unknown metric '{name}'; available: {', '.join(names)}")
        if isinstance(metric, SandboxedMetric):  # it runs the agent's code: only ever in the judge executor
            call = await self._require_executor(name).run_metric(
                metric.code, metric.function, result, expected if has_expected else None, dict(options),
                validate=False)
            if call.status != JudgementStatus.OK.value:
                raise JudgeFailure(JudgementStatus(call.status), f"metric {name}: {call.error}")
            return _check_score(name, call.value)
        if has_expected:
            value = await asyncio.to_thread(metric, result, expected, **options)
        else:
            value = await asyncio.to_thread(metric, result, **options)
        return _check_score(name, value)


async def evaluate(
    task: Task,
    env: Environment,
    *,
    judge: JudgeServices,
    last_action: Any,
    postconfig: PostconfigRunner | None = None,
    cache_dir: str | Path | None = None,
    timeout_s: float = 600.0,
) -> Judgement:
    """Score ``env``'s final state for ``task`` (see the module docstring); never raises for judge failures
    (environment failures propagate).

    ``postconfig`` runs ``task.evaluator.postconfig``: the backend passes its
    setup runner (e.g. :func:`environments.setup.run_setup_steps`); a task with
    postconfig steps and no runner is a crashed judgement. ``cache_dir`` keeps fetched files
    for inspection; by default they live in a temporary directory.
    """
    started = time.monotonic()
    details: dict[str, Any] = {"metrics": []}
    try:
        with tempfile.TemporaryDirectory(prefix="scalecua-judge-") as scratch:
            directory = Path(cache_dir) if cache_dir is not None else Path(scratch)
            directory.mkdir(parents=True, exist_ok=True)
            evaluation = _Judge(task, env, judge, directory)
            score = await asyncio.wait_for(_evaluate(evaluation, last_action, postconfig, details), timeout_s)
        status, error = JudgementStatus.OK, None
    except JudgeFailure as exc:
        score, status, error = 0.0, exc.status, str(exc)
        _note_missing(exc, details)
    except EnvironmentFailure:
        raise  # the desktop died or hung under the judge: the episode is retried, never scored
    except asyncio.TimeoutError:
        score, status, error = 0.0, JudgementStatus.TIMEOUT, f"evaluation took longer than {timeout_s:g} s"
    except Exception as exc:  # a judge must never take the run down with it
        score, status, error = 0.0, JudgementStatus.CRASHED, f"{type(exc).__name__}: {exc}"
        _note_missing(exc, details)
    details["duration_s"] = round(time.monotonic() - started, 3)
    if status != JudgementStatus.OK:
        log.warning("judge failed", task_id=task.id, status=status.value, error=error)
    return Judgement(score=score, status=status, error=error, details=details)


def _note_missing(exc: BaseException, details: dict[str, Any]) -> None:
    if (missing := FilesMissing.within(exc)) is not None:
        details.update(files_missing=missing.urls, mirror=str(missing.mirror))


async def _run_postconfig(env: Environment, steps: Sequence[SetupStep], runner: PostconfigRunner | None,
                          cache_dir: Path) -> None:
    if not steps:
        return
    if runner is None:  # the backend passes its setup runner (environments.setup): judges never import it
        raise JudgeFailure(JudgementStatus.CRASHED, f"task has {len(steps)} postconfig step(s) but no runner was "
                           "given: the environment backend must pass evaluate(..., postconfig=<its setup runner>)")
    await runner(env, steps, cache_dir=cache_dir)


async def _evaluate(judge: _Judge, last_action: Any, postconfig: PostconfigRunner | None, details: dict[str, Any]) -> float:
    evaluator = judge.task.evaluator
    try:
        await _run_postconfig(judge.env, evaluator.postconfig, postconfig, Path(judge.view.cache_dir))
    except EnvironmentFailure:
        raise
    except Exception as exc:
        raise JudgeFailure(JudgementStatus.CRASHED, f"postconfig failed: {type(exc).__name__}: {exc}") from exc

    funcs = evaluator.funcs
    failed = last_action_failed(last_action)
    if funcs == ["infeasible"]:
        details["infeasible"] = True
        return 1.0 if failed else 0.0
    if failed:
        details["last_action_fail"] = True
        return 0.0

    count = len(funcs)
    results = _per_metric(evaluator.result, count, "result")
    expecteds = _per_metric(evaluator.expected, count, "expected")
    options = [o or {} for o in _per_metric(evaluator.options, count, "options")]
    scores: list[float] = []
    for name, result_cfg, expected_cfg, opts in zip(funcs, results, expecteds, options):
        entry: dict[str, Any] = {"func": name}
        details["metrics"].append(entry)
        try:
            result = await judge.get(result_cfg) if result_cfg else None
        except FileNotFoundError as exc:
            entry.update(score=0.0, file_not_found=str(exc))
            if evaluator.conj == "and":
                return 0.0
            scores.append(0.0)
            continue
        expected = await judge.get(expected_cfg) if expected_cfg else None
        score = await judge.score(name, result, expected, bool(expected_cfg), opts)
        entry["score"] = score
        if evaluator.conj == "and" and score == 0.0:
            return 0.0
        if evaluator.conj == "or" and score == 1.0:
            return 1.0
        scores.append(score)
    if not scores:
        return 0.0
    return sum(scores) / len(scores) if evaluator.conj == "and" else max(scores)
