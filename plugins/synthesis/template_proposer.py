"""The template proposer: VeriGen candidates from the parametric task families, no LLM.

It stands where the LLM proposer stands (``synthesis.proposer: {name: template-proposer}``): it plans one job
per variant of the pool's layout (:class:`~plugins.synthesis.families.splits.PoolLayout`: per-family counts of
the train, validation and test splits, and the families held out whole) and renders each into a task whose
judge is generated Python code, so every variant passes through the same gates as an LLM's candidate — the rule
validator, and a checker on a live desktop (``oracle-checker``: the untouched state and a near miss score 0, the
oracle scores 1) — before it lands in the task store. The pipeline's ``candidates`` budget caps the plan, taken
family by family in turn so a smaller budget still covers every family.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from core.types import Observation, Task

from plugins.synthesis.families.splits import PoolLayout, plan_variants
from plugins.synthesis.llm import Usage
from plugins.synthesis.roles import FailedProposal, ProposalJob, Proposer


class TemplateProposerOptions(BaseModel):
    """The pool the families are rendered into."""

    model_config = ConfigDict(extra="forbid")

    families: list[str] | None = Field(None, description="families to render (null: every family)")
    heldout_families: list[str] = Field(["copy-ext", "move-named"],
                                        description="families held out whole: only the heldout split has them")
    train: int = Field(40, ge=0, description="train variants per family")
    validation: int = Field(4, ge=0, description="validation variants per family (training values)")
    test: int = Field(8, ge=0, description="test variants per family (held-out values and paraphrase)")
    heldout: int = Field(30, ge=0, description="variants of each held-out family")
    counts: dict[str, dict[str, int]] = Field(default_factory=dict,
                                              description="per-family overrides: {family: {split: count}}")

    def layout(self) -> PoolLayout:
        return PoolLayout(train=self.train, validation=self.validation, test=self.test, heldout=self.heldout,
                          heldout_families=tuple(self.heldout_families),
                          families=tuple(self.families) if self.families is not None else None,
                          counts=self.counts)


class TemplateProposer(Proposer):
    """Renders family variants; each job is one variant (family, split, index)."""

    needs_environment = False

    def __init__(self, options: TemplateProposerOptions, *, seed: int = 0, **_: Any) -> None:
        self.options = options
        self.seed = seed
        self.variants = {v.task_id: v for v in plan_variants(options.layout(), seed)}

    def plan(self, budget: int) -> list[ProposalJob]:
        by_family: dict[str, list[str]] = {}
        for task_id, variant in self.variants.items():
            by_family.setdefault(variant.family, []).append(task_id)
        interleaved = [t for group in itertools.zip_longest(*by_family.values()) for t in group if t is not None]
        return [ProposalJob(origin="template", app="os", payload={"variant": task_id, "count": 1})
                for task_id in interleaved[:budget]]

    async def propose(self, job: ProposalJob, observation: Observation | None, usage: Usage, *,
                      avoid: Sequence[str] = ()) -> list[Task | FailedProposal]:
        return [self.variants[job.payload["variant"]].task()]
