"""Trajectory-guided synthesis: recorded rollouts + pass rates -> easier and harder tasks.

* Failed tasks (pass rate <= ``failed_at_most``): the LLM reads one failed
  rollout — each step's response, actions and feedback, plus a few of its
  screenshots — locates the earliest step where the agent deviated from the
  goal, and writes up to ``max_subtasks`` easier sub-tasks, each with its own
  setup state and judge (origin ``decompose``).
* Solved tasks (pass rate >= ``solved_at_least``): similar tasks of one
  application and start state are clustered (:mod:`plugins.synthesis.compose`)
  and composed into one multi-objective task whose judges are chained with
  ``and``; the LLM only writes the combined instruction (origin ``compose``).

Every result then goes through the same gates as any other candidate.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import structlog
from pydantic import Field

from core.errors import ConfigError
from core.runtime.tasks import load_tasks
from core.types import Observation, Screenshot, Task

from plugins.synthesis import prompts
from plugins.synthesis.compose import asset_dir, cluster, compose_task
from plugins.synthesis.knowledge import KnowledgeBase
from plugins.synthesis.llm import LLMClient, LLMOptions, ReplyFormatError, Usage, user_message
from plugins.synthesis.proposer import gather_proposals
from plugins.synthesis.roles import FailedProposal, ProposalJob, Proposer
from plugins.synthesis.rollouts import RecordedRollout, load_rollouts, pass_rates
from plugins.synthesis.schema import DIFFICULTIES, extract_object, new_task_id, reply_view, task_from_reply

log = structlog.get_logger(__name__)


class TrajectoryProposerOptions(LLMOptions):
    """Trajectory-guided proposer: where the rollouts and original tasks are, and how to use them."""

    temperature: float = Field(0.4, ge=0.0, le=2.0)
    rollouts: str = Field(..., description="JSONL of recorded rollouts (plugins/synthesis/rollouts.py)")
    pass_rates: str | None = Field(None, description="JSON {task_id: rate}; null: computed from the rollouts")
    tasks: list[str] = Field(..., min_length=1, description="task sources of the rolled-out tasks (as tasks.paths)")
    failed_at_most: float = Field(0.25, ge=0.0, le=1.0, description="pass rate at or below which a task is 'failed'")
    solved_at_least: float = Field(0.75, ge=0.0, le=1.0, description="pass rate at or above which it is 'solved'")
    decompose: bool = True
    compose: bool = True
    max_subtasks: int = Field(3, ge=1, description="sub-tasks per failed task")
    compose_size: int = Field(2, ge=2, le=5, description="tasks per composition")
    similarity_threshold: float = Field(0.2, ge=0.0, le=1.0, description="TF-IDF cosine for clustering")
    max_steps_shown: int = Field(40, ge=1, description="rollout steps shown to the LLM")
    max_screenshots: int = Field(4, ge=0, description="rollout screenshots shown (evenly spaced)")
    knowledge_dirs: list[str] = Field(default_factory=list)


class TrajectoryProposer(Proposer):
    """Turns rollouts into new candidates; works offline (no desktop needed to propose)."""

    needs_environment = False

    def __init__(self, options: TrajectoryProposerOptions, *, environ: Any = None, base_dir: Path | None = None,
                 **_: Any):
        if options.failed_at_most >= options.solved_at_least:
            raise ConfigError([f"synthesis.proposer.options: failed_at_most ({options.failed_at_most}) must be below "
                               f"solved_at_least ({options.solved_at_least})"])
        self.options = options
        self.rollouts = load_rollouts(_resolve(options.rollouts, base_dir))
        self.rates = pass_rates(self.rollouts, _resolve(options.pass_rates, base_dir) if options.pass_rates else None)
        self.tasks = {t.id: t for t in load_tasks(options.tasks, base_dir=base_dir)}
        self.knowledge = KnowledgeBase.load(options.knowledge_dirs)
        self.client = LLMClient(options, role="proposer", environ=environ)
        unknown = sorted({r.task_id for r in self.rollouts} - set(self.tasks))
        if unknown:
            log.warning("rollouts of unknown tasks are skipped", task_ids=unknown[:10], count=len(unknown))

    def failed_tasks(self) -> list[tuple[Task, RecordedRollout]]:
        """Failed tasks with the rollout to analyse (the longest failed one: it got furthest)."""
        out = []
        for task_id, rate in sorted(self.rates.items()):
            if rate > self.options.failed_at_most or task_id not in self.tasks:
                continue
            failed = [r for r in self.rollouts if r.task_id == task_id and not r.success and r.steps]
            if failed:
                out.append((self.tasks[task_id], max(failed, key=lambda r: len(r.steps))))
        return out

    def solved_clusters(self) -> list[list[Task]]:
        solved = [self.tasks[t] for t, rate in self.rates.items()
                  if rate >= self.options.solved_at_least and t in self.tasks]
        return cluster(solved, threshold=self.options.similarity_threshold, size=self.options.compose_size)

    def plan(self, budget: int) -> list[ProposalJob]:
        decompose = [ProposalJob("decompose", task.domain, {"task": task, "rollout": rollout,
                                                            "count": self.options.max_subtasks}, [task.id])
                     for task, rollout in (self.failed_tasks() if self.options.decompose else [])]
        compose = [ProposalJob("compose", group[0].domain, {"tasks": group, "count": 1}, [t.id for t in group])
                   for group in (self.solved_clusters() if self.options.compose else [])]
        jobs: list[ProposalJob] = []
        planned = 0
        while (decompose or compose) and planned < budget:  # alternate: easier and harder tasks in step
            for queue in (decompose, compose):
                if queue and planned < budget:
                    jobs.append(queue.pop(0))
                    planned += int(jobs[-1].payload["count"])
        if not jobs:
            log.warning("no failed or solved tasks to synthesize from", rollouts=len(self.rollouts),
                        failed_at_most=self.options.failed_at_most, solved_at_least=self.options.solved_at_least)
        return jobs

    async def propose(self, job: ProposalJob, observation: Observation | None, usage: Usage, *,
                      avoid: Sequence[str] = ()) -> list[Task | FailedProposal]:
        if job.origin == "decompose":
            return await self._decompose(job, usage)
        return await self._compose(job, usage)

    async def _decompose(self, job: ProposalJob, usage: Usage) -> list[Task | FailedProposal]:
        task: Task = job.payload["task"]
        rollout: RecordedRollout = job.payload["rollout"]
        steps = rollout.steps[: self.options.max_steps_shown]
        doc = self.knowledge.docs.get(task.domain)
        text = prompts.decompose_user(reply_view(task), [s.to_prompt() for s in steps], self.options.max_subtasks,
                                      doc.body if doc else None)
        parts: list[Any] = [text]
        for step in _evenly_spaced([s for s in steps if s.screenshot is not None], self.options.max_screenshots):
            assert step.screenshot is not None
            if step.screenshot.is_file():
                parts += [f"Screenshot after step {step.index}:", Screenshot.from_png(step.screenshot.read_bytes())]
        messages = [{"role": "system", "content": prompts.DECOMPOSE_SYSTEM}, user_message(*parts)]

        def parse(reply: str) -> list[Task]:
            data = extract_object(reply, required=("deviation_step", "subtasks"))
            subtasks = data["subtasks"]
            if not isinstance(subtasks, list) or not subtasks:
                raise ReplyFormatError("'subtasks' must be a non-empty list of tasks")
            out = []
            for i, sub in enumerate(subtasks[: self.options.max_subtasks]):
                if not isinstance(sub, dict):
                    raise ReplyFormatError(f"subtasks[{i}] is not an object")
                try:
                    made = task_from_reply(sub, app=task.domain, origin="decompose", parents=[task.id])
                except ReplyFormatError as exc:
                    raise ReplyFormatError(f"subtasks[{i}]: {exc}") from None
                made.metadata.update(deviation_step=data["deviation_step"], analysis=str(data.get("analysis", "")),
                                     source_trajectory=rollout.trajectory_id)
                _inherit_assets(made, task)
                out.append(made)
            return out

        return await gather_proposals(self.client, messages, parse, usage, 1, app=task.domain, origin="decompose",
                                      parents=[task.id])

    async def _compose(self, job: ProposalJob, usage: Usage) -> list[Task | FailedProposal]:
        tasks: list[Task] = job.payload["tasks"]
        messages = [{"role": "system", "content": prompts.COMPOSE_SYSTEM},
                    {"role": "user", "content": prompts.compose_user([t.instruction for t in tasks])}]

        def parse(reply: str) -> Task:
            data = extract_object(reply, required=("instruction",))
            instruction = data["instruction"]
            if not isinstance(instruction, str) or not instruction.strip():
                raise ReplyFormatError("'instruction' must be a non-empty string")
            difficulty = data.get("difficulty", "hard")
            if difficulty not in DIFFICULTIES:
                raise ReplyFormatError(f"'difficulty' must be one of {', '.join(DIFFICULTIES)}")
            steps = data.get("estimated_steps")
            if not isinstance(steps, int) or steps < 1:
                steps = sum(int(t.metadata.get("estimated_steps", 5)) for t in tasks)
            return compose_task(tasks, task_id=new_task_id(), instruction=instruction.strip(),
                                explanation=str(data.get("explanation", "")), difficulty=difficulty,
                                estimated_steps=steps)

        return await gather_proposals(self.client, messages, parse, usage, 1, app=job.app, origin="compose",
                                      parents=job.parents)

    async def close(self) -> None:
        await self.client.close()


def _evenly_spaced(items: list[Any], count: int) -> list[Any]:
    if count <= 0 or not items:
        return []
    if len(items) <= count:
        return items
    return [items[math.floor(i * (len(items) - 1) / (count - 1))] for i in range(count)] if count > 1 else [items[-1]]


def _inherit_assets(child: Task, parent: Task) -> None:
    """A derived task resolves relative asset paths where its parent does, also once exported elsewhere."""
    task_dir = asset_dir(parent)
    if task_dir:
        child.metadata["task_dir"] = task_dir


def _resolve(path: str, base_dir: Path | None) -> Path:
    """A relative path that does not exist here is taken relative to the config file (as tasks.paths are)."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and not candidate.exists() and base_dir is not None:
        return base_dir / candidate
    return candidate
