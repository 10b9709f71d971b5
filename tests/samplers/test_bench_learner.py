"""The simulated learner of ``bench/samplers.py``: transfer within clusters, forgetting, realistic labels.

The sampler comparison is only as fair as this model, so its mechanics are checked directly."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest

from tests.bench_modules import load_bench


@pytest.fixture(scope="module")
def bench():
    module = load_bench("samplers.py")
    yield module
    sys.modules.pop(module.__name__, None)


def informative(rows: int) -> np.ndarray:
    return np.tile([1.0, 0.0, 1.0, 0.0], (rows, 1))


def test_an_informative_group_transfers_to_its_cluster_only(bench) -> None:
    learner = bench.Learner(replace(bench.LearnerModel(tasks=400), clusters=4, cluster_gain=0.5, global_gain=0.0), 0)
    trained = 0
    mate = int(np.flatnonzero((learner.cluster == learner.cluster[trained]) & (np.arange(400) != trained))[0])
    other = int(np.flatnonzero(learner.cluster != learner.cluster[trained])[0])
    before = learner.pass_rates()
    learner.train(np.array([trained]), informative(1))
    after = learner.pass_rates()
    assert after[trained] > after[mate] - before[mate] + before[trained]  # own gain plus the cluster's
    assert after[mate] > before[mate] and after[other] == before[other]
    learner.train(np.array([other]), np.ones((1, 4)))  # all successes: no advantage, nothing learned
    assert learner.pass_rates()[other] == after[other]


def test_untrained_tasks_forget(bench) -> None:
    learner = bench.Learner(replace(bench.LearnerModel(tasks=50), forgetting=0.1, global_gain=0.0), 0)
    learner.train(np.array([0, 1]), informative(2))
    learner.train(np.array([1]), informative(1))
    assert learner.mastery[0] == pytest.approx(0.4 * 0.9) and learner.mastery[1] == pytest.approx(0.8)


def test_labels_are_terciles_of_a_noisy_estimate(bench) -> None:
    learner = bench.Learner(bench.LearnerModel(tasks=3000), 0)
    counts = np.bincount(learner.label, minlength=3)
    assert counts.sum() == 3000 and counts.min() >= 990
    assert 0.5 < learner.label_correlation() < 0.75  # far from the truth a curriculum could not have
    assert {t.metadata.get("estimated_difficulty") for t in bench.make_tasks(learner, labels=True)} == set(bench.LABELS)
    assert all(not t.metadata for t in bench.make_tasks(learner, labels=False))


def test_every_variant_runs_under_every_learner_setting(bench) -> None:
    settings = bench.Settings(iterations=4, batch_size=4, n_rollouts=4, seeds=1)
    for name, changes in bench.LEARNERS.items():
        results, _ = bench.compare(replace(bench.LearnerModel(tasks=60), **changes), settings)
        assert set(results) == {label for label, _, _ in bench.VARIANTS}, name
        assert results["curriculum/initial_pass/sliding"]["initial_pass_rollouts"] == 60 * 8
