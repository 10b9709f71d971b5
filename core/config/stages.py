"""Config sections of the paper's three-stage recipe (section 3.1): warm start, refinement, RL, evaluation.

``warm_start`` is read by ``python -m core.sft`` (stage 1 alone) and by the recipe; ``recipe`` only by
``python -m core.pipeline``. ``python -m core.run`` (the RL stage alone) validates both and ignores them.
Every stage runs the one config of the file with its own ``overrides`` on top (``{dotted.key: value}``,
e.g. ``{trainer.options.lr: 1e-3}``), so a stage differs from the others only where it says so.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

STAGES = ("synthesize", "warm_start", "refine", "rl", "control", "evaluate")
Stage = Literal["synthesize", "warm_start", "refine", "rl", "control", "evaluate"]
#: the stages a recipe runs when it names none (synthesize needs a recipe.synthesize section)
DEFAULT_STAGES = ("warm_start", "refine", "rl", "evaluate")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OracleSource(_Strict):
    """Record the pool's bundled oracles (``metadata.oracle``) on live desktops before training."""

    repeats: int = Field(1, ge=1, description="recorded runs of each oracle")
    include: list[str] | None = Field(None, description="task ids to record (default: every task with an oracle)")
    sample: int | None = Field(None, ge=1, description="a seeded sample (run.seed) of this many of those tasks: "
                               "the warm start sees a part of the pool, RL the whole")


class DemonstrationSources(_Strict):
    """Where the warm start's demonstrations come from (all are trajectory records, core/runtime/demonstrations.py)."""

    paths: list[str] = Field(default_factory=list,
                             description="JSONL files, run directories (their rollouts) or directories of JSONL")
    oracle: OracleSource | None = Field(None, description="record the bundled oracles first")
    success_only: bool = Field(True, description="keep judged successes only (rejection sampling)")
    min_reward: float | None = Field(None, description="keep records with at least this reward")
    max_per_task: int | None = Field(None, ge=1, description="at most this many demonstrations of each task")


class WarmStartSection(_Strict):
    """Stage 1: supervised fine-tuning on demonstrations (the cross-entropy objective of the same trainer)."""

    demonstrations: DemonstrationSources = Field(default_factory=DemonstrationSources)
    epochs: int = Field(3, ge=1)
    batch_size: int = Field(8, ge=1, description="demonstrations per optimizer step")
    held_out: float = Field(0.1, ge=0, lt=1, description="share of demonstrations held out for the validation loss")
    checkpoint_every: int = Field(50, ge=1, description="optimizer steps between checkpoints (also at each epoch end)")
    overrides: dict[str, Any] = Field(default_factory=dict, description="config overrides for this stage")


class SynthesizeStage(_Strict):
    """Stage 0: build the task pool through VeriGen (``python -m core.synthesize`` on another config) into
    ``<recipe>/synthesize/pool``; the other stages name its splits ``pool:<split>`` (``pool:train``) in
    ``tasks.paths`` and ``tasks.eval_sets``."""

    config: str = Field(description="the synthesis config: a path (relative to this config's directory), "
                                    "package:<module>/<file> or a packaged config's name, e.g. families")
    overrides: dict[str, Any] = Field(default_factory=dict, description="overrides of the synthesis config; its "
                                      "run.seed is this recipe's unless set here")


class RefineStage(_Strict):
    """Stage 2: roll the warm-started model out on a subset and synthesize a refined pool from the rollouts."""

    tasks: list[str] | None = Field(None, description="task ids to roll out (default: the whole pool)")
    max_tasks: int | None = Field(None, ge=1, description="a seeded random subset of this many tasks")
    rollouts: int = Field(4, ge=1, description="rollouts per task (their pass rates seed the RL sampler)")
    synthesis_budget: int | None = Field(None, ge=1, description="candidates for trajectory-guided synthesis")
    overrides: dict[str, Any] = Field(default_factory=dict)


class StageOverrides(_Strict):
    overrides: dict[str, Any] = Field(default_factory=dict)


class EvaluateStage(_Strict):
    """Stage 4: the same tasks and seeds evaluated from the warm start and from the final RL checkpoint."""

    passes: int = Field(4, ge=1, description="rollouts per task and checkpoint")
    sets: list[str] | None = Field(None, description="names of tasks.eval_sets to evaluate on, each before and "
                                   "after (null: the RL pool); the first is the headline")
    greedy: bool = Field(False, description="also one greedy pass (the most likely token) per checkpoint and set")
    floors: bool = Field(False, description="also the floors of each set: always fail, the most frequent oracle "
                         "(core/commands/floors.py)")
    screenshots: bool = Field(True, description="keep every episode's screenshots for the episode viewer "
                              "(report/episodes/), downscaled to screenshot_max_side")
    screenshot_max_side: int = Field(640, ge=16, description="longest side of a kept screenshot, in pixels")
    screenshot_budget_mb: float = Field(64.0, gt=0, description="at most this many megabytes of screenshots per "
                                        "evaluated checkpoint and set; past it records say how many were dropped")
    overrides: dict[str, Any] = Field(default_factory=dict)


class ControlStage(_Strict):
    """The SFT-only control: the warm start continued, on its own demonstrations, for as many more epochs as
    the RL stage's wall time would have bought it (the same data order, optimizer and schedule as if the warm
    start had been that much longer); the evaluate stage measures it beside RL."""

    epochs: int | None = Field(None, ge=1, description="extra epochs (null: RL's wall time / the warm start's "
                                                       "training seconds per epoch, at least 1)")


class RecipeSection(_Strict):
    """``python -m core.pipeline``: named stages in order; each stage's outputs are the next's inputs."""

    name: str | None = Field(None, description="run directory prefix (default: run.name)")
    stages: list[Stage] = Field(default_factory=lambda: list(DEFAULT_STAGES))
    synthesize: SynthesizeStage | None = None
    refine: RefineStage = Field(default_factory=RefineStage)
    rl: StageOverrides = Field(default_factory=StageOverrides)
    control: ControlStage = Field(default_factory=ControlStage)
    evaluate: EvaluateStage = Field(default_factory=EvaluateStage)

    @model_validator(mode="after")
    def _ordered(self) -> RecipeSection:
        if not self.stages:
            raise ValueError(f"recipe.stages is empty; list some of {', '.join(STAGES)} in that order")
        positions = [STAGES.index(s) for s in self.stages]
        if positions != sorted(set(positions)):
            raise ValueError(f"recipe.stages {self.stages} must be a subsequence of {list(STAGES)} (each once, in "
                             "that order): a stage reads what the stages before it wrote")
        if "control" in self.stages and not {"warm_start", "rl"} <= set(self.stages):
            raise ValueError("recipe.stages has control (the SFT-only control) without warm_start and rl: it "
                             "continues the warm start for RL's wall time")
        if "synthesize" in self.stages and self.synthesize is None:
            raise ValueError("recipe.stages has synthesize but there is no recipe.synthesize section; add "
                             "synthesize: {config: families} (the synthesis config that builds the pool)")
        return self
