"""Every list of component kinds agrees with the one table, core/kinds.py."""

from __future__ import annotations

import inspect

import pytest

from core import hookspecs, kinds, registry
from core.config import SLOT_KINDS, Config, load_config
from core.errors import ConfigError
from core.interfaces import SynthesisPipeline, SynthesizerRole
from core.registry import resolve_ref


def test_registration_hooks_are_exactly_the_tables():
    specs = {name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("scalecua_register_")}
    assert specs == {k.hook for k in kinds.KINDS}


def test_registries_and_config_slots_derive_from_the_table():
    assert list(registry.KINDS) == [k.name for k in kinds.KINDS]
    assert {k.hook for k in kinds.KINDS} == {hook for hook, _ in registry.KINDS.values()}
    assert SLOT_KINDS == {s: k for s, k in kinds.SLOT_KINDS.items() if "." not in s}
    for slot in kinds.SLOT_KINDS:
        section = slot.split(".")[0]
        assert section in Config.model_fields, f"slot {slot} has no config section"


def test_every_contract_resolves_to_a_core_base_class():
    for spec in kinds.KINDS:
        if spec.contract is not None:
            assert spec.contract.startswith("core.interfaces:")
            assert inspect.isclass(resolve_ref(spec.contract)), spec.name


def test_plugins_registry_is_typed_per_kind_with_the_tables_contract():
    """``Plugins.registry("sampler")`` is a ``Registry[Sampler]`` to a type checker: one overload per kind."""
    import typing

    import core.interfaces
    from core.pluginmanager import Plugins

    namespace = {**vars(core.interfaces), **vars(typing), "Registry": registry.Registry}
    typed = {}
    for overload in typing.get_overloads(Plugins.registry):
        hints = typing.get_type_hints(overload, globalns=namespace)
        kind_hint = hints["kind"]
        if typing.get_origin(kind_hint) is typing.Literal:
            (contract,) = typing.get_args(hints["return"])
            typed.update({name: contract for name in typing.get_args(kind_hint)})
    assert set(typed) == {k.name for k in kinds.KINDS}
    for spec in kinds.KINDS:
        expected = resolve_ref(spec.contract) if spec.contract else typing.Callable[..., typing.Any]
        assert typed[spec.name] == expected, spec.name


def test_every_builtin_component_is_registered_under_a_table_kind(plugins):
    listing = plugins.components()
    assert set(listing) == set(kinds.BY_NAME)
    assert [c["name"] for c in listing["synthesis_pipeline"]] == ["verigen"]
    assert "verigen" not in {c["name"] for c in listing["synthesizer_role"]}
    roles = resolve_ref(kinds.kind("synthesizer_role").contract)
    assert roles is SynthesizerRole and not issubclass(resolve_ref(
        plugins.registry("synthesis_pipeline").get("verigen").factory_ref), SynthesizerRole)
    assert issubclass(plugins.registry("synthesis_pipeline").get("verigen").factory, SynthesisPipeline)


def test_the_loop_is_not_a_role(tmp_path):
    """``synthesis.proposer: {name: verigen}`` used to validate because the loop was registered as a role."""
    config = tmp_path / "synth.yaml"
    config.write_text("synthesis:\n  proposer: {name: verigen}\n  pipeline: {name: llm-proposer}\n")
    with pytest.raises(ConfigError) as info:
        load_config(config)
    text = str(info.value)
    assert "synthesis.proposer.name: unknown task-synthesizer role 'verigen'" in text
    assert "synthesis.pipeline.name: unknown task-synthesis loop 'llm-proposer'" in text


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(KeyError) as info:
        kinds.kind("rollout")
    assert "rollout_engine" in str(info.value)
