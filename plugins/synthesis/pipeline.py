"""The VeriGen loop: propose -> rule validator -> judger -> checker -> accept, or fix and retry -> record.

N worker coroutines take proposal jobs from a queue and share at most M
desktops (``environments``), holding one only while a desktop is needed (the
proposer's look, the checker's dry run), never while waiting for an LLM.
The gates run in sequence — rules, then the judger's static review, then
execution — so the expensive dry run only sees candidates that passed the
cheap checks (which is why removing a static role lowers the executable
rate of the candidates that reach execution, the paper's Table 4). After a
failed gate the fixer rewrites the candidate from all findings so far and
the candidate runs through every gate again, up to ``max_fix_rounds`` times.

Every candidate is written to the task store when proposed and after every
round; acceptance is committed before the worker moves on. A worker that
crashes records its candidate as ``error`` and goes on with the next job;
a desktop that fails is discarded and the step retried on another one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.errors import ConfigError, EnvironmentFailure
from core.interfaces import Environment, EnvironmentBackend, JudgeServices, SynthesisPipeline
from core.types import Observation, Task

from plugins.synthesis.llm import LLMError, ReplyFormatError, Usage
from plugins.synthesis.roles import (
    Checker,
    FailedProposal,
    Finding,
    Fixer,
    Harness,
    Judger,
    ProposalJob,
    Proposer,
    Validator,
)
from plugins.synthesis.store import TaskStore, safe_name
from plugins.synthesis.summary import summarize

log = structlog.get_logger(__name__)
T = TypeVar("T")


class PipelineOptions(BaseModel):
    """The loop's settings (the ``synthesis.pipeline`` slot)."""

    model_config = ConfigDict(extra="forbid")

    candidates: int = Field(12, ge=1, description="candidate budget (proposals) for this run")
    workers: int = Field(4, ge=1, description="N concurrent worker coroutines")
    environments: int | None = Field(None, ge=1, description="M desktops held at once (default: workers)")
    max_fix_rounds: int = Field(2, ge=0, description="repairs per candidate before it is rejected")
    env_retries: int = Field(2, ge=0, description="retries of a desktop step on another desktop")
    env_timeout_s: float = Field(900.0, gt=0, description="limit for one desktop step (look, dry run)")
    store: str | None = Field(None, description="SQLite task store (default: <run_dir>/tasks.sqlite)")
    export_dir: str | None = Field(None, description="OSWorld JSON export of accepted tasks (default: <run_dir>/tasks)")
    avoid_recent: int = Field(30, ge=0, description="accepted instructions shown to the proposer to avoid duplicates")


class EnvironmentGaveUp(Exception):
    """Every retry of a desktop step hit a failing desktop."""


class RoleFailure(Exception):
    """A role could not do its job (its LLM is unreachable, or its replies stay unusable): not the candidate's fault."""

    def __init__(self, role: str, message: str):
        super().__init__(message)
        self.role = role


@dataclass
class CandidateState:
    task: Task
    job: ProposalJob
    started: float
    usage: Usage = field(default_factory=Usage)
    findings: list[Finding] = field(default_factory=list)
    validation: dict[str, Any] = field(default_factory=dict)
    executable_first: bool | None = None


class VeriGenPipeline(SynthesisPipeline):
    """The loop over the configured roles (any of validator, judger, checker, fixer may be None)."""

    def __init__(self, options: PipelineOptions, *, roles: Mapping[str, Any], backend: EnvironmentBackend | None = None,
                 judge: JudgeServices | None = None, run_dir: Path | None = None, run_id: str | None = None,
                 role_names: Mapping[str, str | None] | None = None, **_: Any):
        self.options = options
        proposer = roles.get("proposer")
        if not isinstance(proposer, Proposer):
            raise ConfigError(["synthesis.proposer: required; add {name: llm-proposer, options: {...}}"])
        self.proposer: Proposer = proposer
        self.validator: Validator | None = roles.get("validator")
        self.judger: Judger | None = roles.get("judger")
        self.checker: Checker | None = roles.get("checker")
        self.fixer: Fixer | None = roles.get("fixer")
        names = dict(role_names or {})
        self.role_names = {r: names.get(r, type(roles[r]).__name__ if roles.get(r) is not None else None)
                           for r in ("proposer", "validator", "judger", "checker", "fixer")}
        needs_env = self.checker is not None or self.proposer.needs_environment
        if needs_env and backend is None:
            raise ConfigError(["environment: the checker and an observing proposer need desktops; add an environment "
                               "slot (e.g. {name: local-desktop}) or set synthesis.checker: null and "
                               "synthesis.proposer.options.observe: false"])
        self.backend = backend
        if backend is not None and judge is None:
            raise ConfigError(["synthesis.pipeline: desktops were given without the judge services to check tasks on "
                               "them; pass judge=JudgeServices.of(plugins, executor) with backend"])
        self.harness = Harness(backend, judge) if backend is not None and judge is not None else None
        self.run_dir = Path(run_dir) if run_dir is not None else Path.cwd()
        self.run_id = run_id or f"synth-{uuid.uuid4().hex[:8]}"
        self.store = TaskStore(Path(options.store).expanduser() if options.store else self.run_dir / "tasks.sqlite")
        self._env_slots = asyncio.Semaphore(options.environments or options.workers)
        self._progress: Any = None

    # -- desktops --------------------------------------------------------------

    async def with_env(self, what: str, fn: Callable[[Environment], Awaitable[T]]) -> T:
        """Run ``fn`` on a pooled desktop; a failing desktop is discarded and ``fn`` retried on another."""
        assert self.backend is not None
        last: BaseException | None = None
        for attempt in range(self.options.env_retries + 1):
            async with self._env_slots:
                env = await self.backend.acquire()
                discard = False
                try:
                    return await asyncio.wait_for(fn(env), self.options.env_timeout_s)
                except (EnvironmentFailure, asyncio.TimeoutError) as exc:
                    discard, last = True, exc
                    log.warning("desktop failed; retrying on another", what=what, attempt=attempt + 1,
                                error=f"{type(exc).__name__}: {exc}")
                finally:
                    try:
                        await self.backend.release(env, discard=discard)
                    except Exception as exc:  # a dead desktop must not hide the step's outcome
                        log.warning("releasing a desktop failed", error=str(exc))
        raise EnvironmentGaveUp(f"{what}: {self.options.env_retries + 1} desktops failed; last: {last}")

    async def _look(self, task: Task) -> Observation:
        """Reset a desktop with the proposer's context setup and return what it shows."""
        return await self.with_env(f"observe {task.snapshot}", lambda env: env.reset(task))

    # -- the loop ----------------------------------------------------------------

    async def run(self, progress: Any = None) -> dict[str, Any]:
        """Run the configured budget; returns the JSON summary. ``progress`` gets ``start(total)``/``update(row)``."""
        started = time.monotonic()
        jobs = self.proposer.plan(self.options.candidates)
        planned = sum(int(j.payload.get("count", 1)) for j in jobs)
        self._progress = progress
        if progress is not None:
            progress.start(planned)
        queue: asyncio.Queue[ProposalJob] = asyncio.Queue()
        for job in jobs:
            queue.put_nowait(job)
        log.info("synthesis started", run_id=self.run_id, jobs=len(jobs), planned_candidates=planned,
                 workers=self.options.workers, roles=self.role_names)
        results = await asyncio.gather(*(self._worker(i, queue) for i in range(self.options.workers)),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.error("worker died", error=f"{type(result).__name__}: {result}")
        export_dir = Path(self.options.export_dir).expanduser() if self.options.export_dir else self.run_dir / "tasks"
        exported = await asyncio.to_thread(self.store.export, export_dir, run_id=self.run_id)
        summary = summarize(self.store.candidates(run_id=self.run_id), wall_s=time.monotonic() - started,
                            roles=self.role_names)
        summary.update(run_id=self.run_id, store=str(self.store.path), export_dir=str(export_dir),
                       exported=len(exported), planned_candidates=planned)
        return summary

    async def _worker(self, index: int, queue: asyncio.Queue[ProposalJob]) -> None:
        while True:
            try:
                job = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                await self.run_job(job)
            except Exception as exc:  # one bad job must not stop the worker
                log.exception("job failed", worker=index, origin=job.origin, app=job.app, error=str(exc))

    async def run_job(self, job: ProposalJob) -> None:
        started = time.monotonic()
        usage = Usage()
        observation = None
        context = self.proposer.context_task(job) if self.proposer.needs_environment else None
        count = int(job.payload.get("count", 1))
        try:
            if context is not None:
                observation = await self._look(context)
            avoid = await asyncio.to_thread(self.store.instructions, app=job.app, limit=self.options.avoid_recent)
            proposals = await self.proposer.propose(job, observation, usage, avoid=avoid)
        except Exception as exc:  # every planned candidate is recorded, whatever went wrong
            if not isinstance(exc, (EnvironmentGaveUp, LLMError, ReplyFormatError)):
                log.exception("proposal job crashed", origin=job.origin, app=job.app)
            status = "rejected" if isinstance(exc, ReplyFormatError) else "error"
            proposals = [FailedProposal(job.app, job.origin, f"{type(exc).__name__}: {exc}", tuple(job.parents),
                                        status) for _ in range(count)]
        # the proposal's cost is shared by the candidates it produced
        shares = _split(usage, max(1, len(proposals)))
        await asyncio.gather(*(self._candidate(p, job, s, started) for p, s in zip(proposals, shares)))

    async def _candidate(self, proposal: Task | FailedProposal, job: ProposalJob, share: Usage, started: float) -> None:
        if isinstance(proposal, FailedProposal):
            cid = f"failed-{uuid.uuid4().hex[:16]}"
            await self.store.ainsert(cid, run_id=self.run_id, origin=proposal.origin, app=proposal.app,
                                     parents=list(proposal.parents), status=proposal.status, stage="propose",
                                     reason=proposal.error[:2000], **_usage_columns(share),
                                     latency_s=time.monotonic() - started)
            self._report(cid)
            return
        state = CandidateState(task=proposal, job=job, started=started)
        state.usage.merge(share)
        earlier = await asyncio.to_thread(self.store.find, proposal.id)
        if earlier is not None and earlier.status in ("accepted", "rejected", "duplicate"):
            await self._duplicate(proposal, job, earlier, share, started)
            return
        if earlier is not None:  # an earlier run stopped before deciding it: decide it now, under this run
            await self.store.aupdate(proposal.id, run_id=self.run_id, status="pending", stage="", reason="",
                                     task_json=proposal.to_json())
        else:
            await self.store.ainsert(proposal.id, run_id=self.run_id, origin=job.origin, app=job.app,
                                     parents=job.parents, task_json=proposal.to_json())
        try:
            status, stage, reason = await self._validate(state)
        except Exception as exc:  # our bug or an unexpected role failure: record it, keep the worker alive
            log.exception("candidate crashed", task_id=proposal.id)
            status, stage, reason = "error", "error", f"{type(exc).__name__}: {exc}"
        await self._finish(state, status, stage, reason)

    async def _duplicate(self, proposal: Task, job: ProposalJob, earlier: Any, share: Usage, started: float) -> None:
        """A task id the store already decided: recorded as a duplicate of it, never checked twice."""
        original = earlier.parents[0] if earlier.status == "duplicate" and earlier.parents else earlier.id
        cid = f"{proposal.id}@{uuid.uuid4().hex[:12]}"
        await self.store.ainsert(cid, run_id=self.run_id, origin=job.origin, app=job.app, parents=[original],
                                 status="duplicate", stage="propose", task_json=proposal.to_json(),
                                 reason=f"task id {proposal.id} is already in the store ({earlier.status} by run "
                                        f"{earlier.run_id}); not checked again",
                                 **_usage_columns(share), latency_s=time.monotonic() - started)
        log.info("duplicate task id; recorded, not checked again", task_id=proposal.id, earlier=earlier.status)
        self._report(cid)

    async def _validate(self, state: CandidateState) -> tuple[str, str, str]:
        """The gates and repairs; returns (status, stage, reason)."""
        for round_index in range(self.options.max_fix_rounds + 1):
            record: dict[str, Any] = {}
            try:
                findings, stage = await self._gates(state, record)
            except RoleFailure as exc:
                record["role_failure"] = {"role": exc.role, "error": str(exc)}
                await self.store.aadd_round(state.task.id, round_index, state.task.to_json(), record)
                return "error", exc.role, str(exc)[:2000]
            record["findings"] = [f.to_dict() for f in findings]
            await self.store.aadd_round(state.task.id, round_index, state.task.to_json(), record)
            if stage == "environment":
                return "error", "environment", findings[0].message if findings else "desktops failed"
            if not findings:
                return "accepted", "accepted", ""
            state.findings = findings
            if self.fixer is None or round_index == self.options.max_fix_rounds:
                why = "no fixer" if self.fixer is None else \
                    f"still failing after {round_index} repair{'' if round_index == 1 else 's'}"
                return "rejected", stage, f"{why}: " + " | ".join(f.message for f in findings)[:2000]
            try:
                state.task = await self.fixer.fix(state.task, findings, state.usage)
            except LLMError as exc:
                return "error", "fix", f"the fixer's LLM failed: {exc}"[:2000]
            except ReplyFormatError as exc:
                return "rejected", "fix", f"the fixer's repair is unusable: {exc}"[:2000]
            await self.store.aupdate(state.task.id, task_json=state.task.to_json(), repairs=round_index + 1)
        raise AssertionError("unreachable")

    async def _gates(self, state: CandidateState, record: dict[str, Any]) -> tuple[list[Finding], str]:
        task, v = state.task, state.validation
        if self.validator is not None:
            reasons = self.validator.validate(task)
            v["rule_pass"] = not reasons
            record["rule"] = {"pass": not reasons, "reasons": reasons}
            if reasons:
                return [Finding("rule", r) for r in reasons], "rule"
        if self.judger is not None:
            try:
                verdict = await self.judger.review(task, state.usage)
            except (LLMError, ReplyFormatError) as exc:
                raise RoleFailure("judger", f"the judger could not review the task: {exc}") from exc
            v.update(llm_judge_pass=verdict.accept, llm_judge_score=verdict.score, suggestions=verdict.suggestions)
            record["judger"] = verdict.to_dict()
            if not verdict.accept:
                findings = [Finding("judger", r) for r in verdict.reasons] or [Finding("judger", "rejected")]
                findings += [Finding("judger", f"suggested repair: {s}") for s in verdict.suggestions]
                return findings, "judger"
        if self.checker is not None:
            assert self.harness is not None
            checker, harness = self.checker, self.harness
            try:
                report = await self.with_env(f"check {task.id}", lambda env: checker.check(task, env, harness,
                                                                                           state.usage))
            except EnvironmentGaveUp as exc:
                return [Finding("environment", str(exc))], "environment"
            except LLMError as exc:
                raise RoleFailure("checker", f"the checker's LLM failed: {exc}") from exc
            record["checker"] = report.to_dict()
            if state.executable_first is None and report.executable is not None:
                state.executable_first = report.executable
            v.update(execution_pass=report.passed, executable=report.executable, reachable=report.reachable,
                     initial_score=report.initial.score if report.initial else None,
                     final_score=report.final.score if report.final else None)
            if not report.passed:
                return report.findings or [Finding("checker", "the dry run failed")], "checker"
            if report.trajectory is not None and report.trajectory.turns:
                await asyncio.to_thread(self._save_demonstration, report.trajectory, task.metadata.get("split"))
        return [], "accepted"

    def _save_demonstration(self, trajectory: Any, split: Any = None) -> None:
        """An accepted task's successful dry run -> ``<run_dir>/demonstrations/<task id>.jsonl`` (+ screenshots),
        ``demonstrations/<split>/`` for a task whose ``metadata.split`` names one (as the export sorts them): a
        warm-start demonstration (``warm_start.demonstrations.paths``) of a task in the export. A split's
        folder holds that split's tasks only, so a warm start on ``train`` never reads a test task's run."""
        from core.runtime.metrics import write_trajectories

        folder = self.run_dir / "demonstrations"
        if isinstance(split, str) and split:
            folder = folder / safe_name(split)
        path = folder / f"{trajectory.task_id}.jsonl"
        write_trajectories(path, [trajectory], screenshots=True)
        log.info("dry run saved as a demonstration", task_id=trajectory.task_id, path=str(path))

    async def _finish(self, state: CandidateState, status: str, stage: str, reason: str) -> None:
        v = state.validation
        v["repairs"] = int(state.task.metadata.get("repairs", 0))
        task_json = state.task.to_json()
        task_json["validation"] = dict(v)
        await self.store.aupdate(
            state.task.id, status=status, stage=stage, reason=reason, task_json=task_json,
            rule_pass=v.get("rule_pass"), judge_pass=v.get("llm_judge_pass"), judge_score=v.get("llm_judge_score"),
            exec_pass=v.get("execution_pass"), executable=state.executable_first,
            initial_score=v.get("initial_score"), final_score=v.get("final_score"), repairs=v["repairs"],
            validation=v, latency_s=time.monotonic() - state.started, **_usage_columns(state.usage))
        log.info("candidate decided", task_id=state.task.id, status=status, stage=stage, repairs=v["repairs"])
        self._report(state.task.id)

    def _report(self, candidate_id: str) -> None:
        if self._progress is not None:
            self._progress.update(self.store.get(candidate_id))

    async def close(self) -> None:
        for role in (self.proposer, self.judger, self.checker, self.fixer):
            if role is not None and hasattr(role, "close"):
                await role.close()
        self.store.close()


def _split(usage: Usage, parts: int) -> list[Usage]:
    """Share a proposal's usage among the candidates it produced (remainders go to the first), so sums add up."""
    shares = []
    for i in range(parts):
        share = Usage()
        first = i == 0
        share.calls = usage.calls // parts + (usage.calls % parts if first else 0)
        share.failed_calls = usage.failed_calls // parts + (usage.failed_calls % parts if first else 0)
        share.prompt_tokens = usage.prompt_tokens // parts + (usage.prompt_tokens % parts if first else 0)
        share.completion_tokens = usage.completion_tokens // parts + (usage.completion_tokens % parts if first else 0)
        share.cost_usd = usage.cost_usd / parts
        share.llm_seconds = usage.llm_seconds / parts
        shares.append(share)
    return shares


def _usage_columns(usage: Usage) -> dict[str, Any]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "cost_usd": usage.cost_usd, "llm_calls": usage.calls}
