"""The contracts of VeriGen's roles and the records they exchange.

The loop (:mod:`plugins.synthesis.pipeline`) drives five filtering roles, each
a slot under ``synthesis:`` in the config; a slot set to ``null`` removes that
role from the loop (the paper's role ablation, Table 4):

* ``proposer``  — writes candidate tasks (from knowledge documents and a live
  desktop, or from recorded rollouts: trajectory-guided synthesis);
* ``validator`` — static rules over the task and its judge code (no LLM);
* ``judger``    — an LLM's static semantic review: verdict + reasons;
* ``checker``   — a dry run on a live desktop, then the judge on the untouched
  initial state (must score 0) and on the reached state (must score 1);
* ``fixer``     — repairs a candidate from everyone's findings.

A sixth slot, ``pipeline``, chooses the loop itself and holds its settings.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from core.interfaces import Environment, EnvironmentBackend, JudgeServices, SynthesizerRole
from core.types import Action, Judgement, Observation, Task, Trajectory

from plugins.synthesis.llm import Usage

#: the filtering roles, in loop order
ROLES = ("proposer", "validator", "judger", "checker", "fixer")
#: where a candidate's journey can end
STAGES = ("propose", "rule", "judger", "checker", "fix", "environment", "error", "accepted")


@dataclass
class Finding:
    """One problem found by a validator; ``source`` is the role (rule, judger, checker) that found it."""

    source: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "message": self.message}


@dataclass
class Verdict:
    """The judger's review."""

    accept: bool
    score: float
    reasons: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"accept": self.accept, "score": self.score, "reasons": self.reasons, "suggestions": self.suggestions}


@dataclass
class CheckReport:
    """The checker's dry run.

    ``executable``: the judge ran without error on every state it was asked
    to score (None when it never ran, e.g. the setup failed). ``reachable``:
    the checker agent finished the task (None when the dry run did not start).
    """

    passed: bool
    executable: bool | None = None
    reachable: bool | None = None
    initial: Judgement | None = None
    final: Judgement | None = None
    steps: int = 0
    findings: list[Finding] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    #: the dry run as a trajectory in the policy's own action format (responses re-written by the
    #: environment's ``format_response``), with its observations: a demonstration once the judge scores 1
    trajectory: Trajectory | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "executable": self.executable,
            "reachable": self.reachable,
            "initial": self.initial.model_dump(mode="json") if self.initial else None,
            "final": self.final.model_dump(mode="json") if self.final else None,
            "steps": self.steps,
            "findings": [f.to_dict() for f in self.findings],
            "transcript": self.transcript,
        }


@dataclass
class ProposalJob:
    """One unit of proposer work: explore an app, decompose a failed task, or compose solved ones."""

    origin: str  # explore | decompose | compose
    app: str
    payload: dict[str, Any] = field(default_factory=dict)
    parents: list[str] = field(default_factory=list)


@dataclass
class FailedProposal:
    """A proposal that never became a task (unparsable after re-asking, or its LLM call failed).

    It still counts as a candidate, recorded at stage ``propose``: ``rejected``
    when the replies were unusable, ``error`` when the LLM or the desktop failed.
    """

    app: str
    origin: str
    error: str
    parents: tuple[str, ...] = ()
    status: str = "rejected"


@dataclass
class Harness:
    """What the checker needs of the environment kind: its agent protocol and its judge."""

    backend: EnvironmentBackend
    judge: JudgeServices
    evaluate_timeout_s: float = 600.0

    def system_prompt(self, task: Task) -> str:
        return self.backend.system_prompt(task)

    def parse_response(self, text: str) -> list[Action]:
        return self.backend.parse_response(text)

    async def evaluate(self, env: Environment, task: Task, last_action: Action | None) -> Judgement:
        return await self.backend.evaluate(env, task, judge=self.judge, last_action=last_action)


class Proposer(SynthesizerRole):
    role: ClassVar[str] = "proposer"
    #: whether :meth:`propose` wants a live observation (the loop then resets an environment first)
    needs_environment: bool = True

    @abc.abstractmethod
    def plan(self, budget: int) -> list[ProposalJob]:
        """Jobs for this run; ``budget`` is the number of candidates wanted."""

    def context_task(self, job: ProposalJob) -> Task | None:
        """The setup to reset a desktop with before observing it for ``job`` (None: no observation)."""
        return None

    @abc.abstractmethod
    async def propose(self, job: ProposalJob, observation: Observation | None, usage: Usage, *,
                      avoid: Sequence[str] = ()) -> list[Task | FailedProposal]:
        """Candidate tasks for ``job``; ``avoid`` lists instructions already accepted (no duplicates)."""

    async def close(self) -> None:
        return None


class Validator(SynthesizerRole):
    role: ClassVar[str] = "validator"

    @abc.abstractmethod
    def validate(self, task: Task) -> list[str]:
        """Every rule the task breaks (empty when it passes)."""


class Judger(SynthesizerRole):
    role: ClassVar[str] = "judger"

    @abc.abstractmethod
    async def review(self, task: Task, usage: Usage) -> Verdict: ...

    async def close(self) -> None:
        return None


class Checker(SynthesizerRole):
    role: ClassVar[str] = "checker"

    @abc.abstractmethod
    async def check(self, task: Task, env: Environment, harness: Harness, usage: Usage) -> CheckReport:
        """Dry-run ``task`` on ``env``; environment failures propagate (the loop retries elsewhere)."""

    async def close(self) -> None:
        return None


class Fixer(SynthesizerRole):
    role: ClassVar[str] = "fixer"

    @abc.abstractmethod
    async def fix(self, task: Task, findings: Sequence[Finding], usage: Usage) -> Task:
        """A repaired version of ``task`` (same id) addressing ``findings``."""

    async def close(self) -> None:
        return None
