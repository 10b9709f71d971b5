"""The oracle checker: a candidate that carries its own solution is checked by running it on a live desktop.

For a task with ``metadata.oracle`` (the family variants, bundled tasks) there is no need for an LLM to find a
way through: on a desktop reset with the task's setup, the judge must score the untouched state 0; after the
oracle's actions it must score 1; and after each of the first ``near_misses`` entries of
``metadata.near_misses`` (plausible wrong solutions: the decoy touched, the wrong file, a sibling's oracle),
run on a fresh reset, it must score 0 again. A judge that fails, or a candidate without an oracle, is a finding
that names what went wrong; an unreachable desktop propagates (the loop retries on another one).

The oracle's run is kept as the task's demonstration (``CheckReport.trajectory``: each action written in the
policy's own response format, with the screenshot it led to), so every accepted variant comes with one and the
warm start needs no second recording on a desktop.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from core.errors import EnvironmentFailure, ScaleCUAError
from core.interfaces import Environment
from core.types import Action, EpisodeStatus, Judgement, JudgementStatus, Observation, Task, Trajectory, Turn

from plugins.synthesis.llm import Usage
from plugins.synthesis.roles import Checker, CheckReport, Finding, Harness


class OracleCheckerOptions(BaseModel):
    """How much of a candidate's own solution space the check covers."""

    model_config = ConfigDict(extra="forbid")

    near_misses: int = Field(1, ge=0, description="near misses (metadata.near_misses, in order) that must score 0")
    demonstrations: bool = Field(True, description="keep the oracle's run as the accepted task's demonstration "
                                                   "(<run_dir>/demonstrations/[<split>/]<task id>.jsonl)")


def _line(j: Judgement) -> str:
    return f"score {j.score:g}, status {j.status.value}" + (f" ({j.error})" if j.error else "")


class OracleChecker(Checker):
    """Untouched state -> 0, oracle -> 1, near misses -> 0, each on a real desktop through the task's judge."""

    def __init__(self, options: OracleCheckerOptions, **_: Any) -> None:
        self.options = options

    async def check(self, task: Task, env: Environment, harness: Harness, usage: Usage) -> CheckReport:
        report = CheckReport(passed=False)
        try:
            oracle = [Action.model_validate(a) for a in task.metadata.get("oracle") or []]
            near = list((task.metadata.get("near_misses") or {}).items())[: self.options.near_misses]
            misses = [(name, [Action.model_validate(a) for a in actions]) for name, actions in near]
        except ValueError as exc:
            report.findings.append(Finding("checker", f"metadata.oracle / near_misses are not actions: {exc}"))
            return report
        if not oracle:
            report.findings.append(Finding("checker", "the task has no metadata.oracle to check it with; use the "
                                                      "llm-checker for tasks without a known solution"))
            return report
        start = await self._reset(task, env, report)
        if start is None:
            return report
        report.initial = await harness.evaluate(env, task, None)
        if not self._judged(report, report.initial, "the untouched start state"):
            return report
        if report.initial.score != 0.0:
            report.findings.append(Finding("checker", f"the untouched start state scores {report.initial.score:g} "
                                                      "(must be 0): the judge rewards doing nothing"))
            return report
        demo = Trajectory(trajectory_id=f"oracle-{task.id}", task_id=task.id, group_id=f"oracle-{task.id}",
                          initial_observation=start) if self.options.demonstrations else None
        report.final = await self._play(task, env, harness, oracle, demo)
        report.steps = len(oracle)
        if not self._judged(report, report.final, "the oracle's end state"):
            return report
        report.reachable = True
        if not report.final.success:
            report.findings.append(Finding("checker", f"the oracle's end state scores {_line(report.final)} (must "
                                                      "be 1): the judge and the oracle disagree"))
            return report
        if demo is not None and demo.turns:
            demo.judgement, demo.reward, demo.status = report.final, float(report.final.score), EpisodeStatus.COMPLETED
            report.trajectory = demo
        for name, actions in misses:
            if await self._reset(task, env, report) is None:
                return report
            judged = await self._play(task, env, harness, actions)
            if not self._judged(report, judged, f"the near miss {name!r}"):
                return report
            if judged.score != 0.0:
                report.findings.append(Finding("checker", f"the near miss {name!r} scores {judged.score:g} (must be "
                                                          "0): the judge accepts a wrong solution"))
                return report
        report.executable = True
        report.passed = True
        return report

    async def _play(self, task: Task, env: Environment, harness: Harness, actions: Sequence[Action],
                    demo: Trajectory | None = None) -> Judgement:
        """Run ``actions``; with ``demo``, each one becomes a turn the policy could have written (one action per
        response, as :mod:`core.commands.record` records oracles). A backend without the policy's response
        format leaves no demonstration."""
        for action in actions:
            turn = None
            if demo is not None:
                try:
                    text = harness.backend.format_response([action])
                except ScaleCUAError:
                    demo.turns.clear()  # no demonstration at all rather than a partial one
                    demo = None
                else:
                    turn = Turn(index=len(demo.turns), response_text=text, response_ids=[], response_logprobs=[],
                                actions=[action])
                    demo.turns.append(turn)
            if not action.is_terminal:
                observation = await env.step(action)
                if turn is not None:
                    turn.observation = observation
        return await harness.evaluate(env, task, actions[-1] if actions else None)

    @staticmethod
    def _judged(report: CheckReport, judgement: Judgement, what: str) -> bool:
        if judgement.status == JudgementStatus.OK:
            return True
        report.executable = False
        report.findings.append(Finding("checker", f"the judge fails on {what}: {_line(judgement)}"))
        return False

    @staticmethod
    async def _reset(task: Task, env: Environment, report: CheckReport) -> Observation | None:
        try:
            return await env.reset(task)
        except EnvironmentFailure:
            raise
        except Exception as exc:  # a setup step that fails is the candidate's fault
            report.findings.append(Finding("checker", f"the setup failed: {type(exc).__name__}: {exc}"))
            return None
