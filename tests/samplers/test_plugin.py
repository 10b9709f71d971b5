"""The built-in samplers arrive through the entry point and are created by name from config options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.interfaces import Sampler

from tests.samplers.conftest import build_tasks


def test_all_four_samplers_are_registered_and_selectable(plugins):
    registry = plugins.registry("sampler")
    assert {"frontier", "uniform", "curriculum", "dapo"} <= set(registry.names())
    tasks = build_tasks(40, [{"difficulty": i % 4} for i in range(40)])
    for name in ("frontier", "uniform", "curriculum", "dapo"):
        sampler = registry.create(name, {})
        assert isinstance(sampler, Sampler) and sampler.kind == name
        sampler.setup(tasks, seed=0)
        assert len(set(sampler.select(0, 8))) == 8


def test_options_come_from_the_config_block(plugins):
    registry = plugins.registry("sampler")
    frontier = registry.create("frontier", {"mu": 0.4, "initial_pass_rollouts": 8, "p_min": 0.1, "p_max": 0.9})
    assert (frontier.options.mu, frontier.initial_pass_rollouts) == (0.4, 8)
    assert registry.create("dapo", {"max_extra_ratio": 1.0}).options.max_extra_ratio == 1.0
    assert registry.create("curriculum", {"mode": "expanding"}).options.mode == "expanding"
    with pytest.raises(ValidationError, match="sigmaa"):
        registry.create("frontier", {"sigmaa": 0.1})
    with pytest.raises(ValidationError, match="extra"):
        registry.create("uniform", {"gamma": 0.2})
