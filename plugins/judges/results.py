"""Judge results: metric score checks, the sandbox report -> JudgeCall mapping, failure logging."""

from __future__ import annotations

import math
from typing import Any, Mapping

import structlog

from core.interfaces import JudgeCall
from core.types import Judgement, JudgementStatus

log = structlog.get_logger(__name__)

OK = JudgementStatus.OK.value


def check_score(value: Any) -> tuple[str, float, str | None]:
    """(status, score, error) for a metric's return value: a real number in [0, 1] or invalid_score.

    ``bool`` is refused on purpose: the contract is a float score, and a judge
    returning ``True`` usually means a comparison leaked out unconverted.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return JudgementStatus.INVALID_SCORE.value, 0.0, f"metric returned {shown} ({type(value).__name__}), not a float"
    score = float(value)
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        return JudgementStatus.INVALID_SCORE.value, 0.0, f"metric returned {score!r}, outside [0, 1]"
    return OK, score, None


def call_from_report(report: Mapping[str, Any], duration_s: float) -> JudgeCall:
    """Turn the runner's JSON report into a :class:`JudgeCall` (``sandbox_error`` counts as crashed)."""
    status = str(report.get("status", "crashed"))
    if status == "sandbox_error":
        log.error("judge sandbox failed", error=report.get("error"))
        status = JudgementStatus.CRASHED.value
    valid = {s.value for s in JudgementStatus}
    if status not in valid:
        return JudgeCall(JudgementStatus.CRASHED.value, None, f"unknown sandbox status {status!r}", duration_s)
    if status == OK:
        return JudgeCall(OK, report.get("value"), None, duration_s)
    error = report.get("error") or status
    output = report.get("output")
    if output:
        error = f"{error}\n--- judge output (first {len(output)} characters) ---\n{output[:1000]}"
    return JudgeCall(status, None, error, duration_s)


def finish_metric(call: JudgeCall) -> JudgeCall:
    """Check a metric call's value; anything but a score in [0, 1] becomes invalid_score."""
    if call.status != OK:
        return call
    status, score, error = check_score(call.value)
    return JudgeCall(status, score if status == OK else None, error, call.duration_s)


def log_outcome(call: JudgeCall, *, kind: str, function: str, task_id: str | None, executor: str) -> JudgeCall:
    """Failures are logged with the task id (they score 0); successes at debug level.

    The task id is ``task_id`` when given, else whatever the caller bound with
    :func:`core.runtime.logs.bind` (the training loop binds each episode's task id).
    """
    fields = dict(kind=kind, function=function, executor=executor, status=call.status,
                  duration_s=round(call.duration_s, 4))
    if task_id is not None:  # else keep a task_id the caller bound through structlog's contextvars
        fields["task_id"] = task_id
    if call.status == OK:
        log.debug("judge call ok", **fields)
    else:
        first_line = (call.error or "").splitlines()[0] if call.error else None
        log.warning("judge call failed; it scores 0", error=first_line, **fields)
    return call


def judgement_from_call(call: JudgeCall) -> Judgement:
    """A metric call as a :class:`Judgement`: its score when ok, else 0 with the status and error."""
    status = JudgementStatus(call.status)
    if status != JudgementStatus.OK:
        return Judgement(score=0.0, status=status, error=call.error)
    checked, score, error = check_score(call.value)
    if checked != OK:
        return Judgement(score=0.0, status=JudgementStatus(checked), error=error)
    return Judgement(score=score, status=status)
