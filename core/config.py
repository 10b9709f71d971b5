"""YAML configuration: omegaconf loading (a file or a packaged config's name), two-phase validation, errors by path.

Every pluggable slot has the shape ``{name: <registered name>, options: {...}}``.
Phase 1 validates the overall shape (core sections, slot shapes); phase 2
looks each selected component up in its registry and validates its options
with the component's own strict model. All problems from both phases are
reported together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import ConfigError
from core import kinds
from core.config_files import resolve_config_path
from core.config_hints import suggest_field
from core.registry import Component, check_contract, instantiate, unknown_name_message
from core.stage_config import RecipeSection, WarmStartSection

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
    #: truncated importance sampling (null: off): each token weighted by min(pi_step_start / pi_rollout, cap) and
    #: clipped against the step's start, so stale (async) or engine-mismatched tokens are corrected, not clipped away
    tis_cap: float | None = Field(None, gt=0)
    max_parse_failures: int = Field(3, ge=1)
    #: optimizer steps per iteration: the batch's groups dealt into this many mini-batches (whole groups), over
    #: ppo_epochs passes (reshuffled each); ratios stay against the rollout logprobs, so later steps are clipped
    #: as in PPO (verl's ppo_mini_batch_size / ppo_epochs). 1 and 1: one step per iteration, as the paper
    ppo_mini_batches: int = Field(1, ge=1)
    ppo_epochs: int = Field(1, ge=1)
    #: the KL stop (null: off): an iteration's later optimizer steps are skipped once the batch's approximate KL
    #: from the rollout policy (``actor/approx_kl``, k3, measured before the step) exceeds this; the iteration's
    #: first step always runs. With ppo_mini_batches x ppo_epochs > 1 it bounds how far one batch moves the policy
    target_kl: float | None = Field(None, gt=0)

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
    #: steps on groups that have finished (core/async_rollouts.py); a group sampled partly by a policy more
    #: than ``max_staleness`` policy versions (iterations) old is never trained. async with max_staleness 0 is sync.
    mode: Literal["sync", "async"] = "sync"
    max_staleness: int = Field(1, ge=0, description="async: most policy versions (iterations) a trained group may lag")


class EvalSet(_Strict):
    """A named evaluation set: task files or directories, or a seeded sample of them."""

    paths: list[str]
    #: evaluate a seeded random subset of this many tasks (e.g. a sample of the training split)
    sample: int | None = Field(None, ge=1)
    #: a sample of the training pool itself: it measures fit, not transfer, so it is exempt from the check that no
    #: evaluation task is trained on (core/splits.py); every other set must be disjoint from ``tasks.paths``
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
    #: the one periodic evaluations use; loading them checks that none is trained on (core/splits.py)
    eval_sets: dict[str, EvalSet] = Field(default_factory=dict)
    #: a JSON object {task_id: pass rate} measured earlier (the recipe's refine stage); the sampler starts
    #: from these estimates instead of its prior (and instead of an initial pass over those tasks)
    pass_rates: str | None = None
    #: a task naming a setup step, getter or metric nothing here provides: ``error`` (one config error listing
    #: them, before any desktop starts) or ``skip`` (left out, listed in skipped_tasks.json); core/task_check.py
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


def _format_loc(prefix: str, loc: Iterable[Any]) -> str:
    parts = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]" if parts else f"[{item}]"
        else:
            parts.append(str(item))
    return ".".join(parts)


def _pydantic_problems(prefix: str, exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        path = _format_loc(prefix, err["loc"])
        if err["type"] == "extra_forbidden":
            problems.append(f"{path}: unknown option")
        else:
            got = err.get("input")
            shown = f" (got {got!r})" if not isinstance(got, (dict, list)) and got is not None else ""
            problems.append(f"{path}: {err['msg']}{shown}")
    return problems


def _section_model(path: str) -> type[BaseModel] | None:
    """The core model that owns the key at ``path`` (``algorithm.foo`` -> AlgorithmSection)."""
    parts = path.split(".")
    if len(parts) == 1:
        return Config
    field_info = Config.model_fields.get(parts[0])
    annotation = getattr(field_info, "annotation", None)
    if len(parts) == 2 and isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def load_raw(path: str | Path | None, overrides: Iterable[str] = ()) -> dict[str, Any]:
    """Load YAML, apply dotlist overrides (``KEY=VALUE``, ``~KEY`` deletes), resolve interpolations."""
    path = resolve_config_path(path) if path is not None else None
    try:
        base = OmegaConf.load(str(path)) if path is not None else OmegaConf.create({})
        overrides = list(overrides)
        removals = [o[1:] for o in overrides if o.startswith("~")]
        assignments = [o for o in overrides if not o.startswith("~")]
        bad = [o for o in assignments if "=" not in o]
        if bad:
            raise ConfigError(
                [f"override {o!r}: expected KEY=VALUE (e.g. sampler.name=uniform) or ~KEY to delete" for o in bad]
            )
        for key in removals:
            _delete_key(base, key)
        if assignments:
            base = OmegaConf.merge(base, OmegaConf.from_dotlist(assignments))
        raw = OmegaConf.to_container(base, resolve=True)
    except FileNotFoundError:
        raise ConfigError([f"config file {path} does not exist"]) from None
    except OmegaConfBaseException as exc:
        raise ConfigError([f"{getattr(exc, 'full_key', '') or '(config)'}: {exc.__class__.__name__}: {exc.msg}"]) from None
    except Exception as exc:  # yaml syntax errors and the like
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError([f"{path}: cannot be parsed: {exc}"]) from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError([f"{path}: the top level must be a mapping, got {type(raw).__name__}"])
    return raw


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """A copy of ``raw`` with ``{dotted.key: value}`` set (a recipe stage's ``overrides``)."""
    import copy

    conf = OmegaConf.create(copy.deepcopy(dict(raw)))
    problems = []
    for key, value in overrides.items():
        if not isinstance(key, str) or not key or key.startswith(".") or key.endswith("."):
            problems.append(f"{where}.overrides: {key!r} is not a dotted config key (e.g. trainer.options.lr)")
            continue
        OmegaConf.update(conf, key, value, merge=True, force_add=True)
    if problems:
        raise ConfigError(problems)
    result = OmegaConf.to_container(conf, resolve=True)
    assert isinstance(result, dict)
    return result


def _delete_key(conf: Any, dotted: str) -> None:
    """Hydra-style ``~a.b.c`` override: remove a key (e.g. a swapped plugin's old options)."""
    parent_path, _, leaf = dotted.rpartition(".")
    parent = OmegaConf.select(conf, parent_path) if parent_path else conf
    if parent is None or leaf not in parent:
        raise ConfigError([f"override '~{dotted}': there is no key '{dotted}' to delete"])
    del parent[leaf]


def _slot_entries(raw: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(yaml path, registry kind, raw slot value) for every slot present in ``raw``."""
    entries = [(key, kind, raw[key]) for key, kind in SLOT_KINDS.items() if isinstance(raw.get(key), Mapping)]
    if isinstance(raw.get("trackers"), list):
        entries += [(f"trackers[{i}]", SLOT_KINDS["trackers"], slot) for i, slot in enumerate(raw["trackers"])]
    synthesis = raw.get("synthesis")
    if isinstance(synthesis, Mapping):
        for role, slot in synthesis.items():
            path = f"synthesis.{role}"
            if slot is not None and path in kinds.SLOT_KINDS:  # unknown roles: core.synthesize names them
                entries.append((path, kinds.SLOT_KINDS[path], slot))
    return entries


def validate(
    raw: dict[str, Any],
    plugins: Plugins,
    *,
    required: Iterable[str] = (),
    source: Path | None = None,
) -> ResolvedConfig:
    """Validate shape and plugin options; raise :class:`ConfigError` with every problem."""
    problems: list[str] = []
    config: Config | None = None
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        for problem in _pydantic_problems("", exc):
            path = problem.split(":")[0]
            owner = _section_model(path)
            if problem.endswith("unknown option"):
                problem = problem.replace("unknown option", "unknown key")
                if owner is not None:
                    problem += "." + suggest_field(path, owner)
            problems.append(problem)

    for slot_path in required:
        value: Any = raw
        for part in slot_path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            kind = kinds.SLOT_KINDS[slot_path]
            names = plugins.registry(kind).names()
            problems.append(
                f"{slot_path}: required by this command but missing; add "
                f"{{name: <one of {', '.join(names) or 'none installed'}>, options: {{}}}}"
            )

    components: dict[str, Component] = {}
    options: dict[str, BaseModel] = {}
    for path, kind, slot in _slot_entries(raw):
        if not isinstance(slot, Mapping) or not isinstance(slot.get("name"), str):
            continue  # phase 1 already reported the shape problem
        registry = plugins.registry(kind)
        name = slot["name"]
        if name not in registry:
            problems.append(f"{path}.name: {unknown_name_message(registry.label, name, registry.names())}")
            continue
        component = registry.get(name)
        opts = slot.get("options") or {}
        if not isinstance(opts, Mapping):
            continue
        try:
            options[path] = component.parse_options(dict(opts))
            components[path] = component
        except ValidationError as exc:
            for problem in _pydantic_problems(f"{path}.options", exc):
                if problem.endswith("unknown option"):
                    problem += "." + suggest_field(problem.split(":")[0], component.options_model,
                                                    root=f"{path}.options")
                problems.append(problem)
        except (ImportError, AttributeError, TypeError) as exc:
            problems.append(f"{path}: {registry.label} '{name}' from '{component.provider}' cannot load its "
                            f"options model: {exc}")

    if problems:
        raise ConfigError(problems)
    assert config is not None
    return ResolvedConfig(config=config, raw=raw, components=components, options=options, source=source)


def load_config(
    path: str | Path | None,
    overrides: Iterable[str] = (),
    *,
    plugins: Plugins | None = None,
    required: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> tuple[ResolvedConfig, Plugins]:
    """Load, load plugins as the config's ``plugins`` section says, and validate."""
    from core.pluginmanager import load_plugins

    path = resolve_config_path(path) if path is not None else None
    raw = load_raw(path, overrides)
    if plugins is None:
        section = raw.get("plugins") or {}
        if not isinstance(section, Mapping):
            raise ConfigError(["plugins: must be a mapping with disable/require/only lists"])
        try:
            parsed = PluginsSection.model_validate(section)
        except ValidationError as exc:
            raise ConfigError(_pydantic_problems("plugins", exc)) from None
        plugins = load_plugins(disable=parsed.disable, require=parsed.require, only=parsed.only, environ=environ)
    return validate(raw, plugins, required=required, source=path), plugins
