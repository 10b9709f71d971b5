"""The one place that says what a ScaleCUA plugin can provide.

A plugin is any module (or object) with functions marked ``@hookimpl`` whose
names match the specs below. Built-in plugins and third-party packages are
loaded the same way: through the ``scalecua`` entry-point group.

Two kinds of hooks:

* **Registration hooks** (``scalecua_register_*``) receive a typed
  :class:`~core.registry.Registry` and add named factories to it. The YAML
  config later picks exactly one implementation per slot *by name*; no hook
  ever "wins" by answering first.
* **Lifecycle hooks** are broadcast to every plugin. Observers (metric sinks,
  loggers, dashboards) implement them; they must not raise for ordinary
  conditions and must be cheap.
* **The placement hook** (``scalecua_place_component``) is the seam of
  distributed runs: the first plugin that answers supplies the object standing
  for a configured component in this process (a proxy of Ray actors, the rank-0
  driver of an FSDP group). Launchers register such a plugin object for one run;
  configs never name it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import pluggy

if TYPE_CHECKING:
    from core.registry import Registry

PROJECT = "scalecua"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------
# Registration: one hook per component kind (the kinds: core/kinds.py).
# --------------------------------------------------------------------------


@hookspec
def scalecua_register_models(registry: Registry) -> None:
    """Add model families (factories of :class:`core.interfaces.PolicyModel`: renderer + weights)."""


@hookspec
def scalecua_register_environments(registry: Registry) -> None:
    """Add environment backends (factories of :class:`core.interfaces.EnvironmentBackend`)."""


@hookspec
def scalecua_register_synthesizer_roles(registry: Registry) -> None:
    """Add task-synthesizer roles (proposer, judger, checker, fixer implementations)."""


@hookspec
def scalecua_register_synthesis_pipelines(registry: Registry) -> None:
    """Add task-synthesis loops (factories of :class:`core.interfaces.SynthesisPipeline`; VeriGen's is ``verigen``)."""


@hookspec
def scalecua_register_judge_executors(registry: Registry) -> None:
    """Add judge executors (factories of :class:`core.interfaces.JudgeExecutor`)."""


@hookspec
def scalecua_register_trackers(registry: Registry) -> None:
    """Add experiment trackers (factories of :class:`core.interfaces.Tracker`; the config's ``trackers`` list)."""


@hookspec
def scalecua_register_samplers(registry: Registry) -> None:
    """Add task samplers (factories of :class:`core.interfaces.Sampler`)."""


@hookspec
def scalecua_register_segmenters(registry: Registry) -> None:
    """Add trajectory segmenters (factories of :class:`core.interfaces.Segmenter`)."""


@hookspec
def scalecua_register_trainers(registry: Registry) -> None:
    """Add trainer backends (factories of :class:`core.interfaces.TrainerBackend`)."""


@hookspec
def scalecua_register_rollout_engines(registry: Registry) -> None:
    """Add rollout engines for policy inference (factories of :class:`core.interfaces.RolloutEngine`)."""


@hookspec
def scalecua_register_getters(registry: Registry) -> None:
    """Add judge getters by OSWorld name (``vm_file`` is registered as ``vm_file``).

    A getter is ``async def getter(env, config: dict) -> Any``; it retrieves
    state from a live environment. Factories here are the functions themselves.
    """


@hookspec
def scalecua_register_metrics(registry: Registry) -> None:
    """Add judge metrics by OSWorld name (``exact_match``, ``compare_table``, ...).

    A metric is a pure function ``metric(result, expected, **options) -> float``
    with a score in [0, 1].
    """


# --------------------------------------------------------------------------
# Lifecycle: broadcast to every plugin; implemented by observers.
# --------------------------------------------------------------------------


@hookspec
def scalecua_configure(config: Mapping[str, Any], run_dir: Path) -> None:
    """Called once when a run starts, with the resolved config and the run directory."""


@hookspec
def scalecua_episode_end(iteration: int, trajectory: Any, run_dir: Path) -> None:
    """Called after each episode of a training iteration has ended and been judged.

    ``trajectory`` is the :class:`core.types.Trajectory` (turns, judgement, segments; advantages are not
    assigned yet). Environment-error attempts that will be retried are not reported. Observers use it for
    live episode views; tests use it to act at a known point inside an iteration.
    """


@hookspec
def scalecua_iteration_end(iteration: int, metrics: Mapping[str, float], run_dir: Path) -> None:
    """Called after every training iteration with that iteration's scalar metrics: an RL iteration
    (:mod:`core.runtime.loop`) or an optimizer step of the warm start (:mod:`core.sft`, ``train/*`` and ``heldout/loss``)."""


@hookspec
def scalecua_checkpoint_saved(iteration: int, path: Path) -> None:
    """Called after a checkpoint has been written completely (atomically) to ``path``."""


@hookspec
def scalecua_run_end(run_dir: Path, status: str) -> None:
    """Called once when a run ends; ``status`` is ``completed``, ``interrupted`` or ``failed``."""


# --------------------------------------------------------------------------
# Placement: the first plugin that answers decides (distributed launchers).
# --------------------------------------------------------------------------


@hookspec(firstresult=True)
def scalecua_place_component(slot: str, component: Any, options: Any, context: Mapping[str, Any]) -> Any:
    """The object that stands for ``slot``'s configured component in this process, or ``None``.

    Called by :meth:`core.config.ResolvedConfig.create` before the component's own factory. ``None`` (every
    plugin's answer by default) lets the factory build it here as configured; a launcher that places the
    component elsewhere returns its stand-in: a proxy of remote actors (``plugins.ray``), or the factory's
    own product wrapped as the driver of an SPMD group (``trainers.fsdp_run``). The stand-in is checked against
    the kind's contract like any created component. ``component`` is the registered
    :class:`core.registry.Component` (its ``factory`` builds the real thing), ``options`` its validated
    options, ``context`` the keywords the core would pass to the factory.
    """
