"""The one table of component kinds.

Everything else that lists kinds is derived from :data:`KINDS` or checked against it
(``tests/core/test_kinds.py``): the registration hooks in :mod:`core.hookspecs`, the
registries of :mod:`core.registry`, the config slots of :mod:`core.config`, the keyword
context a factory receives and the contract the created object must implement.

Naming: a *kind* is what a plugin registers (``rollout_engine``); a *slot* is the config
key that selects one component of that kind by name (``rollout``). Most slots carry
the kind's name; the exceptions are listed in the table (``rollout`` -> ``rollout_engine``,
``judge`` -> ``judge_executor``, ``synthesis.<role>`` -> ``synthesizer_role``,
``synthesis.pipeline`` -> ``synthesis_pipeline``). Sections that are not slots
(``rollout_loop``, ``algorithm``, ...) configure the core itself. Getters and metrics
have no slot: tasks name them (OSWorld's ``evaluator`` blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

#: the VeriGen roles the synthesis section selects, in the order the loop applies them
SYNTHESIS_ROLES: tuple[str, ...] = ("proposer", "validator", "judger", "checker", "fixer")


@dataclass(frozen=True)
class Kind:
    """One component kind."""

    name: str
    #: the registration hook plugins implement (``scalecua_register_<plural>``)
    hook: str
    #: what error messages call it
    label: str
    #: config keys that select one component of this kind (empty: selected by tasks, not by config)
    slots: tuple[str, ...]
    #: the class (``module:Name``) a created component must be an instance of; None: a plain callable
    contract: str | None
    #: keyword arguments the core may pass to a factory besides its options (nothing else is ever passed)
    context: tuple[str, ...] = ()


KINDS: tuple[Kind, ...] = (
    Kind("model", "scalecua_register_models", "model", ("model",),
         "core.interfaces:PolicyModel", ("run_dir",)),
    Kind("environment", "scalecua_register_environments", "environment backend", ("environment",),
         "core.interfaces:EnvironmentBackend", ("run_dir",)),
    Kind("synthesizer_role", "scalecua_register_synthesizer_roles", "task-synthesizer role",
         tuple(f"synthesis.{role}" for role in SYNTHESIS_ROLES),
         "core.interfaces:SynthesizerRole", ("run_dir", "seed", "base_dir", "getters", "metrics")),
    Kind("synthesis_pipeline", "scalecua_register_synthesis_pipelines", "task-synthesis loop",
         ("synthesis.pipeline",), "core.interfaces:SynthesisPipeline",
         ("roles", "role_names", "backend", "judge", "run_dir", "run_id", "seed")),
    Kind("judge_executor", "scalecua_register_judge_executors", "judge executor", ("judge",),
         "core.interfaces:JudgeExecutor"),
    Kind("sampler", "scalecua_register_samplers", "sampler", ("sampler",), "core.interfaces:Sampler"),
    Kind("segmenter", "scalecua_register_segmenters", "segmenter", ("segmenter",), "core.interfaces:Segmenter"),
    Kind("trainer", "scalecua_register_trainers", "trainer backend", ("trainer",),
         "core.interfaces:TrainerBackend", ("model", "algorithm", "seed", "objective")),
    Kind("rollout_engine", "scalecua_register_rollout_engines", "rollout engine", ("rollout",),
         "core.interfaces:RolloutEngine", ("model", "seed")),
    Kind("tracker", "scalecua_register_trackers", "experiment tracker", ("trackers",), "core.interfaces:Tracker",
         ("run_dir",)),
    Kind("getter", "scalecua_register_getters", "judge getter", (), None),
    Kind("metric", "scalecua_register_metrics", "judge metric", (), None),
)

BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}

#: config slot -> kind, for every slot
SLOT_KINDS: dict[str, str] = {slot: kind.name for kind in KINDS for slot in kind.slots}

#: the top-level slots (``model``, ``environment``, ...): the ones ``core.ablate`` may sweep directly
TOP_LEVEL_SLOTS: tuple[str, ...] = tuple(slot for slot in SLOT_KINDS if "." not in slot)


def kind(name: str) -> Kind:
    """The kind called ``name``; a KeyError listing the kinds otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown component kind {name!r}; kinds: {', '.join(BY_NAME)}") from None
