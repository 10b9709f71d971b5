"""Checkpoint state: plain JSON, exact round trip mid-run (property test), refusal of foreign state."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import CheckpointError
from samplers.base import SamplerError
from samplers.curriculum import CurriculumOptions, CurriculumSampler
from samplers.dapo import DapoOptions, DapoSampler
from samplers.frontier import FrontierOptions, FrontierSampler
from samplers.uniform import UniformSampler

from tests.samplers.conftest import build_tasks

KINDS = ("frontier", "uniform", "curriculum", "dapo")


def make_sampler(kind: str, initial_pass: bool = False) -> Any:
    if kind == "frontier":
        return FrontierSampler(FrontierOptions(initial_pass_rollouts=8 if initial_pass else 0, p_min=0.1, p_max=1.0))
    if kind == "uniform":
        return UniformSampler()
    if kind == "curriculum":
        return CurriculumSampler(CurriculumOptions(schedule_iterations=7, band_width=0.3,
                                                   initial_pass_rollouts=8 if initial_pass else 0))
    return DapoSampler(DapoOptions(max_extra_ratio=1.0))


def outcome(task_id: str, iteration: int, rollout: int) -> float:
    """A deterministic pseudo-random success, so two samplers fed the same ids see the same results."""
    digest = hashlib.sha256(f"{task_id}/{iteration}/{rollout}".encode()).digest()
    return float(digest[0] % 3 == 0)


def run_iteration(sampler: Any, iteration: int, batch_size: int) -> list[list[str]]:
    """One iteration as core.runtime.loop drives it; returns every draw (select, then top-ups)."""
    draws = [sampler.select(iteration, batch_size)]
    kept: list[str] = []
    while draws[-1]:
        kept += [t for t in draws[-1] if sampler.accept(t, [outcome(t, iteration, r) for r in range(4)])]
        missing = len(draws[0]) - len(kept)
        if missing <= 0:
            break
        draws.append(sampler.top_up(iteration, missing, kept + draws[-1]))
    drawn = [t for d in draws for t in d]
    sampler.observe(iteration, {t: [outcome(t, iteration, r) for r in range(4)] for t in drawn})
    return draws


def walk_json(value: Any) -> None:
    """Only JSON types, and integers small enough for any JSON reader (no 128-bit RNG words)."""
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value)
        for item in value.values():
            walk_json(item)
    elif isinstance(value, list):
        for item in value:
            walk_json(item)
    else:
        assert value is None or isinstance(value, (str, bool, float, int)), type(value)
        if isinstance(value, int):
            assert abs(value) < 2**53


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(KINDS),
    pool=st.integers(min_value=3, max_value=120),
    batch_size=st.integers(min_value=1, max_value=40),
    seed=st.integers(min_value=0, max_value=2**63 - 1),
    before=st.integers(min_value=0, max_value=6),
    after=st.integers(min_value=1, max_value=5),
    initial_pass=st.booleans(),
)
def test_save_and_load_mid_run_gives_identical_future_selections(kind, pool, batch_size, seed, before, after,
                                                                initial_pass):
    metadata = [{"difficulty": (i * 7) % 5} for i in range(pool)] if not initial_pass else None
    tasks = build_tasks(pool, metadata)
    original = make_sampler(kind, initial_pass)
    original.setup(tasks, seed=seed)
    if initial_pass and original.initial_pass_rollouts:
        rates = {t.id: sum(outcome(t.id, -1, r) for r in range(8)) / 8 for t in tasks}
        if kind == "frontier" and not any(r >= 0.1 for r in rates.values()):
            rates[tasks[0].id] = 0.5  # keep at least one task inside the filter
        original.set_initial_pass_rates(rates)
    for iteration in range(before):
        run_iteration(original, iteration, batch_size)

    state = json.loads(json.dumps(original.state_dict(), allow_nan=False))
    walk_json(state)
    restored = make_sampler(kind, initial_pass)
    restored.setup(tasks, seed=seed + 1)  # a different seed: everything must come from the state
    restored.load_state_dict(state)
    assert restored.state_dict() == original.state_dict()

    for iteration in range(before, before + after):
        assert run_iteration(restored, iteration, batch_size) == run_iteration(original, iteration, batch_size)
    assert restored.state_dict() == original.state_dict()
    assert restored.weights() == original.weights()
    assert restored.stats() == original.stats()


@pytest.mark.parametrize("kind", KINDS)
def test_state_from_another_kind_or_pool_is_refused(kind):
    tasks = build_tasks(20, [{"difficulty": i} for i in range(20)])
    sampler = make_sampler(kind)
    with pytest.raises(SamplerError, match="before load_state_dict"):
        sampler.load_state_dict({})
    sampler.setup(tasks, seed=0)
    run_iteration(sampler, 0, 4)
    state = sampler.state_dict()

    other_kind = make_sampler("uniform" if kind != "uniform" else "frontier")
    other_kind.setup(tasks, seed=0)
    with pytest.raises(CheckpointError, match=f"saved by the '{kind}' sampler"):
        other_kind.load_state_dict(state)

    other_pool = make_sampler(kind)
    other_pool.setup(build_tasks(20, [{"difficulty": i} for i in range(20)], prefix="other"), seed=0)
    with pytest.raises(CheckpointError, match="differs from the 20 tasks loaded now"):
        other_pool.load_state_dict(state)

    fresh = make_sampler(kind)
    fresh.setup(tasks, seed=0)
    before = fresh.state_dict()
    damaged = {**state, "rng": {"bit_generator": "PCG64"}}
    with pytest.raises(CheckpointError, match="malformed"):
        fresh.load_state_dict(damaged)
    assert fresh.state_dict() == before  # a failed load changes nothing


def test_a_shortened_array_is_refused():
    tasks = build_tasks(10)
    sampler = FrontierSampler()
    sampler.setup(tasks, seed=0)
    state = sampler.state_dict()
    short = FrontierSampler()
    short.setup(tasks[:5], seed=0)
    state_short = short.state_dict()
    with pytest.raises(CheckpointError, match="'ema' holds 5 values for a pool of 10 tasks"):
        sampler.load_state_dict({**state, "ema": state_short["ema"]})
