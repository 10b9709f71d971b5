"""Several evaluations of one checkpoint on one set of components (``core.commands.eval.evaluate_runs``): two sets,
sampled and greedy, all at once, each with the episodes it has when run alone (``core.eval`` one by one).

The desktops and the policy are the ``simulated`` ones (a SIMULATION: a seeded done/wait coin per turn decided by
the request's seed, no model generating), so an episode's length is a function of its seeds alone and the
comparison is exact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from core.commands.eval import EvalRun, evaluate, evaluate_runs
from core.config import load_config
from core.runtime import rundir
from core.types import Task


def _config(tmp_path: Path) -> Path:
    sets = {}
    for name, count in (("first", 3), ("second", 2)):
        folder = tmp_path / name
        folder.mkdir()
        for i in range(count):
            task = Task(id=f"{name}-{i}", instruction=f"do {name} {i}", evaluator={"func": "infeasible"})
            (folder / f"{task.id}.json").write_text(json.dumps(task.to_json()))
        sets[name] = {"paths": [str(folder)]}
    train = tmp_path / "train"
    train.mkdir()
    (train / "t.json").write_text(json.dumps(Task(id="t", instruction="train", evaluator={"func": "infeasible"})
                                             .to_json()))
    config = {
        "run": {"name": "eval-runs", "output_dir": str(tmp_path / "runs"), "seed": 3},
        "tasks": {"paths": [str(train)], "eval_sets": sets},
        "model": {"name": "qwen-vl", "options": {"tiny": {"family": "qwen3_vl"}, "max_pixels": 65536}},
        "environment": {"name": "simulated", "options": {"success_rate": 0.5, "system_prompt": "SIMULATED."}},
        "rollout": {"name": "simulated", "options": {"done_probability": 0.3}},
        "rollout_loop": {"concurrency": 4},
        "algorithm": {"max_turns": 12, "max_new_tokens": 64},
        "judge": {"name": "sandbox"},
        "segmenter": {"name": "sliding-window", "options": {"keep_images": 5, "min_removal": 5}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _lengths(run_dir: Path) -> dict[str, list[int]]:
    """Each task's episode lengths, in rollout order, from the rollouts the run wrote."""
    lengths: dict[str, list[tuple[str, int]]] = {}
    for file in sorted((run_dir / "rollouts").glob("*.jsonl")):
        for line in file.read_text().splitlines():
            traj = json.loads(line)
            lengths.setdefault(traj["task_id"], []).append((traj["trajectory_id"], len(traj["turns"])))
    return {task: [n for _, n in sorted(rows, key=lambda r: r[0][-3:])] for task, rows in lengths.items()}


def test_runs_together_give_each_run_the_episodes_it_has_alone(tmp_path: Path) -> None:
    resolved, plugins = load_config(_config(tmp_path))

    def fresh(name: str) -> Path:
        where = tmp_path / "out" / name
        rundir.prepare_at(where, resolved, plugins)
        return where

    plans = [EvalRun("first", 3, False, fresh("first")), EvalRun("second", 3, False, fresh("second")),
             EvalRun("first", 1, True, fresh("first-greedy"))]
    together = asyncio.run(evaluate_runs(resolved, plugins, ckpt=None, runs=plans))
    alone = [asyncio.run(evaluate(resolved, plugins, fresh(f"alone-{i}"), ckpt=None, passes=p.passes,
                                  eval_set=p.eval_set, greedy=p.greedy)) for i, p in enumerate(plans)]

    for plan, mine, solo, i in zip(plans, together, alone, range(len(plans))):
        assert (mine["eval_set"], mine["passes"], mine["greedy"]) == (plan.eval_set, plan.passes, plan.greedy)
        assert sorted(mine["pass_rates"]) == sorted(solo["pass_rates"]) == \
            [f"{plan.eval_set}-{k}" for k in range(3 if plan.eval_set == "first" else 2)]
        lengths = _lengths(plan.run_dir)
        assert lengths == _lengths(tmp_path / "out" / f"alone-{i}")
        assert all(len(v) == plan.passes for v in lengths.values())
        assert mine["lost_rollouts"] == 0 and mine["env_errors"] == 0
    assert len({n for v in _lengths(plans[0].run_dir).values() for n in v}) > 1  # lengths vary: seeds decide them
