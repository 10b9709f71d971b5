"""``bench/learning.py``'s arithmetic on hand-written recipe reports: per-seed rows, each evaluation set's means
over the seeds, and the targets (the headline set's gain, the train sample's, the lowest training success)."""

from __future__ import annotations


import pytest

from tests.bench_modules import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("learning.py")


def _summary(test: tuple[float, float], train: tuple[float, float]) -> dict:
    def block(before: float, after: float) -> dict:
        return {"warm_start": {"success": before}, "after_rl": {"success": after}, "gain": round(after - before, 4),
                "sft_only_control": {"success": before + 0.05},
                "greedy": {"warm_start": {"success": before}, "after_rl": {"success": after + 0.1}},
                "floors": {"always_fail": 0.05}}
    return {"warm_start_success": {"success": test[0]}, "post_rl_success": {"success": test[1]},
            "rl_gain": round(test[1] - test[0], 4),
            # as the recipe writes them: by name, so the test split is not the first set
            "eval_sets": {"heldout": block(0.0, 0.0), "test": block(*test), "train": block(*train)}}


def test_sets_and_targets_over_seeds(bench) -> None:
    metrics = [{"success/rate": 0.1, "segments/per_episode": 1.0, "groups/kept": 8, "sampler/selectable_tasks": 140,
                "tokens/total": 1000.0, "time/iteration": 10.25, "work/groups_trained": 8.0},
               {"success/rate": 0.3, "segments/per_episode": 2.0, "groups/kept": 8, "sampler/selectable_tasks": 140,
                "tokens/total": 500.0, "time/iteration": 9.8, "work/groups_trained": 8.0}]
    runs = [bench.seed_result(0, _summary((0.2, 0.4), (0.3, 0.5)), metrics, 1.0),
            bench.seed_result(1, _summary((0.2, 0.24), (0.3, 0.35)), metrics, 1.0)]
    assert runs[0]["segments_per_episode"] == {"mean": 1.5, "max_iteration_mean": 2.0}
    assert runs[0]["batch_vs_pool"] == {"batch_tasks_max": 8, "pool_tasks": 140}
    assert runs[0]["trained_groups"] == 16 and runs[0]["rl_work"] == {"trained_tokens": 1500, "loop_seconds": 20.1}
    assert runs[0]["lowest_training_success_vs_warm_start"] == pytest.approx(-0.1)
    result = bench.aggregate(runs)
    test, train = result["sets"]["test"], result["sets"]["train"]
    assert (test["gain"], test["gains"], test["seeds"]) == (pytest.approx(0.12), [0.2, 0.04], 2)
    assert test["greedy"] == {"warm_start": 0.2, "after_rl": pytest.approx(0.42)}
    assert test["floors"] == {"always_fail": 0.05}
    assert train["gain"] == pytest.approx(0.125)
    targets = result["targets"]
    assert targets["mean_gain"]["met"] and not targets["every_seed_gain"]["met"]  # seed 1 gained 4 points
    assert targets["train_sample_mean_gain"] == {"target": 0.15, "measured": pytest.approx(0.125), "met": False}
    assert targets["lowest_training_success_vs_warm_start"]["met"]
    assert test["sft_only_control"] == pytest.approx(0.25)
    assert targets["rl_ahead_of_sft_only_control"] == {"sft_only_control": pytest.approx(0.25),
                                                       "after_rl": pytest.approx(0.32), "met": True}
