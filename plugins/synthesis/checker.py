"""The LLM checker: a dry run of a candidate on a live desktop, then its judge on real states.

1. Reset the desktop with the candidate's setup. A setup that fails is the
   candidate's fault (a finding); an unreachable desktop is the environment's
   (the exception propagates and the loop retries on another desktop).
2. Run the judge on the untouched start state: it must run without error and
   score at most ``max_initial_score`` (0 by default) — a judge that accepts
   the start state rewards doing nothing.
3. Reset again and let the LLM act: it sees each screenshot (through the
   probe), answers in the environment's own action format (the backend's
   system prompt and parser), and its actions run on the desktop until it
   says done or fail, or ``max_steps`` run out.
4. Run the judge on the reached state: it must run without error and score 1
   when the checker finished the task.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from pydantic import Field

from core.errors import ActionParseError as CoreActionParseError
from core.errors import EnvironmentFailure, ScaleCUAError
from core.interfaces import Environment
from core.types import Action, ActionType, EpisodeStatus, Judgement, JudgementStatus, Observation, Task, Trajectory, Turn

from plugins.synthesis import prompts
from plugins.synthesis.llm import LLMClient, LLMOptions, Usage, image_part
from plugins.synthesis.roles import Checker, CheckReport, Finding, Harness

log = structlog.get_logger(__name__)


class CheckerOptions(LLMOptions):
    """The LLM checker: endpoint, dry-run budget and what counts as a correct judge."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_steps: int = Field(15, ge=1, description="agent turns in the dry run")
    max_parse_failures: int = Field(3, ge=1, description="unparsable replies before the dry run gives up")
    max_initial_score: float = Field(0.0, ge=0.0, lt=1.0, description="highest score allowed on the start state")
    screenshots_in_context: int = Field(2, ge=1, description="most recent screenshots kept in the LLM context")
    send_accessibility_tree: bool = False
    max_tree_chars: int = Field(8000, ge=0)
    reset_before_dry_run: bool = Field(True, description="reset again after judging the start state")


def _judgement_line(j: Judgement) -> str:
    tail = f" ({j.error})" if j.error else ""
    return f"status {j.status.value}, score {j.score:g}{tail}"


def _actions_summary(transcript: list[dict[str, Any]], limit: int = 12) -> str:
    lines = []
    for step in transcript[-limit:]:
        acts = ", ".join(step.get("actions", [])) or step.get("parse_error", "no action")
        lines.append(f"step {step['step']}: {acts}")
    return "; ".join(lines)


class LLMChecker(Checker):
    """Tests reachability and judge correctness by doing the task on a live desktop."""

    def __init__(self, options: CheckerOptions, *, environ: Any = None, **_: Any):
        self.options = options
        self.client = LLMClient(options, role="checker", environ=environ)

    async def check(self, task: Task, env: Environment, harness: Harness, usage: Usage) -> CheckReport:
        o = self.options
        report = CheckReport(passed=False)
        if not await self._reset(task, env, report):
            return report
        report.initial = await harness.evaluate(env, task, None)
        if report.initial.status != JudgementStatus.OK:
            report.executable = False
            report.findings.append(Finding("checker", "the judge fails on the untouched start state: "
                                                      + _judgement_line(report.initial)))
            return report
        if report.initial.score > o.max_initial_score:
            report.executable = True
            report.findings.append(Finding(
                "checker", f"the judge scores the untouched start state {report.initial.score:g} (must be "
                           f"{o.max_initial_score:g}): it rewards doing nothing; make it check the change the "
                           "instruction asks for"))
            return report
        if o.reset_before_dry_run:
            observation = await self._reset(task, env, report)
            if observation is None:
                return report
        else:
            observation = await env.observe()
        last_action, finished, gave_up = await self._dry_run(task, env, harness, observation, usage, report)
        report.final = await harness.evaluate(env, task, last_action)
        judged_final = not (last_action is not None and last_action.type == ActionType.FAIL)
        report.executable = not judged_final or report.final.status == JudgementStatus.OK
        report.reachable = finished
        if report.trajectory is not None:
            report.trajectory.judgement = report.final
            report.trajectory.reward = float(report.final.score)
            report.trajectory.status = EpisodeStatus.COMPLETED if finished else EpisodeStatus.INCOMPLETE
        done = _actions_summary(report.transcript)
        if not finished:
            why = f"it gave up: {gave_up}" if gave_up else f"it did not finish within {report.steps} steps"
            report.findings.append(Finding("checker", f"the checker could not reach the goal ({why}). Its actions: "
                                                      f"{done}. Make the goal reachable and the instruction precise."))
        elif report.final.status != JudgementStatus.OK:
            report.findings.append(Finding("checker", "the judge fails on the state the checker reached: "
                                                      + _judgement_line(report.final)))
        elif not report.final.success:
            report.findings.append(Finding(
                "checker", f"the checker completed the task (its actions: {done}) but the judge scored the reached "
                           f"state {report.final.score:g}: the judge checks something else than the instruction "
                           f"asks, or reads stale state (save before judging: postconfig)"))
        report.passed = finished and report.final.success
        return report

    async def _reset(self, task: Task, env: Environment, report: CheckReport) -> Observation | None:
        try:
            return await env.reset(task)
        except EnvironmentFailure:
            raise
        except Exception as exc:  # a setup step that fails is the candidate's fault
            report.findings.append(Finding("checker", f"the setup failed: {type(exc).__name__}: {exc}"))
            return None

    async def _dry_run(self, task: Task, env: Environment, harness: Harness, observation: Observation,
                       usage: Usage, report: CheckReport) -> tuple[Action | None, bool, str | None]:
        o = self.options
        system = harness.system_prompt(task) + "\n\n" + prompts.CHECKER_PREAMBLE
        turns: list[tuple[list[dict[str, Any]], str]] = []  # (user content parts, assistant reply)
        last_action: Action | None = None
        feedback: str | None = None
        parse_failures = 0
        demo = Trajectory(trajectory_id=f"dry-run-{task.id}", task_id=task.id, group_id=f"dry-run-{task.id}",
                          initial_observation=observation)
        report.trajectory = demo
        for step in range(o.max_steps):
            report.steps = step + 1
            started = time.monotonic()
            parts: list[dict[str, Any]] = [{"type": "text", "text": prompts.checker_step(task.instruction, step, feedback)}]
            if o.send_accessibility_tree and observation.accessibility_tree:
                parts.append({"type": "text", "text": observation.accessibility_tree[:o.max_tree_chars]})
            if observation.screenshot is not None:
                parts.append(image_part(observation.screenshot))
            reply = await self.client.complete(self._messages(system, turns, parts), usage)
            turns.append((parts, reply))
            entry: dict[str, Any] = {"step": step, "response": reply[:2000]}
            report.transcript.append(entry)
            try:
                actions = harness.parse_response(reply)
            except (CoreActionParseError, ValueError) as exc:
                parse_failures += 1
                entry["parse_error"] = str(exc)[:500]
                feedback = f"your reply could not be parsed: {exc}"
                if parse_failures >= o.max_parse_failures:
                    return last_action, False, f"{parse_failures} unparsable replies"
                continue
            entry["actions"] = [_describe(a) for a in actions]
            feedback = None
            turn = self._demo_turn(demo, harness, actions)
            for action in actions:
                if action.is_terminal:
                    entry["duration_s"] = round(time.monotonic() - started, 3)
                    if action.type == ActionType.FAIL:
                        return action, False, action.text or "it emitted fail"
                    return action, True, None
                observation = await env.step(action)
                last_action = action
                feedback = observation.text
            if turn is not None:
                turn.observation = observation
            entry["duration_s"] = round(time.monotonic() - started, 3)
        return last_action, False, None

    @staticmethod
    def _demo_turn(demo: Trajectory, harness: Harness, actions: list[Action]) -> Turn | None:
        """The step as the policy would have written it (unparsable steps leave no turn)."""
        try:
            text = harness.backend.format_response(actions)
        except ScaleCUAError:  # a backend without the policy's response format: no demonstration
            return None
        turn = Turn(index=len(demo.turns), response_text=text, response_ids=[], response_logprobs=[],
                    actions=list(actions))
        demo.turns.append(turn)
        return turn

    def _messages(self, system: str, turns: list[tuple[list[dict[str, Any]], str]],
                  current: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """System, past turns (text always, screenshots only for the most recent ones), current turn."""
        keep_images = self.options.screenshots_in_context - 1
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for index, (parts, reply) in enumerate(turns):
            recent = index >= len(turns) - keep_images
            content = parts if recent else [p for p in parts if p.get("type") != "image_url"]
            messages.append({"role": "user", "content": content})
            messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": current})
        return messages

    async def close(self) -> None:
        await self.client.close()


def _describe(action: Action) -> str:
    fields = action.model_dump(mode="json", exclude_none=True)
    kind = fields.pop("type")
    return kind + ("(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")" if fields else "")
