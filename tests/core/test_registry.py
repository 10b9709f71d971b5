from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from core import hookimpl
from core.registry import DuplicateComponentError, Registry, UnknownComponentError


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sigma: float = 0.25


def make(options: Options, **context):
    return ("made", options.sigma, context)


def test_create_validates_options_and_passes_context():
    registry: Registry = Registry("sampler")
    registry.register("frontier", make, options=Options)
    assert registry.create("frontier", {"sigma": 0.1}, seed=3) == ("made", 0.1, {"seed": 3})
    with pytest.raises(ValidationError):
        registry.create("frontier", {"sigma": 0.1, "bogus": 1})


def test_duplicate_names_name_both_providers():
    registry: Registry = Registry("sampler")
    registry.provider = "scalecua"
    registry.register("frontier", make)
    registry.provider = "scalecua-foo"
    with pytest.raises(DuplicateComponentError) as info:
        registry.register("frontier", make)
    assert "'scalecua'" in str(info.value) and "'scalecua-foo'" in str(info.value)


def test_unknown_name_suggests_close_match():
    registry: Registry = Registry("sampler")
    registry.register("frontier", make)
    registry.register("uniform", make)
    with pytest.raises(UnknownComponentError) as info:
        registry.get("fronteir")
    assert "Did you mean 'frontier'?" in str(info.value)
    assert "Available: frontier, uniform." in str(info.value)


def test_lazy_references_import_only_on_use():
    registry: Registry = Registry("trainer")
    registry.register("ghost", "no_such_module_xyz:Factory", options="no_such_module_xyz:Options")
    assert "ghost" in registry  # registering did not import anything
    with pytest.raises(ModuleNotFoundError):
        registry.create("ghost", {})


def test_registration_hooks_fill_registries_with_provider(plugins):
    class InProcess:
        @hookimpl
        def scalecua_register_samplers(self, registry):
            registry.register("test-sampler", make, options=Options)

    plugins.register(InProcess(), name="in-process", distribution="tests", version="9.9")
    component = plugins.registry("sampler").get("test-sampler")
    assert (component.provider, component.version) == ("tests", "9.9")
    plugins.unregister("in-process")
    assert "test-sampler" not in plugins.registry("sampler")
