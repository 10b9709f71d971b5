"""Nothing evaluated is trained on: the split check (core/runtime/splits.py) on family pools, by hand-made leaks, and at
load through the evaluation sets of a config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import TasksSection
from core.runtime.components import TaskPools
from core.errors import ConfigError
from core.runtime.splits import check_splits, split_problems
from core.types import Task
from plugins.synthesis.families.splits import PoolLayout, plan_variants

LAYOUT = PoolLayout(train=3, validation=1, test=2, heldout=2)


def _pool(seed: int = 0) -> dict[str, dict[str, Task]]:
    by_split: dict[str, dict[str, Task]] = {}
    for variant in plan_variants(LAYOUT, seed):
        task = variant.task()
        by_split.setdefault(variant.split, {})[task.id] = task
    return by_split


def test_a_family_pool_is_disjoint_by_construction() -> None:
    pool = _pool()
    train = {**pool["train"]}
    assert split_problems(train, {"test": pool["test"], "validation": pool["validation"],
                                  "heldout": pool["heldout"]}) == []


def test_every_kind_of_leak_is_named() -> None:
    pool = _pool()
    train = dict(pool["train"])
    test = dict(pool["test"])
    # a test task that reuses a training value
    leaky = next(iter(test.values()))
    a_train_task = next(t for t in train.values() if t.metadata["values"].get("word"))
    reused = a_train_task.metadata["values"]["word"][0]
    leaky.metadata["values"]["word"] = [reused]
    # the same task in both, an instruction asked twice, and a test task in the training pool
    shared = next(iter(pool["validation"].values()))
    twin = next(iter(pool["heldout"].values())).model_copy(deep=True)
    twin.id, twin.instruction = "twin", a_train_task.instruction
    train[shared.id] = shared
    train_with_test = {**train, leaky.id: leaky}
    problems = split_problems(train_with_test, {"test": test, "validation": {shared.id: shared},
                                                "heldout": {"twin": twin}})
    text = "\n".join(problems)
    assert "the training pool holds 1 test or held-out tasks" in text and leaky.id in text
    assert f"evaluation set 'validation': 1 tasks are also in the training pool: {shared.id}" in text
    assert f"evaluation set 'heldout': 1 tasks ask what a training task asks (same instruction): twin = " \
           f"{a_train_task.id}" in text
    assert f"uses word value {reused!r} like training task" in text
    assert "held-out-family tasks come from a family the training pool contains" not in text
    twin.metadata["family"] = a_train_task.metadata["family"]
    with pytest.raises(ConfigError, match="held-out-family tasks come from a family the training pool contains"):
        check_splits(train, {"heldout": {"twin": twin}})


def _write(directory: Path, tasks: dict[str, Task]) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    for task in tasks.values():
        (directory / f"{task.id}.json").write_text(json.dumps(task.to_json()))
    return str(directory)


def test_loading_the_evaluation_sets_checks_them_against_the_pool(tmp_path: Path) -> None:
    pool = _pool()
    section = TasksSection(paths=[_write(tmp_path / "train", pool["train"])], eval_sets={
        "test": {"paths": [_write(tmp_path / "test", pool["test"])]},
        "train": {"paths": [str(tmp_path / "train")], "sample": 5, "training": True}})
    pools = TaskPools(section, base_dir=None, convert=Task.model_validate, seed=0)
    pools.check()  # disjoint; the training sample is exempt
    sample = pools.evaluation("train")
    assert len(sample) == 5 and {t.id for t in sample} <= set(pool["train"])
    assert [t.id for t in TaskPools(section, base_dir=None, convert=Task.model_validate, seed=0).evaluation("train")] \
        == [t.id for t in sample]  # the same sample for the same seed
    with pytest.raises(ConfigError, match="evaluation set 'valid' is not configured; the sets are: test, train"):
        pools.evaluation("valid")

    leaked = dict(pool["test"])
    first = next(iter(leaked.values()))
    first.metadata["values"] = next(iter(pool["train"].values())).metadata["values"]
    section.eval_sets["test"].paths = [_write(tmp_path / "leaky", leaked)]
    with pytest.raises(ConfigError, match=rf"evaluation set 'test': 2 test values also occur in training: "
                                          rf"{first.id} uses"):
        TaskPools(section, base_dir=None, convert=Task.model_validate, seed=0).check()


def test_eval_paths_and_eval_sets_are_one_or_the_other() -> None:
    with pytest.raises(ValueError, match="not both"):
        TasksSection(eval_paths=["a"], eval_sets={"b": {"paths": ["b"]}})
    assert list(TasksSection(eval_paths=["a"]).evaluation_sets()) == ["eval"]
