"""Discover plugins through entry points and build one registry per component kind.

Built-in plugins are declared in our own ``pyproject.toml`` under the
``scalecua`` entry-point group, exactly as a third-party ``scalecua-foo``
distribution would declare its own. Nothing here imports a concrete plugin.

Allow and block lists:

* ``SCALECUA_DISABLE_PLUGINS=a,b`` / YAML ``plugins.disable`` — never load these
  (entry-point names or distribution names).
* ``SCALECUA_PLUGINS=a,b`` / YAML ``plugins.only`` — load only these.
* YAML ``plugins.require`` — fail unless these are loaded.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, overload

import pluggy

from core import hookspecs
from core.errors import PluginError
from core.registry import KINDS, Registry

if TYPE_CHECKING:
    from core.interfaces import (
        EnvironmentBackend, JudgeExecutor, PolicyModel, RolloutEngine, Sampler, Segmenter, SynthesisPipeline,
        SynthesizerRole, Tracker, TrainerBackend,
    )

ENTRY_POINT_GROUP = hookspecs.PROJECT
ENV_DISABLE = "SCALECUA_DISABLE_PLUGINS"
ENV_ONLY = "SCALECUA_PLUGINS"


def _split_env(value: str | None) -> set[str]:
    return {item.strip() for item in (value or "").split(",") if item.strip()}


@dataclass(frozen=True)
class PluginInfo:
    """Where a loaded plugin came from."""

    name: str
    distribution: str
    version: str
    module: str


@dataclass
class Plugins:
    """The loaded plugin manager plus registries built from its registration hooks."""

    manager: pluggy.PluginManager
    infos: dict[str, PluginInfo] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    _registries: dict[str, Registry] | None = None

    @property
    def hook(self) -> Any:
        return self.manager.hook

    def register(self, plugin: object, name: str | None = None, *, distribution: str = "(registered in-process)",
                 version: str = "") -> str:
        """Register a plugin object directly (tests, notebooks); registries are rebuilt."""
        registered = self.manager.register(plugin, name=name)
        if registered is None:
            raise PluginError(f"plugin {name or plugin!r} is blocked or already registered")
        module = getattr(plugin, "__name__", type(plugin).__module__)
        self.infos[registered] = PluginInfo(registered, distribution, version, module)
        self._registries = None
        return registered

    def unregister(self, name: str) -> None:
        self.manager.unregister(name=name)
        self.infos.pop(name, None)
        self._registries = None

    # one overload per kind of core.kinds, typed with the kind's contract (tests/core/test_kinds.py checks them)
    @overload
    def registry(self, kind: Literal["model"]) -> Registry[PolicyModel]: ...
    @overload
    def registry(self, kind: Literal["environment"]) -> Registry[EnvironmentBackend]: ...
    @overload
    def registry(self, kind: Literal["synthesizer_role"]) -> Registry[SynthesizerRole]: ...
    @overload
    def registry(self, kind: Literal["synthesis_pipeline"]) -> Registry[SynthesisPipeline]: ...
    @overload
    def registry(self, kind: Literal["judge_executor"]) -> Registry[JudgeExecutor]: ...
    @overload
    def registry(self, kind: Literal["sampler"]) -> Registry[Sampler]: ...
    @overload
    def registry(self, kind: Literal["segmenter"]) -> Registry[Segmenter]: ...
    @overload
    def registry(self, kind: Literal["trainer"]) -> Registry[TrainerBackend]: ...
    @overload
    def registry(self, kind: Literal["rollout_engine"]) -> Registry[RolloutEngine]: ...
    @overload
    def registry(self, kind: Literal["tracker"]) -> Registry[Tracker]: ...
    @overload
    def registry(self, kind: Literal["getter", "metric"]) -> Registry[Callable[..., Any]]: ...
    @overload
    def registry(self, kind: str) -> Registry[Any]: ...

    def registry(self, kind: str) -> Registry[Any]:
        if kind not in KINDS:
            raise KeyError(f"unknown component kind {kind!r}; kinds: {', '.join(KINDS)}")
        if self._registries is None:
            self._registries = self._build_registries()
        return self._registries[kind]

    def _build_registries(self) -> dict[str, Registry]:
        registries: dict[str, Registry] = {}
        for kind, (hook_name, _label) in KINDS.items():
            registry: Registry = Registry(kind)
            # Call each implementation separately so the registry knows who is registering.
            for impl in reversed(getattr(self.manager.hook, hook_name).get_hookimpls()):
                info = self.infos.get(impl.plugin_name)
                registry.provider = info.distribution if info else impl.plugin_name
                registry.provider_version = info.version if info else ""
                impl.function(registry=registry)
            registry.provider, registry.provider_version = "unknown", ""
            registries[kind] = registry
        return registries

    def components(self) -> dict[str, list[dict[str, Any]]]:
        """Every component by kind, with its provider distribution and version."""
        return {kind: [c.describe() for c in self.registry(kind)] for kind in KINDS}


def _entry_points() -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def load_plugins(
    *,
    disable: Iterable[str] = (),
    only: Iterable[str] | None = None,
    require: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    extra: Iterable[object] = (),
) -> Plugins:
    """Load every allowed entry-point plugin of the ``scalecua`` group."""
    environ = os.environ if environ is None else environ
    blocked = set(disable) | _split_env(environ.get(ENV_DISABLE))
    allowed = set(only or ()) | _split_env(environ.get(ENV_ONLY))

    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    plugins = Plugins(manager)

    for ep in _entry_points():
        dist_name = ep.dist.name if ep.dist is not None else "unknown"
        dist_version = ep.dist.version if ep.dist is not None else ""
        names = {ep.name, dist_name}
        if names & blocked:
            plugins.skipped[ep.name] = "blocked"
            continue
        if allowed and not names & allowed:
            plugins.skipped[ep.name] = "not in allowlist"
            continue
        if manager.has_plugin(ep.name):
            # The same distribution can be visible twice on sys.path (editable + build dir).
            existing = plugins.infos[ep.name]
            if existing.distribution != dist_name:
                raise PluginError(
                    f"two distributions declare the scalecua plugin '{ep.name}': "
                    f"'{existing.distribution}' and '{dist_name}'. Uninstall one, or disable one "
                    f"with {ENV_DISABLE}={dist_name}."
                )
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party plugin must name itself
            raise PluginError(
                f"plugin '{ep.name}' ({ep.value}) from distribution '{dist_name}' {dist_version} failed "
                f"to import: {type(exc).__name__}: {exc}. Fix or uninstall it, or disable it with "
                f"{ENV_DISABLE}={ep.name} or plugins.disable in the config."
            ) from exc
        manager.register(obj, name=ep.name)
        plugins.infos[ep.name] = PluginInfo(ep.name, dist_name, dist_version, ep.value)

    for obj in extra:
        plugins.register(obj)

    loaded_names = set(plugins.infos) | {i.distribution for i in plugins.infos.values()}
    missing = sorted(set(require) - loaded_names)
    if missing:
        why = {name: plugins.skipped.get(name, "not installed") for name in missing}
        details = ", ".join(f"'{n}' ({w})" for n, w in why.items())
        raise PluginError(
            f"plugins.require lists plugins that are not loaded: {details}. "
            f"Install them (pip install <distribution>) or remove them from plugins.require."
        )
    return plugins
