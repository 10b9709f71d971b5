"""The knowledge-driven LLM proposer: a knowledge document + a look at the live desktop -> candidate tasks.

Each job names one application (round-robin over ``apps``). The loop resets a
desktop with the document's ``context_setup`` (the application on screen) and
passes the observation; the proposer sends the document, the screenshot and
(optionally) the accessibility tree, and asks ``candidates_per_job`` times in
parallel — the paper's workers generate three candidates per call.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Sequence

from pydantic import Field

from core.errors import ConfigError
from core.types import Observation, Task

from plugins.synthesis import prompts
from plugins.synthesis.knowledge import KnowledgeBase
from plugins.synthesis.llm import LLMClient, LLMError, LLMOptions, ReplyFormatError, Usage, user_message
from plugins.synthesis.roles import FailedProposal, ProposalJob, Proposer
from plugins.synthesis.schema import extract_object, task_from_reply


class ProposerOptions(LLMOptions):
    """The knowledge-driven proposer: endpoint, applications, how it looks at the desktop."""

    temperature: float = Field(0.9, ge=0.0, le=2.0)
    apps: list[str] | None = Field(None, description="application ids to propose for; null: every knowledge document")
    knowledge_dirs: list[str] = Field(default_factory=list, description="more knowledge documents (override by app)")
    candidates_per_job: int = Field(3, ge=1, description="parallel proposals per job (the paper: 3)")
    observe: bool = Field(True, description="look at a live desktop (screenshot) before proposing")
    send_accessibility_tree: bool = True
    max_tree_chars: int = Field(12000, ge=0, description="accessibility tree characters sent at most")


def observation_parts(observation: Observation | None, *, tree: bool, max_chars: int) -> tuple[str | None, Any]:
    """(accessibility text or "", screenshot) of an observation; (None, None) without one."""
    if observation is None:
        return None, None
    text = ""
    if tree and observation.accessibility_tree:
        text = observation.accessibility_tree[:max_chars]
        if len(observation.accessibility_tree) > max_chars:
            text += "\n... (truncated)"
    return text, observation.screenshot


async def gather_proposals(client: LLMClient, messages: list[dict[str, Any]], parse: Any, usage: Usage, count: int,
                           *, app: str, origin: str, parents: Sequence[str] = ()) -> list[Task | FailedProposal]:
    """``count`` parallel proposals; a failed one becomes a :class:`FailedProposal` (it still counts as a candidate)."""
    results = await asyncio.gather(*(client.complete_parsed(messages, parse, usage) for _ in range(count)),
                                   return_exceptions=True)
    out: list[Task | FailedProposal] = []
    for result in results:
        if isinstance(result, (ReplyFormatError, LLMError)):
            status = "rejected" if isinstance(result, ReplyFormatError) else "error"
            out.append(FailedProposal(app, origin, f"{type(result).__name__}: {result}", tuple(parents), status))
        elif isinstance(result, BaseException):
            raise result
        else:
            out.extend(result if isinstance(result, list) else [result])
    return out


class LLMProposer(Proposer):
    """Proposes tasks from per-application knowledge documents and the live desktop."""

    def __init__(self, options: ProposerOptions, *, environ: Any = None, **_: Any):
        self.options = options
        self.knowledge = KnowledgeBase.load(options.knowledge_dirs)
        self.apps = list(options.apps or self.knowledge.apps)
        unknown = [a for a in self.apps if a not in self.knowledge.docs]
        if unknown:
            raise ConfigError([f"synthesis.proposer.options.apps: no knowledge document for {', '.join(unknown)}; "
                               f"available: {', '.join(self.knowledge.apps)} (add documents with knowledge_dirs)"])
        if not self.apps:
            raise ConfigError(["synthesis.proposer.options.apps: no applications to propose for"])
        self.needs_environment = options.observe
        self.client = LLMClient(options, role="proposer", environ=environ)

    def plan(self, budget: int) -> list[ProposalJob]:
        jobs = math.ceil(budget / self.options.candidates_per_job)
        return [ProposalJob(origin="explore", app=self.apps[i % len(self.apps)],
                            payload={"count": min(self.options.candidates_per_job,
                                                  budget - i * self.options.candidates_per_job)})
                for i in range(jobs)]

    def context_task(self, job: ProposalJob) -> Task | None:
        return self.knowledge.get(job.app).context_task() if self.options.observe else None

    async def propose(self, job: ProposalJob, observation: Observation | None, usage: Usage, *,
                      avoid: Sequence[str] = ()) -> list[Task | FailedProposal]:
        doc = self.knowledge.get(job.app)
        tree_text, screenshot = observation_parts(observation, tree=self.options.send_accessibility_tree,
                                                  max_chars=self.options.max_tree_chars)
        messages = [
            {"role": "system", "content": prompts.PROPOSER_SYSTEM},
            user_message(prompts.proposer_user(job.app, doc.body, tree_text, screenshot is not None, avoid), screenshot),
        ]

        def parse(text: str) -> Task:
            return task_from_reply(extract_object(text), app=job.app, origin="explore")

        count = int(job.payload.get("count", self.options.candidates_per_job))
        return await gather_proposals(self.client, messages, parse, usage, count, app=job.app, origin="explore")

    async def close(self) -> None:
        await self.client.close()
