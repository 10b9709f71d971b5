"""``bench/sampler_ablation.py``'s arithmetic: the simulated learner started from a measured pool, its prediction
at the ablation's rollout budget, and the per-sampler rows it reads from ``ablation.json``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.bench_modules import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("sampler_ablation.py")


@pytest.fixture(scope="module")
def sim():
    return load_bench("samplers.py")


def test_measured_rates_are_smoothed_away_from_0_and_1(bench):
    assert [bench.smoothed(r, 2) for r in (0.0, 0.5, 1.0)] == [pytest.approx(1 / 6), 0.5, pytest.approx(5 / 6)]
    assert bench.smoothed(0.25, 4) == pytest.approx(1.5 / 5)


def test_the_simulated_learner_starts_from_the_measured_pass_rates(sim):
    rates = (0.1, 0.5, 0.9)
    learner = sim.Learner(sim.LearnerModel(tasks=3, pass_rates=rates), seed=0)
    assert learner.pass_rates() == pytest.approx(np.array(rates))
    with pytest.raises(ValueError, match="3 pass rates for a pool of 4 tasks"):
        sim.Learner(sim.LearnerModel(tasks=4, pass_rates=rates), seed=0)


def test_a_pool_nobody_solves_is_predicted_flat_for_every_sampler(bench):
    """Every group of a pool at pass rate ~0 fails whole (the learner is drawn at 1e-3): no informative group,
    nothing learned, every sampler's final mean pass rate is the starting one."""
    got = bench.predict([0.0] * 40, 1000, batch=4, n=2, budget=32, seeds=[0, 1])
    assert set(got) == {"frontier", "uniform", "curriculum", "dapo"}
    for label, row in got.items():
        assert row["final_mean_pass_rate"] == pytest.approx(row["initial_mean_pass_rate"], abs=1e-4), label


def test_the_prediction_stops_each_sampler_at_the_rollout_budget(bench):
    """A pool at 0.5: learning happens; a larger budget never predicts less (the learner only gains)."""
    small = bench.predict([0.5] * 60, 2, batch=4, n=4, budget=32, seeds=[0])
    large = bench.predict([0.5] * 60, 2, batch=4, n=4, budget=320, seeds=[0])
    for label in small:
        assert small[label]["final_mean_pass_rate"] > small[label]["initial_mean_pass_rate"]
        assert large[label]["final_mean_pass_rate"] > small[label]["final_mean_pass_rate"]


def test_measured_rows_and_orders(bench):
    def row(cell, seed, success, share, its):
        return {"cell": cell, "seed": seed, "status": "ok", "seconds": 10.0,
                "summary": {"iterations": its, "eval/success": success, "groups/informative_share": share}}

    ablation = {"rows": [row("sampler=frontier", 0, 0.2, 0.7, 12), row("sampler=frontier", 1, 0.3, 0.6, 12),
                         row("sampler=dapo", 0, 0.1, 1.0, 9), row("sampler=dapo", 1, 0.2, 1.0, 10)],
                "cells": [{"cell": "sampler=frontier", "status": "ok", "summary": {"eval/success": 0.25},
                           "sd": {"eval/success": 0.07}, "rollouts_at_pass": {"0": 30.0, "1": 10.0}},
                          {"cell": "sampler=dapo", "status": "ok", "summary": {"eval/success": 0.15},
                           "sd": {"eval/success": 0.07}, "rollouts_at_pass": None}]}
    got = bench.measured(ablation)
    assert got["frontier"]["test_success_per_seed"] == [0.2, 0.3]
    assert got["frontier"]["rollouts_at_pass_share"] == {"0": 0.75, "1": 0.25}
    assert got["frontier"]["informative_rollout_share"] == 0.0 and got["dapo"]["informative_rollout_share"] is None
    assert got["dapo"]["updates_per_seed"] == [9, 10] and got["dapo"]["rollouts_at_pass_share"] == {}
    assert bench.order({"a": 0.1, "b": None, "c": 0.3, "d": 0.1}) == "c > a = d > b"
