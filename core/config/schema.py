"""What a config file may say: the core sections, the slots, and a validated config's shape.

Every pluggable slot has the shape ``{name: <registered name>, options: {...}}``; the component's own strict
options model validates ``options`` (:mod:`core.config.loading`, phase 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from omegaconf import OmegaConf
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core import kinds
from core.config.stages import RecipeSection, WarmStartSection
from core.errors import ConfigError
from core.registry import Component, check_contract, instantiate

if TYPE_CHECKING:
    from core.pluginmanager import Plugins


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Slot(_Strict):
    """A pluggable slot: which registered component, with which options."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class RunSection(_Strict):
    name: str = "run"
    output_dir: str = "runs"
    seed: int = 0
    iterations: int = Field(1000, ge=0)
    checkpoint_every: int = Field(25, ge=1)
    keep_checkpoints: int = Field(3, ge=1)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    #: save every turn's screenshot beside the rollout records (for trajectory-guided synthesis, demonstrations)
    save_screenshots: bool = False
    #: downscale kept screenshots to this longest side in pixels (null: full size, an exact replay of what the agent
    #: saw, which demonstrations need); the recipe's evaluate stage keeps them at 640 for the episode viewer
    screenshot_max_side: int | None = Field(None, ge=16)
    #: stop keeping screenshots once a rollouts directory's shots/ holds this many megabytes (null: no cap)
    screenshot_budget_mb: float | None = Field(None, gt=0)
    #: every this many RL iterations, send sample screenshots with the first action drawn (one per task, up to
    #: 4) to the trackers (TensorBoard images, W&B images, MLflow artifacts); 0: never
    log_images_every: int = Field(0, ge=0)
    #: start the policy from these weights: a checkpoint directory (``.../checkpoints/iter_NNNNNN``) or a run
    #: directory (its newest complete checkpoint), e.g. a warm start's; optimizer and counters start fresh
    init_from: str | None = None
    #: every this many RL iterations, roll the policy out on the whole task pool with the fixed seeds of
    #: ``core.eval`` (the same episodes each time, so the points are comparable) -> ``eval/success``; 0: never
    eval_every: int = Field(0, ge=0)
    eval_passes: int = Field(1, ge=1, description="rollouts per task of each periodic evaluation")
    #: the evaluation set (``tasks.eval_sets``) periodic evaluations roll out on; null: the training pool. Never a
    #: test set when its results choose a checkpoint (``recipe.rl.select: best``)
    eval_set: str | None = None
    #: stop after the iteration that brings the training rollouts run (``rollout/episodes_run``: groups a sampler
    #: dropped included; initial pass and evaluations excluded) to at least this many, even before ``iterations``:
    #: samplers that draw extra rollouts (DAPO's refills) are then compared at equal cost
    rollout_budget: int | None = Field(None, ge=1)


class PluginsSection(_Strict):
    disable: list[str] = Field(default_factory=list)
    require: list[str] = Field(default_factory=list)
    only: list[str] | None = None


class AlgorithmSection(_Strict):
    """GRPO + DAPO hyperparameters (the paper's Table 10 defaults)."""

    batch_size: int = Field(32, ge=1)
    n_rollouts: int = Field(8, ge=1)
    max_turns: int = Field(50, ge=1)
    max_new_tokens: int = Field(512, ge=1)
    max_seq_len: int = Field(40000, ge=16)
    temperature: float = Field(0.8, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    clip_low: float = Field(0.2, ge=0)
    clip_high: float = Field(0.28, ge=0)
    clip_c: float = Field(3.0, gt=1)
    kl_coef: float = Field(1e-4, ge=0)
    entropy_coef: float = 0.0
    incomplete_penalty: float = -0.2
    advantage_eps: float = Field(1e-6, gt=0)
    normalize_advantage_std: bool = True
    #: weight of below-average rollouts' advantages (1: the paper's GRPO). Below 1, failed rollouts push
    #: their tokens down less than successes pull theirs up: with a small policy, failures' low-probability
    #: tokens can otherwise dominate the step and lower the successes' likelihood too
    negative_advantage_scale: float = Field(1.0, ge=0, le=1)
    #: false: a response that did not parse into actions is never reinforced -- in a rollout with a positive
    #: advantage its tokens leave the loss (in one with a negative advantage they are pushed down as usual). An
    #: episode that recovers from a malformed response and succeeds owes it nothing; crediting it teaches the
    #: policy to emit it again (true: every response shares its rollout's advantage, plain GRPO)
    credit_unparsable_turns: bool = True
    #: the "old" policy of the PPO ratio. ``rollout``: the logprobs recorded at sampling time (the policy that
    #: sampled is the one being trained: synchronous runs on an engine that matches the trainer). ``recompute``:
    #: the decoupled objective (AReaL's proximal policy; verl's recomputed old_log_prob): before an iteration's
    #: first optimizer step the trainer recomputes the batch's logprobs under the current weights (the proximal
    #: policy); every step clips its ratio against them, and each token is weighted by the behaviour ratio
    #: pi_proximal / pi_rollout (truncated at tis_cap when set), so tokens sampled by older weights (asynchronous
    #: rollouts) or by a mismatched engine are corrected instead of clipped away. null: recompute when tis_cap is
    #: set, else rollout
    old_logprobs: Literal["rollout", "recompute"] | None = None
    #: truncated importance sampling (null: no truncation): the behaviour weight pi_proximal / pi_rollout of the
    #: decoupled objective capped at this value (verl's TIS); needs old_logprobs: recompute
    tis_cap: float | None = Field(None, gt=0)
    max_parse_failures: int = Field(3, ge=1)
    #: optimizer steps per iteration: the batch's groups dealt into this many mini-batches (whole groups), over
    #: ppo_epochs passes (reshuffled each); every step's ratio is against the same old policy (old_logprobs), so
    #: later steps are clipped as in PPO (verl's ppo_mini_batch_size / ppo_epochs). 1 and 1: one step per
    #: iteration, as the paper
    ppo_mini_batches: int = Field(1, ge=1)
    ppo_epochs: int = Field(1, ge=1)
    #: the KL stop (null: off): an iteration's later optimizer steps are skipped once the batch's approximate KL
    #: from the old policy (``actor/approx_kl``, k3, measured before the step) exceeds this; the iteration's
    #: first step always runs. With ppo_mini_batches x ppo_epochs > 1 it bounds how far one batch moves the policy
    target_kl: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _old_logprobs(self) -> "AlgorithmSection":
        if self.old_logprobs is None:
            self.old_logprobs = "recompute" if self.tis_cap is not None else "rollout"
        elif self.old_logprobs == "rollout" and self.tis_cap is not None:
            raise ValueError(f"tis_cap ({self.tis_cap}) caps the behaviour weight pi_proximal / pi_rollout of the "
                             "decoupled objective, which old_logprobs: rollout does not compute; set "
                             "old_logprobs: recompute, or drop tis_cap")
        return self

    @model_validator(mode="after")
    def _mini_batches_fit(self) -> "AlgorithmSection":
        if self.ppo_mini_batches > self.batch_size:
            raise ValueError(f"ppo_mini_batches ({self.ppo_mini_batches}) exceeds batch_size ({self.batch_size}): a "
                             "mini-batch holds whole groups, so use at most batch_size mini-batches")
        return self


class RolloutSection(_Strict):
    """How episodes are run (not which engine: that is the ``rollout`` slot)."""

    concurrency: int = Field(8, ge=1)
    env_retries: int = Field(3, ge=0)
    #: an episode still running after this many seconds ends (checked between turns) as incomplete
    episode_timeout_s: float = Field(3600, gt=0)
    #: one environment call (acquire, reset, step, observe, judge) failing to answer within this many seconds is
    #: an environment failure: the episode is retried on a fresh environment, never scored
    env_call_timeout_s: float = Field(300, gt=0)
    #: sync: rollout -> train -> weight sync in turn (the paper). async: episodes run on while the trainer
    #: steps on groups that have finished (core/runtime/async_rollouts.py); a group sampled partly by a policy more
    #: than ``max_staleness`` policy versions (iterations) old is never trained. async with max_staleness 0 is sync.
    mode: Literal["sync", "async"] = "sync"
    max_staleness: int = Field(1, ge=0, description="async: most policy versions (iterations) a trained group may lag")
    #: async: what keeps every trained group within max_staleness. ``wait`` (no environment time thrown away): a
    #: step does not make version v + 1 while a group admitted at version v - max_staleness or earlier is still
    #: running; it waits for it and trains it (admission already caps groups in flight at (max_staleness + 1)
    #: batches, SkyRL's and AReaL's capacity rule). ``drop``: a step never waits; a group that finishes too
    #: stale is dropped, its episodes' environment time lost (counted in work/env_seconds_untrained)
    stale_groups: Literal["wait", "drop"] = "wait"


class EvalSet(_Strict):
    """A named evaluation set: task files or directories, or a seeded sample of them."""

    paths: list[str]
    #: evaluate a seeded random subset of this many tasks (e.g. a sample of the training split)
    sample: int | None = Field(None, ge=1)
    #: a sample of the training pool itself: it measures fit, not transfer, so it is exempt from the check that no
    #: evaluation task is trained on (core/runtime/splits.py); every other set must be disjoint from ``tasks.paths``
    training: bool = False


class TasksSection(_Strict):
    """Where the training/evaluation task pool comes from.

    ``paths`` are task JSON files or directories (searched recursively);
    ``package:<module>/<subdir>`` points inside an installed package.
    """

    paths: list[str] = Field(default_factory=list)
    include: list[str] | None = None
    domains: list[str] | None = None
    #: one evaluation set (named ``eval``); ``eval_sets`` names several
    eval_paths: list[str] = Field(default_factory=list)
    #: named evaluation sets, e.g. {validation: {paths: [...]}, test: {paths: [...]}, train: {paths: [...],
    #: sample: 48, training: true}}: core.eval and the recipe's evaluate stage report each, run.eval_set picks
    #: the one periodic evaluations use; loading them checks that none is trained on (core/runtime/splits.py)
    eval_sets: dict[str, EvalSet] = Field(default_factory=dict)
    #: a JSON object {task_id: pass rate} measured earlier (the recipe's refine stage); the sampler starts
    #: from these estimates instead of its prior (and instead of an initial pass over those tasks)
    pass_rates: str | None = None
    #: a task naming a setup step, getter or metric nothing here provides: ``error`` (one config error listing
    #: them, before any desktop starts) or ``skip`` (left out, listed in skipped_tasks.json); core/runtime/task_check.py
    unsupported: Literal["error", "skip"] = "error"

    @model_validator(mode="after")
    def _one_way_to_name_evaluation(self) -> "TasksSection":
        if self.eval_paths and self.eval_sets:
            raise ValueError("give tasks.eval_paths (one set) or tasks.eval_sets (named sets), not both: e.g. "
                             "eval_sets: {eval: {paths: [...]}}")
        return self

    def evaluation_sets(self) -> dict[str, EvalSet]:
        """The named evaluation sets (``eval_paths`` is the set ``eval``); empty: evaluate the training pool."""
        if self.eval_paths:
            return {"eval": EvalSet(paths=list(self.eval_paths))}
        return dict(self.eval_sets)


#: config slot -> registry kind (the one table: core/kinds.py)
SLOT_KINDS: dict[str, str] = {slot: kind for slot, kind in kinds.SLOT_KINDS.items() if "." not in slot}


class Config(_Strict):
    """The whole configuration's shape (phase 1)."""

    run: RunSection = Field(default_factory=RunSection)
    plugins: PluginsSection = Field(default_factory=PluginsSection)
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    rollout_loop: RolloutSection = Field(default_factory=RolloutSection)
    tasks: TasksSection = Field(default_factory=TasksSection)
    model: Slot | None = None
    environment: Slot | None = None
    sampler: Slot | None = None
    segmenter: Slot | None = None
    trainer: Slot | None = None
    rollout: Slot | None = None
    judge: Slot | None = None
    #: VeriGen roles: proposer/judger/checker/fixer -> slot (null disables a role)
    synthesis: dict[str, Slot | None] = Field(default_factory=dict)
    #: stage 1 of the recipe (``python -m core.sft``) and the recipe's stages (``python -m core.pipeline``)
    warm_start: WarmStartSection = Field(default_factory=WarmStartSection)
    recipe: RecipeSection | None = None
    #: experiment trackers, several at once: [{name: tensorboard}, {name: wandb, options: {mode: offline}}]
    trackers: list[Slot] = Field(default_factory=list)
    #: free-form sections owned by entry points (synthesis loop, evaluation, ablation)
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _eval_set_is_configured(self) -> "Config":
        sets = self.tasks.evaluation_sets()
        if self.run.eval_set is not None and self.run.eval_set not in sets:
            raise ValueError(f"run.eval_set: {self.run.eval_set!r} is not one of tasks.eval_sets "
                             f"({', '.join(sets) or 'none configured'})")
        wanted = (self.recipe.evaluate.sets or []) if self.recipe else []
        unknown = [name for name in wanted if name not in sets]
        if unknown:
            raise ValueError(f"recipe.evaluate.sets: {unknown} not among tasks.eval_sets "
                             f"({', '.join(sets) or 'none configured'}); name them under tasks.eval_sets")
        return self


@dataclass
class ResolvedConfig:
    """A validated config: the shape plus each selected component and its parsed options."""

    config: Config
    raw: dict[str, Any]
    components: dict[str, Component] = field(default_factory=dict)
    options: dict[str, BaseModel] = field(default_factory=dict)
    source: Path | None = None

    def create(self, slot: str, plugins: Plugins, **context: Any) -> Any:
        """Instantiate the component chosen for ``slot`` (e.g. ``"sampler"`` or ``"synthesis.proposer"``)."""
        if slot not in self.components:
            raise ConfigError([f"{slot}: no component configured; add {{name: ..., options: {{...}}}}"])
        component, options = self.components[slot], self.options[slot]
        placed = plugins.hook.scalecua_place_component(slot=slot, component=component, options=options,
                                                       context=context)
        if placed is not None:  # a launcher placed it elsewhere (core/hookspecs.py: the placement hook)
            return check_contract(component, placed)
        return instantiate(component, options, context)

    def to_yaml(self) -> str:
        return OmegaConf.to_yaml(OmegaConf.create(self.raw))
