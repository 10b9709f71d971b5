"""Uniform sampling and DAPO dynamic sampling (group filter, bounded top-up, counters)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from samplers.base import SamplerError, UnknownTaskError
from samplers.dapo import DapoOptions, DapoSampler
from samplers.uniform import UniformOptions, UniformSampler


def test_uniform_batches_are_distinct_and_cover_the_pool_evenly(make_tasks):
    tasks = make_tasks(50)
    sampler = UniformSampler()
    sampler.setup(tasks, seed=1)
    counts = {t.id: 0 for t in tasks}
    iterations = 2000
    for iteration in range(iterations):
        batch = sampler.select(iteration, 10)
        assert len(set(batch)) == 10
        for task_id in batch:
            counts[task_id] += 1
    # each task is in a batch with probability 10/50; 2000 draws: mean 400, sd ~18
    assert min(counts.values()) > 400 - 80 and max(counts.values()) < 400 + 80


def test_uniform_is_deterministic_and_validates_what_it_observes(make_tasks):
    tasks = make_tasks(100)
    a, b = UniformSampler(), UniformSampler()
    a.setup(tasks, seed=4)
    b.setup(tasks, seed=4)
    assert [a.select(i, 8) for i in range(5)] == [b.select(i, 8) for i in range(5)]
    with pytest.raises(UnknownTaskError, match="'ghost'"):
        a.observe(0, {"ghost": [1.0]})
    with pytest.raises(ValidationError):
        UniformOptions(anything=1)
    assert a.weights() == {} and a.accept("task-00001", [1, 1]) is True and a.top_up(0, 3, []) == []


def dapo(tasks, seed: int = 0, **options) -> DapoSampler:
    sampler = DapoSampler(DapoOptions(**options))
    sampler.setup(tasks, seed=seed)
    return sampler


def test_accept_drops_groups_whose_rewards_are_all_equal(make_tasks):
    sampler = dapo(make_tasks(4))
    sampler.select(0, 2)
    assert sampler.accept("task-00000", [1.0] * 8) is False
    assert sampler.accept("task-00000", [0.0] * 8) is False
    assert sampler.accept("task-00000", [-0.2] * 8) is False  # all incomplete: still no advantage
    assert sampler.accept("task-00000", [1.0, 0.0, 0.0]) is True
    assert sampler.accept("task-00000", [-0.2, 0.0]) is True  # penalty vs plain failure differs
    stats = sampler.stats()
    assert (stats["groups_dropped"], stats["groups_accepted"]) == (3.0, 2.0)
    with pytest.raises(SamplerError, match="no rewards"):
        sampler.accept("task-00000", [])
    with pytest.raises(UnknownTaskError):
        sampler.accept("ghost", [1.0, 0.0])


def test_top_up_draws_fresh_tasks_up_to_the_bound(make_tasks):
    tasks = make_tasks(100)
    sampler = dapo(tasks, seed=2, max_extra_ratio=1.5)  # at most 12 extra tasks for a batch of 8
    batch = sampler.select(0, 8)
    excluded = ["task-00099"]
    first = sampler.top_up(0, 5, batch + excluded)
    assert len(first) == 5 and not set(first) & set(batch + excluded)
    second = sampler.top_up(0, 10, first)  # only 7 left in the budget; the original batch is remembered
    assert len(second) == 7 and not set(second) & set(batch + first)
    assert sampler.top_up(0, 3, []) == []
    stats = sampler.stats()
    assert (stats["extra_draws"], stats["extra_draws_budget"], stats["extra_draws_exhausted"]) == (12.0, 12.0, 1.0)
    sampler.select(1, 8)  # a new iteration resets the per-iteration counters, not the totals
    stats = sampler.stats()
    assert (stats["extra_draws"], stats["extra_draws_exhausted"], stats["extra_draws_total"]) == (0.0, 0.0, 12.0)


def test_top_up_stops_when_the_pool_runs_out(make_tasks):
    sampler = dapo(make_tasks(10), max_extra_ratio=10)
    batch = sampler.select(0, 8)
    assert len(sampler.top_up(0, 8, batch)) == 2
    assert sampler.top_up(0, 6, []) == []
    assert sampler.stats()["extra_draws_exhausted"] == 1.0


def test_zero_ratio_disables_refilling(make_tasks):
    sampler = dapo(make_tasks(20), max_extra_ratio=0)
    batch = sampler.select(0, 4)
    assert sampler.top_up(0, 4, batch) == []


def test_top_up_errors(make_tasks):
    sampler = dapo(make_tasks(20))
    with pytest.raises(SamplerError, match="no select\\(\\) yet"):
        sampler.top_up(0, 1, [])
    sampler.select(3, 4)
    with pytest.raises(SamplerError, match="iteration 2 but the last select\\(\\) was for iteration 3"):
        sampler.top_up(2, 1, [])
    with pytest.raises(SamplerError, match="needed must be >= 0"):
        sampler.top_up(3, -1, [])
    assert sampler.top_up(3, 0, []) == []
    with pytest.raises(UnknownTaskError):
        sampler.top_up(3, 1, ["ghost"])


def test_the_training_loops_refill_protocol_never_repeats_a_task(make_tasks):
    """Drive the sampler exactly as core.runtime.loop does: ``seen`` holds the kept ids and the last draw only."""
    tasks = make_tasks(200)
    solved = {t.id for i, t in enumerate(tasks) if i % 3 != 0}  # two thirds of groups are uninformative
    sampler = dapo(tasks, seed=9)
    for iteration in range(10):
        pending, kept, drawn = sampler.select(iteration, 16), [], []
        while pending:
            drawn += pending
            kept += [t for t in pending if sampler.accept(t, [1.0] * 8 if t in solved else [1.0, 0.0] * 4)]
            missing = 16 - len(kept)
            pending = sampler.top_up(iteration, missing, kept + pending) if missing > 0 else []
        assert len(drawn) == len(set(drawn))
        assert len(kept) == 16 or sampler.stats()["extra_draws_exhausted"] == 1.0
        assert sampler.stats()["extra_draws"] == len(drawn) - 16 <= 48
        sampler.observe(iteration, {t: [1.0] * 8 for t in drawn})
