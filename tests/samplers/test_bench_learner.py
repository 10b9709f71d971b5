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


@pytest.mark.parametrize("staleness", [0, 1, 2])
def test_the_async_schedule_selects_and_rolls_out_k_updates_behind(bench, monkeypatch, staleness: int) -> None:
    """``run_one(staleness=k)`` replays ``core.runtime.async_rollouts``' order: batch ``b`` is selected after
    the sampler has observed batch ``b - k - 1`` (not ``b - k``) and rolled out by the learner after ``b - k``
    updates; every batch is observed and trained once, in order, so both schedules train the same groups."""
    events: list[tuple[str, int]] = []
    registry = bench.sampler_registry()

    class Recorded:
        def __init__(self, inner) -> None:
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def select(self, it, k):
            events.append(("select", it))
            return self.inner.select(it, k)

        def observe(self, it, outcomes):
            events.append(("observe", it))
            return self.inner.observe(it, outcomes)

    recorded = type("Registry", (), {"create": lambda _, name, opts: Recorded(registry.create(name, opts))})()
    monkeypatch.setattr(bench, "sampler_registry", lambda: recorded)
    trains = []
    rollouts = bench.Learner.rollouts
    train = bench.Learner.train
    monkeypatch.setattr(bench.Learner, "train", lambda self, p, s: trains.append(1) or train(self, p, s))
    monkeypatch.setattr(bench.Learner, "rollouts",
                        lambda self, p, n: events.append(("rollouts", len(trains))) or rollouts(self, p, n))
    iterations = 5
    settings = bench.Settings(iterations=iterations, batch_size=4, n_rollouts=4)
    run = bench.run_one("uniform", {}, bench.LearnerModel(tasks=40), settings, 0, staleness=staleness)
    for b in range(iterations):
        at = events.index(("select", b))
        observed = [it for kind, it in events[:at] if kind == "observe"]
        assert observed == list(range(max(0, b - staleness)))
        assert events[at + 1] == ("rollouts", max(0, b - staleness))  # the learner b - k updates in
    assert [it for kind, it in events if kind == "observe"] == list(range(iterations))
    assert len(trains) == iterations and run["groups_trained"] == iterations * 4
    assert len(run["curve"]) == iterations + 1


def test_the_lag_changes_the_run_and_negative_staleness_is_refused(bench) -> None:
    model, settings = bench.LearnerModel(tasks=200), bench.Settings(iterations=10, batch_size=8, n_rollouts=4)
    sync = bench.run_one("frontier", {}, model, settings, 3)
    assert bench.run_one("frontier", {}, model, settings, 3, staleness=1)["curve"] != sync["curve"]
    with pytest.raises(ValueError, match="staleness"):
        bench.run_one("frontier", {}, model, settings, 3, staleness=-1)
