"""The LLM judger (static semantic review) and the LLM fixer (repairs from findings)."""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field

from core.types import Task

from plugins.synthesis import prompts
from plugins.synthesis.llm import LLMClient, LLMOptions, ReplyFormatError, Usage
from plugins.synthesis.roles import Finding, Fixer, Judger, Verdict
from plugins.synthesis.schema import extract_object, reply_view, task_from_reply


class JudgerOptions(LLMOptions):
    """The LLM judger: endpoint plus how strict a verdict must be to pass."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    min_score: float = Field(0.5, ge=0.0, le=1.0, description="an 'accept' verdict also needs at least this score")


def parse_verdict(text: str) -> Verdict:
    data = extract_object(text, required=("verdict", "score"))
    verdict = str(data["verdict"]).strip().lower()
    if verdict not in ("accept", "reject"):
        raise ReplyFormatError(f"'verdict' must be \"accept\" or \"reject\", got {data['verdict']!r}")
    score = data["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= float(score) <= 1.0:
        raise ReplyFormatError(f"'score' must be a number in [0, 1], got {score!r}")
    reasons, suggestions = data.get("reasons", []), data.get("suggestions", [])
    if not isinstance(reasons, list) or not isinstance(suggestions, list):
        raise ReplyFormatError("'reasons' and 'suggestions' must be lists of strings")
    if verdict == "reject" and not reasons:
        raise ReplyFormatError("a 'reject' verdict must give its reasons")
    return Verdict(accept=verdict == "accept", score=float(score), reasons=[str(r) for r in reasons],
                   suggestions=[str(s) for s in suggestions])


class LLMJudger(Judger):
    """Reviews a candidate without running it: is the instruction clear, is the judge sound?"""

    def __init__(self, options: JudgerOptions, *, environ: Any = None, **_: Any):
        self.options = options
        self.client = LLMClient(options, role="judger", environ=environ)

    async def review(self, task: Task, usage: Usage) -> Verdict:
        messages = [
            {"role": "system", "content": prompts.JUDGER_SYSTEM},
            {"role": "user", "content": prompts.judger_user(reply_view(task))},
        ]
        verdict: Verdict = await self.client.complete_parsed(messages, parse_verdict, usage)
        if verdict.accept and verdict.score < self.options.min_score:
            verdict.accept = False
            verdict.reasons.append(f"the judger's confidence {verdict.score:.2f} is below min_score "
                                   f"{self.options.min_score:.2f}")
        return verdict

    async def close(self) -> None:
        await self.client.close()


class FixerOptions(LLMOptions):
    """The LLM fixer's endpoint."""

    temperature: float = Field(0.2, ge=0.0, le=2.0)


class LLMFixer(Fixer):
    """Rewrites a candidate so that every finding is addressed."""

    def __init__(self, options: FixerOptions, *, environ: Any = None, **_: Any):
        self.options = options
        self.client = LLMClient(options, role="fixer", environ=environ)

    async def fix(self, task: Task, findings: Sequence[Finding], usage: Usage) -> Task:
        messages = [
            {"role": "system", "content": prompts.FIXER_SYSTEM},
            {"role": "user", "content": prompts.fixer_user(reply_view(task), [f.to_dict() for f in findings])},
        ]
        app = task.metadata.get("app") or task.snapshot

        def parse(text: str) -> Task:
            return task_from_reply(extract_object(text), app=app, origin=task.metadata.get("augmentation", ""),
                                   previous=task)

        repaired: Task = await self.client.complete_parsed(messages, parse, usage)
        repaired.metadata["repairs"] = int(task.metadata.get("repairs", 0)) + 1
        return repaired

    async def close(self) -> None:
        await self.client.close()
