"""Curriculum: difficulty sources, the band schedule by hand, the unknown-difficulty rules, errors."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from samplers.base import SamplerError
from samplers.curriculum import CurriculumOptions, CurriculumSampler


def curriculum(tasks, seed: int = 0, **options) -> CurriculumSampler:
    sampler = CurriculumSampler(CurriculumOptions(**options))
    sampler.setup(tasks, seed=seed)
    return sampler


def shuffled_difficulties(count: int, seed: int = 0) -> list[dict]:
    values = list(range(count))
    random.Random(seed).shuffle(values)
    return [{"difficulty": v} for v in values]


def test_sliding_band_by_hand(make_tasks):
    metadata = shuffled_difficulties(100)
    tasks = make_tasks(100, metadata)
    difficulty = {t.id: t.metadata["difficulty"] for t in tasks}
    sampler = curriculum(tasks, schedule_iterations=11, band_width=0.2)
    # 20 tasks admitted; iteration 5 of 11 is half way: start = round(0.5 * (100 - 20)) = 40
    for iteration, (low, high) in {0: (0, 20), 5: (40, 60), 10: (80, 100), 50: (80, 100)}.items():
        assert sampler.band(iteration, 8) == (low, high)
        batch = sampler.select(iteration, 8)
        assert len(set(batch)) == 8
        assert all(low <= difficulty[t] < high for t in batch), (iteration, sorted(difficulty[t] for t in batch))
    assert sampler.stats()["band_start"] == 0.8
    weights = sampler.weights()
    assert sum(weights.values()) == 20 and all(weights[t] == 1.0 for t in batch)


def test_expanding_band_by_hand(make_tasks):
    tasks = make_tasks(100, shuffled_difficulties(100, seed=1))
    sampler = curriculum(tasks, schedule_iterations=11, band_width=0.2, mode="expanding")
    # size = ceil((0.2 + progress * 0.8) * 100)
    assert [sampler.band(i, 8) for i in (0, 5, 10)] == [(0, 20), (0, 60), (0, 100)]


def test_band_is_never_smaller_than_the_batch(make_tasks):
    sampler = curriculum(make_tasks(100, shuffled_difficulties(100)), band_width=0.05, schedule_iterations=2)
    assert sampler.band(0, 10) == (0, 10) and sampler.band(1, 10) == (90, 100)
    assert len(set(sampler.select(1, 10))) == 10


def test_labels_and_estimated_difficulty(make_tasks):
    labels = ["hard", "Easy", "medium", "expert", "trivial"]
    tasks = make_tasks(5, [{"estimated_difficulty": label} for label in labels])
    sampler = curriculum(tasks, schedule_iterations=5, band_width=0.2)
    picks = [sampler.select(i, 1)[0] for i in range(5)]
    # trivial < easy < medium < hard < expert
    assert picks == ["task-00004", "task-00001", "task-00002", "task-00000", "task-00003"]


def test_difficulty_key_wins_over_estimated_difficulty(make_tasks):
    tasks = make_tasks(2, [{"difficulty": 5, "estimated_difficulty": 0}, {"difficulty": 1, "estimated_difficulty": 9}])
    sampler = curriculum(tasks, schedule_iterations=2, band_width=0.5)
    assert sampler.select(0, 1) == ["task-00001"]


def test_initial_pass_rates_rank_tasks_without_metadata(make_tasks):
    tasks = make_tasks(10)
    with pytest.raises(SamplerError, match="no task has a difficulty estimate.*initial_pass_rollouts"):
        curriculum(tasks)
    sampler = curriculum(tasks, initial_pass_rollouts=8, schedule_iterations=10, band_width=0.1)
    assert sampler.initial_pass_rollouts == 8
    with pytest.raises(SamplerError, match="before the first select"):
        sampler.select(0, 1)
    sampler.set_initial_pass_rates({t.id: i / 9 for i, t in enumerate(tasks)})  # task 9 always passes: easiest
    assert [sampler.select(i, 1)[0] for i in range(10)] == [f"task-{i:05d}" for i in range(9, -1, -1)]


def test_unknown_difficulty_rules(make_tasks):
    metadata = [{"difficulty": i} for i in range(8)] + [{}, {}]
    tasks = make_tasks(10, metadata)
    with pytest.raises(SamplerError, match=r"2 task\(s\) have no difficulty estimate.*unknown_difficulty"):
        curriculum(tasks, unknown_difficulty="error")
    hardest = curriculum(tasks, unknown_difficulty="hardest", schedule_iterations=2, band_width=0.2)
    assert set(hardest.select(1, 2)) == {"task-00008", "task-00009"}
    easiest = curriculum(tasks, unknown_difficulty="easiest", schedule_iterations=2, band_width=0.2)
    assert set(easiest.select(0, 2)) == {"task-00008", "task-00009"}
    median = curriculum(tasks, unknown_difficulty="median", schedule_iterations=2, band_width=0.2)
    ranking = [median._task_ids[p] for p in median.ranking()]
    assert {ranking.index("task-00008"), ranking.index("task-00009")} == {4, 5}  # median of 0..7 is 3.5


def test_bad_difficulty_values_are_named(make_tasks):
    with pytest.raises(SamplerError, match="'task-00000' has metadata.difficulty = 'impossible'"):
        curriculum(make_tasks(1, [{"difficulty": "impossible"}]))
    with pytest.raises(SamplerError, match="finite number"):
        curriculum(make_tasks(1, [{"difficulty": float("nan")}]))
    with pytest.raises(SamplerError, match="iteration must be >= 0"):
        curriculum(make_tasks(2, [{"difficulty": 1}, {"difficulty": 2}])).select(-1, 1)
    with pytest.raises(ValidationError):
        CurriculumOptions(band_width=0)
    with pytest.raises(ValidationError):
        CurriculumOptions(mode="zigzag")


def test_numeric_strings_count_as_numbers(make_tasks):
    sampler = curriculum(make_tasks(3, [{"difficulty": "3.5"}, {"difficulty": 1}, {"difficulty": "2"}]),
                         schedule_iterations=3, band_width=0.3)
    assert [sampler.select(i, 1)[0] for i in range(3)] == ["task-00001", "task-00002", "task-00000"]


def test_the_schedule_ignores_results(make_tasks):
    tasks = make_tasks(60, shuffled_difficulties(60, seed=3))
    a, b = curriculum(tasks, seed=5, schedule_iterations=20), curriculum(tasks, seed=5, schedule_iterations=20)
    for iteration in range(20):
        batch_a, batch_b = a.select(iteration, 6), b.select(iteration, 6)
        assert batch_a == batch_b
        a.observe(iteration, {t: [1.0] * 8 for t in batch_a})
        b.observe(iteration, {t: [0.0] * 8 for t in batch_b})
