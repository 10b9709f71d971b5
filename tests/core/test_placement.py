"""The placement hook (``scalecua_place_component``): the seam distributed launchers (Ray, FSDP) use to stand in
for a configured component, registered as a plugin object for one run."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import hookimpl
from core.config import load_config
from core.interfaces import Sampler
from core.registry import ComponentContractError

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"


class _Remote(Sampler):
    """A stand-in sampler (what a proxy of a remote actor would be)."""

    def __init__(self, built_here) -> None:
        self.built_here = built_here

    def setup(self, tasks, *, seed):
        self.built_here.setup(tasks, seed=seed)

    def select(self, iteration, batch_size):
        return self.built_here.select(iteration, batch_size)

    def observe(self, iteration, outcomes):
        self.built_here.observe(iteration, outcomes)

    def state_dict(self):
        return self.built_here.state_dict()

    def load_state_dict(self, state):
        self.built_here.load_state_dict(state)


class _Placement:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    @hookimpl
    def scalecua_place_component(self, slot, component, options, context):
        self.asked.append(slot)
        if slot != "sampler":
            return None
        if self.answer == "wrong":
            return object()
        return _Remote(component.factory(options, **context))  # the launcher may build the real one too


def test_a_placement_plugin_stands_in_for_its_slot_only() -> None:
    resolved, plugins = load_config(QUICKSTART, [])
    placement = _Placement("proxy")
    plugins.register(placement, name="placement")
    sampler = resolved.create("sampler", plugins)
    segmenter = resolved.create("segmenter", plugins)
    assert isinstance(sampler, _Remote) and type(sampler.built_here).__name__ != "_Remote"
    assert type(segmenter).__name__ != "_Remote"  # None: built here as configured
    assert placement.asked == ["sampler", "segmenter"]


def test_a_stand_in_must_implement_the_kinds_contract() -> None:
    resolved, plugins = load_config(QUICKSTART, [])
    plugins.register(_Placement("wrong"), name="placement")
    with pytest.raises(ComponentContractError, match="sampler 'frontier'.*does not implement core.interfaces"):
        resolved.create("sampler", plugins)


def test_without_a_placement_plugin_nothing_changes() -> None:
    resolved, plugins = load_config(QUICKSTART, [])
    assert type(resolved.create("sampler", plugins)).__name__ == "FrontierSampler"
