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

from core import kinds
from core.errors import ScaleCUAError

T = TypeVar("T")

#: kind -> (registration hook name, human label), in pipeline order: derived from the one table
KINDS: dict[str, tuple[str, str]] = {k.name: (k.hook, k.label) for k in kinds.KINDS}


class NoOptions(BaseModel):
    """Options model for components that take no options."""

    model_config = ConfigDict(extra="forbid")


class DuplicateComponentError(ScaleCUAError):
    pass


class UnknownComponentError(ScaleCUAError):
    pass


class ComponentContractError(ScaleCUAError):
    """A factory was called with context its kind does not define, or returned the wrong kind of object."""


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
        return instantiate(component, parsed, context)

    def names(self) -> list[str]:
        return sorted(self._components)

    def __contains__(self, name: object) -> bool:
        return name in self._components

    def __iter__(self) -> Iterator[Component]:
        return iter(self._components[n] for n in self.names())

    def __len__(self) -> int:
        return len(self._components)


def instantiate(component: Component, options: BaseModel, context: dict[str, Any]) -> Any:
    """``component.factory(options, **context)``, checked against its kind's row of :data:`core.kinds.KINDS`.

    The context may hold only the keywords the kind defines (a misspelt or undeclared keyword is an error
    here, not silently swallowed by a factory's ``**_``); the object returned must implement the kind's
    contract, or the error names the plugin that broke it.
    """
    spec = kinds.kind(component.kind)
    unknown = sorted(set(context) - set(spec.context))
    if unknown:
        allowed = ", ".join(spec.context) or "nothing"
        raise ComponentContractError(
            f"{spec.label} '{component.name}': the core passed {', '.join(unknown)}, which the "
            f"{component.kind} kind does not define (its context: {allowed}); see core/kinds.py")
    return check_contract(component, component.factory(options, **context))


def check_contract(component: Component, created: Any) -> Any:
    """``created`` if it implements the contract of ``component``'s kind, else an error naming the plugin."""
    spec = kinds.kind(component.kind)
    if spec.contract is not None:
        contract = resolve_ref(spec.contract)
        if not isinstance(created, contract):
            raise ComponentContractError(
                f"{spec.label} '{component.name}' from '{component.provider}' returned a "
                f"{type(created).__module__}.{type(created).__qualname__}, which does not implement "
                f"{spec.contract.replace(':', '.')}; subclass it (the contract of the {component.kind} kind)")
    elif not callable(created):
        raise ComponentContractError(f"{spec.label} '{component.name}' from '{component.provider}' is not callable")
    return created


def _first_doc_line(obj: Any) -> str:
    if isinstance(obj, str):
        return ""
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
