"""PPO mini-batches and epochs: how an iteration's groups become optimizer steps (core.runtime.updates)."""

from __future__ import annotations

import pytest

from core.config import AlgorithmSection
from core.types import EpisodeStatus, RolloutGroup, Segment, Trajectory
from core.runtime.updates import merge_step_metrics, mini_batches


def group(task: str, rollouts: int = 2, segments: int = 2) -> RolloutGroup:
    trajectories = []
    for r in range(rollouts):
        tid = f"{task}-r{r}"
        segs = [Segment(trajectory_id=tid, task_id=task, index=i, input_ids=[1, 2, 3], loss_mask=[0, 1, 1],
                        rollout_logprobs=[0.0, -0.1, -0.2]) for i in range(segments)]
        trajectories.append(Trajectory(trajectory_id=tid, task_id=task, group_id=task,
                                       status=EpisodeStatus.COMPLETED, segments=segs))
    return RolloutGroup(task_id=task, trajectories=trajectories)


def owners(step: list[Segment]) -> set[str]:
    return {s.trajectory_id.split("-")[0] for s in step}


def test_one_mini_batch_one_epoch_is_the_whole_batch_in_order():
    groups = [group(f"t{i}") for i in range(3)]
    steps = mini_batches(groups, count=1, epochs=1, seed=0, iteration=5)
    assert steps == [[s for g in groups for t in g.trajectories for s in t.segments]]


@pytest.mark.parametrize("count,epochs", [(2, 1), (3, 2), (4, 3)])
def test_every_epoch_trains_each_segment_once_with_groups_kept_whole(count, epochs):
    groups = [group(f"t{i}") for i in range(5)]
    steps = mini_batches(groups, count=count, epochs=epochs, seed=1, iteration=2)
    assert len(steps) == count * epochs
    every = [id(s) for g in groups for t in g.trajectories for s in t.segments]
    for epoch in range(epochs):
        these = steps[epoch * count:(epoch + 1) * count]
        assert sorted(id(s) for step in these for s in step) == sorted(every)
        seen: set[str] = set()
        for step in these:  # a group's rollouts all sit in one step
            assert not owners(step) & seen
            seen |= owners(step)
        sizes = [len(owners(step)) for step in these]
        assert max(sizes) - min(sizes) <= 1


def test_order_is_reshuffled_per_epoch_and_reproducible_from_seed_and_iteration():
    groups = [group(f"t{i}") for i in range(8)]
    def plan(iteration: int) -> list[set[str]]:
        return [owners(step) for step in mini_batches(groups, count=4, epochs=3, seed=7, iteration=iteration)]

    assert plan(11) == plan(11)
    epochs = [plan(11)[i:i + 4] for i in (0, 4, 8)]
    assert epochs[0] != epochs[1] or epochs[1] != epochs[2]
    assert plan(12) != plan(11)


def test_more_mini_batches_than_groups_gives_one_group_per_step():
    groups = [group("a"), group("b")]
    steps = mini_batches(groups, count=2, epochs=1, seed=0, iteration=0)
    assert sorted(map(sorted, map(owners, steps))) == [["a"], ["b"]]
    assert len(mini_batches(groups[:1], count=2, epochs=2, seed=0, iteration=0)) == 2
    assert mini_batches([], count=2, epochs=1, seed=0, iteration=0) == []


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        mini_batches([group("a")], count=0, epochs=1, seed=0, iteration=0)
    with pytest.raises(ValueError, match="ppo_mini_batches .8. exceeds batch_size .4."):
        AlgorithmSection(batch_size=4, ppo_mini_batches=8)


def test_step_metrics_merge_sums_counts_and_times_keeps_extremes_and_averages_the_rest():
    steps = [{"loss/pg": 1.0, "loss/tokens": 10.0, "time/step": 2.0, "batch/segments": 3.0, "actor/ratio_max": 1.1,
              "actor/ratio_min": 0.9, "actor/grad_norm": 0.5},
             {"loss/pg": 3.0, "loss/tokens": 30.0, "time/step": 1.0, "batch/segments": 4.0, "actor/ratio_max": 1.4,
              "actor/ratio_min": 0.7, "actor/grad_norm": 1.5}]
    assert merge_step_metrics(steps) == {
        "loss/pg": 2.0, "loss/tokens": 40.0, "time/step": 3.0, "batch/segments": 7.0, "actor/ratio_max": 1.4,
        "actor/ratio_min": 0.7, "actor/grad_norm": 1.0, "optimizer_steps": 2.0}
    assert merge_step_metrics(steps[:1]) == {**steps[0], "optimizer_steps": 1.0}


def test_a_step_the_kl_stop_skipped_adds_only_its_kl_and_time():
    steps = [{"loss/pg": 1.0, "loss/tokens": 10.0, "time/step": 2.0, "actor/approx_kl": 0.0, "actor/kl_stopped": 0.0,
              "actor/grad_norm": 0.5},
             {"loss/pg": 5.0, "loss/tokens": 10.0, "time/step": 0.5, "actor/approx_kl": 0.3, "actor/kl_stopped": 1.0}]
    assert merge_step_metrics(steps) == {
        "loss/pg": 1.0, "loss/tokens": 10.0, "time/step": 2.5, "actor/approx_kl": 0.0, "actor/approx_kl_max": 0.3,
        "actor/kl_stopped": 1.0, "actor/grad_norm": 0.5, "optimizer_steps": 1.0}
