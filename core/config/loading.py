"""Loading a config: omegaconf (a file or a packaged config's name, ``KEY=VALUE`` overrides), then two-phase
validation with every problem reported by its path.

Phase 1 validates the overall shape (:mod:`core.config.schema`: core sections, slot shapes); phase 2 looks each
selected component up in its registry and validates its options with the component's own strict model. All
problems from both phases are reported together.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ValidationError

from core import kinds
from core.config.files import resolve_config_path
from core.config.hints import suggest_field
from core.config.schema import SLOT_KINDS, Config, PluginsSection, ResolvedConfig
from core.errors import ConfigError
from core.registry import Component, unknown_name_message

if TYPE_CHECKING:
    from core.pluginmanager import Plugins


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
            if slot is not None and path in kinds.SLOT_KINDS:  # unknown roles: core.commands.synthesize names them
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
