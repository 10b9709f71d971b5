from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from core import hookimpl
from core.interfaces import TrainerBackend
from core.registry import ComponentContractError, DuplicateComponentError, Registry, UnknownComponentError


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sigma: float = 0.25


class Trainer(TrainerBackend):
    """The smallest object that implements the trainer contract."""

    def __init__(self, options: Options, **context):
        self.sigma, self.context = options.sigma, context

    def train_step(self, segments):
        return {}

    def eval_step(self, segments):
        return {}

    def export_weights(self, bucket_bytes=256 << 20):
        return iter(())

    def save(self, path):
        pass

    def load(self, path):
        pass


def make(options: Options, **context):
    return Trainer(options, **context)


def test_create_validates_options_and_passes_context():
    registry: Registry = Registry("trainer")
    registry.register("grpo", make, options=Options)
    made = registry.create("grpo", {"sigma": 0.1}, seed=3)
    assert (made.sigma, made.context) == (0.1, {"seed": 3})
    with pytest.raises(ValidationError):
        registry.create("grpo", {"sigma": 0.1, "bogus": 1})


def test_context_the_kind_does_not_define_is_an_error_not_swallowed():
    registry: Registry = Registry("trainer")
    registry.register("grpo", make, options=Options)
    with pytest.raises(ComponentContractError) as info:
        registry.create("grpo", {}, seed=3, sede=4)
    assert "sede" in str(info.value) and "model, algorithm, seed, objective" in str(info.value)


def test_a_factory_returning_the_wrong_kind_names_the_plugin():
    registry: Registry = Registry("sampler")
    registry.provider = "scalecua-foo"
    registry.register("frontier", make, options=Options)
    with pytest.raises(ComponentContractError) as info:
        registry.create("frontier", {})
    message = str(info.value)
    assert "sampler 'frontier' from 'scalecua-foo'" in message and "core.interfaces.Sampler" in message


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
