"""Typed registries: named factories plus a strict options model per component.

Plugins fill registries from their registration hooks; the config selects one
component per slot by name. Factories and options models may be given as
``"module:attribute"`` strings so heavy modules (torch, vllm, docker) are
imported only when the component is actually created.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

from pydantic import BaseModel, ConfigDict

from core.errors import ScaleCUAError

T = TypeVar("T")

#: kind -> (registration hook name, human label). The order is the pipeline order.
KINDS: dict[str, tuple[str, str]] = {
    "model": ("scalecua_register_models", "model"),
    "environment": ("scalecua_register_environments", "environment backend"),
    "synthesizer_role": ("scalecua_register_synthesizer_roles", "task-synthesizer role"),
    "judge_executor": ("scalecua_register_judge_executors", "judge executor"),
    "sampler": ("scalecua_register_samplers", "sampler"),
    "segmenter": ("scalecua_register_segmenters", "segmenter"),
    "trainer": ("scalecua_register_trainers", "trainer backend"),
    "rollout_engine": ("scalecua_register_rollout_engines", "rollout engine"),
    "getter": ("scalecua_register_getters", "judge getter"),
    "metric": ("scalecua_register_metrics", "judge metric"),
}


class NoOptions(BaseModel):
    """Options model for components that take no options."""

    model_config = ConfigDict(extra="forbid")


class DuplicateComponentError(ScaleCUAError):
    pass


class UnknownComponentError(ScaleCUAError):
    pass


def resolve_ref(ref: Any) -> Any:
    """Import ``"package.module:attr"`` lazily; return anything else unchanged."""
    if not isinstance(ref, str):
        return ref
    module_name, sep, attr = ref.partition(":")
    if not sep or not attr:
        raise ValueError(f"lazy reference {ref!r} must look like 'package.module:attribute'")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def close_matches(name: str, candidates: list[str]) -> list[str]:
    return difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)


def unknown_name_message(label: str, name: str, available: list[str]) -> str:
    match = close_matches(name, available)
    hint = f" Did you mean '{match[0]}'?" if match else ""
    listing = ", ".join(sorted(available)) or "(none installed)"
    return f"unknown {label} '{name}'.{hint} Available: {listing}."


@dataclass(frozen=True)
class Component:
    """One registered implementation of a kind."""

    kind: str
    name: str
    factory_ref: Any
    options_ref: Any
    provider: str
    version: str
    description: str = ""

    @property
    def factory(self) -> Callable[..., Any]:
        return resolve_ref(self.factory_ref)

    @property
    def options_model(self) -> type[BaseModel]:
        model = resolve_ref(self.options_ref) if self.options_ref is not None else NoOptions
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{self.kind} '{self.name}': options model {model!r} is not a pydantic model")
        return model

    def parse_options(self, options: dict[str, Any] | None) -> BaseModel:
        """Validate options; raises pydantic.ValidationError."""
        return self.options_model.model_validate(options or {})

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "provider": self.provider,
            "version": self.version,
            "description": self.description,
        }


@dataclass
class Registry(Generic[T]):
    """Named components of one kind.

    While a plugin's registration hook runs, :attr:`provider` names that
    plugin's distribution so duplicates can be reported with both sources.
    """

    kind: str
    _components: dict[str, Component] = field(default_factory=dict)
    provider: str = "unknown"
    provider_version: str = ""

    @property
    def label(self) -> str:
        return KINDS.get(self.kind, ("", self.kind))[1]

    def register(
        self,
        name: str,
        factory: Callable[..., T] | str,
        *,
        options: type[BaseModel] | str | None = None,
        description: str = "",
    ) -> None:
        """Add a component. ``factory(options_model_instance, **context)`` creates it."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.label} names must be non-empty strings, got {name!r}")
        if name in self._components:
            other = self._components[name]
            raise DuplicateComponentError(
                f"{self.label} '{name}' is provided twice: by '{other.provider}' and by "
                f"'{self.provider}'. Uninstall one, or block one with plugins.disable in the config "
                f"(or SCALECUA_DISABLE_PLUGINS)."
            )
        self._components[name] = Component(
            kind=self.kind,
            name=name,
            factory_ref=factory,
            options_ref=options,
            provider=self.provider,
            version=self.provider_version,
            description=description or _first_doc_line(factory),
        )

    def get(self, name: str) -> Component:
        try:
            return self._components[name]
        except KeyError:
            raise UnknownComponentError(unknown_name_message(self.label, name, self.names())) from None

    def create(self, name: str, options: dict[str, Any] | BaseModel | None = None, **context: Any) -> T:
        """Validate ``options`` and call the factory with the parsed model and ``context``."""
        component = self.get(name)
        parsed = options if isinstance(options, BaseModel) else component.parse_options(options)
        return component.factory(parsed, **context)

    def names(self) -> list[str]:
        return sorted(self._components)

    def __contains__(self, name: object) -> bool:
        return name in self._components

    def __iter__(self) -> Iterator[Component]:
        return iter(self._components[n] for n in self.names())

    def __len__(self) -> int:
        return len(self._components)


def _first_doc_line(obj: Any) -> str:
    if isinstance(obj, str):
        return ""
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
