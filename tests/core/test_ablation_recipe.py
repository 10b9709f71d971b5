"""``core.ablate --recipe RUN`` (every cell is a recipe's RL stage) and where each cell's rollouts went."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.commands.ablate import aggregate, recipe_overrides, rollout_bins
from core.commands.ablate import main as ablate_main
from core.errors import ConfigError
from core.runtime.metrics import PASS_BINS, MetricsLog, pass_bin, rollouts_by_pass, work_metrics
from core.runtime.plots import plot_rollout_bins
from core.types import Judgement, RolloutGroup, Trajectory

ROOT = Path(__file__).resolve().parents[2]


def _group(task_id: str, outcomes: list[int]) -> RolloutGroup:
    return RolloutGroup(task_id, [Trajectory(f"{task_id}-{i}", task_id, task_id, judgement=Judgement(score=float(o)))
                                  for i, o in enumerate(outcomes)])


def test_pass_bins_put_the_all_failed_and_all_solved_groups_apart():
    assert [pass_bin(r) for r in (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)] == [
        "0", "0-0.25", "0-0.25", "0.25-0.5", "0.25-0.5", "0.5-0.75", "0.5-0.75", "0.75-1", "1"]
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        pass_bin(1.5)


def test_rollouts_are_counted_by_their_group_pass_rate_trained_or_not():
    trained = [_group("a", [1, 0, 0, 0]), _group("b", [1, 1, 0, 1])]
    rejected = [_group("c", [0, 0, 0, 0]), _group("d", [1, 1, 1, 1]), _group("e", [1, 1])]
    got = work_metrics(trained, rejected)
    assert {k.removeprefix("work/rollouts_at_pass/"): v for k, v in got.items() if "rollouts_at_pass" in k} == {
        "0": 4.0, "0-0.25": 4.0, "0.25-0.5": 0.0, "0.5-0.75": 4.0, "0.75-1": 0.0, "1": 6.0}
    assert sum(rollouts_by_pass(trained + rejected).values()) == 18.0


def _recipe(root: Path, *, refine: bool = True, pool: bool = True) -> Path:
    run = root / "runs" / "recipe-1"
    (run / "warm_start" / "checkpoints" / "step_9").mkdir(parents=True)
    stages = {"warm_start": {"status": "completed",
                             "outputs": {"checkpoint": str(run / "warm_start" / "checkpoints" / "step_9")}}}
    if pool:
        for split in ("train", "test"):
            (run / "synthesize" / "pool" / split).mkdir(parents=True)
        stages["synthesize"] = {"status": "completed", "outputs": {"pool": str(run / "synthesize" / "pool")}}
    if refine:
        (run / "refine").mkdir()
        (run / "refine" / "pass_rates.json").write_text(json.dumps({"fam-a-train-0000": 0.5}))
        stages["refine"] = {"status": "completed", "outputs": {"pass_rates": str(run / "refine" / "pass_rates.json")}}
    else:
        stages["refine"] = {"status": "running", "outputs": {}}
    (run / "pipeline.json").write_text(json.dumps({"stages": stages}))
    return run


def test_recipe_overrides_make_each_cell_the_recipes_rl_stage(tmp_path):
    run = _recipe(tmp_path)
    base = {"tasks": {"paths": ["pool:train"], "eval_sets": {"test": {"paths": ["pool:test"]},
                                                             "extra": {"paths": ["/data/other"]}}},
            "recipe": {"rl": {"overrides": {"trainer.options.lr": 0.003, "trainer.options.betas": [0.0, 0.999],
                                            "trainer.options.lr_schedule": "cosine"}}}}
    got = recipe_overrides(run, base)
    assert got[:3] == ["trainer.options.lr=0.003", "trainer.options.betas=[0.0, 0.999]",
                       'trainer.options.lr_schedule="cosine"']
    pool = run / "synthesize" / "pool"
    assert got[3:] == [f"run.init_from={run / 'warm_start' / 'checkpoints' / 'step_9'}",
                       f"tasks.pass_rates={run / 'refine' / 'pass_rates.json'}",
                       f"tasks.paths={json.dumps([str(pool / 'train')])}",
                       f"tasks.eval_sets.test.paths={json.dumps([str(pool / 'test')])}"]  # "extra" names no pool


def test_recipe_paths_recorded_relative_to_where_the_recipe_ran_are_found_from_anywhere(tmp_path, monkeypatch):
    run = _recipe(tmp_path)
    state = json.loads((run / "pipeline.json").read_text())
    ckpt = state["stages"]["warm_start"]["outputs"]
    ckpt["checkpoint"] = str(Path(ckpt["checkpoint"]).relative_to(tmp_path))  # runs/recipe-1/warm_start/...
    (run / "pipeline.json").write_text(json.dumps(state))
    monkeypatch.chdir(run)  # not where the recipe ran
    got = recipe_overrides(run, {})
    assert f"run.init_from={run / 'warm_start' / 'checkpoints' / 'step_9'}" in got


def test_recipe_without_refine_gives_no_pass_rates_and_a_missing_stage_is_named(tmp_path):
    got = recipe_overrides(_recipe(tmp_path / "a", refine=False), {"tasks": {"paths": ["pool:train"]}})
    assert not any(o.startswith("tasks.pass_rates=") for o in got)
    with pytest.raises(ConfigError, match="stage 'synthesize', which has not completed"):
        recipe_overrides(_recipe(tmp_path / "b", pool=False), {"tasks": {"paths": ["pool:train"]}})
    with pytest.raises(ConfigError, match="no pipeline.json there"):
        recipe_overrides(tmp_path, {})


def test_the_family_ablation_plans_every_cell_from_the_recipe_run(tmp_path, capsys):
    run = _recipe(tmp_path)
    assert ablate_main([str(ROOT / "configs" / "ablations" / "samplers.yaml"), "--dry-run", "--recipe", str(run),
                        f"run.output_dir={tmp_path / 'out'}"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [(p["cell"], p["seed"]) for p in plan] == [(f"sampler={s}", seed) for s in
                                                      ("frontier", "uniform", "curriculum", "dapo")
                                                      for seed in (0, 1, 2)]
    for cell in plan:
        overrides = cell["overrides"]
        assert f"run.init_from={run / 'warm_start' / 'checkpoints' / 'step_9'}" in overrides
        assert f"tasks.paths={json.dumps([str(run / 'synthesize' / 'pool' / 'train')])}" in overrides
        assert "trainer.options.lr=0.003" in overrides and "run.rollout_budget=384" in overrides
        # the recipe's RL settings first: the file's and the command line's overrides win over them
        assert overrides.index("trainer.options.lr=0.003") < overrides.index("algorithm.batch_size=8")


def test_each_cells_rollouts_by_pass_rate_are_summed_over_the_run_and_averaged_over_seeds(tmp_path):
    runs = []
    for seed, counts in enumerate(([8.0, 16.0, 0.0, 0.0, 4.0, 4.0], [0.0, 24.0, 0.0, 8.0, 0.0, 0.0])):
        (tmp_path / f"s{seed}").mkdir()
        log = MetricsLog(tmp_path / f"s{seed}")
        for it in range(2):
            log.append({"iteration": it, **{f"work/rollouts_at_pass/{b}": c / 2 for b, c in zip(PASS_BINS, counts)}})
        runs.append(tmp_path / f"s{seed}")
    assert list(rollout_bins(runs[0]).values()) == [8.0, 16.0, 0.0, 0.0, 4.0, 4.0]
    assert rollout_bins(None) == dict.fromkeys(PASS_BINS, 0.0)
    rows = [{"cell": "sampler=frontier", "status": "ok", "summary": {"iterations": 2}, "curves": {},
             "rollouts_at_pass": rollout_bins(r)} for r in runs]
    cell, = aggregate(rows, [])
    assert list(cell["rollouts_at_pass"].values()) == [4.0, 20.0, 0.0, 4.0, 2.0, 2.0]
    plot_rollout_bins({"sampler=frontier": cell["rollouts_at_pass"], "sampler=uniform": rollout_bins(runs[1])},
                      tmp_path / "bins.png")
    assert (tmp_path / "bins.png").read_bytes().startswith(b"\x89PNG")


def test_resume_keeps_the_finished_cells_and_continues_the_cut_one_from_its_run_dir(tmp_path, monkeypatch):
    """The child ``core.run`` processes are stood in for (they would train): each leaves a run directory with a
    config and one metrics line; the second cell is "killed" (exit 130) the first time."""
    import subprocess

    from core.commands import ablate

    spec = tmp_path / "abl.yaml"
    spec.write_text(f"base: {ROOT / 'configs' / 'quickstart.yaml'}\nmatrix:\n  sampler: [frontier, uniform]\n"
                    "metrics: [success/rate]\nlast: 1\n")
    calls: list[list[str]] = []

    def child(cmd, *args, **kwargs):
        calls.append(cmd)
        name = next(a for a in cmd if a.startswith("run.name=")).split("=", 1)[1]
        resumed = "--resume" in cmd
        run_dir = Path(cmd[cmd.index("--resume") + 1]) if resumed else tmp_path / "abl" / f"{name}-{len(calls)}"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text("{}\n")
        MetricsLog(run_dir).append({"iteration": 0, "success/rate": 0.5, "rollout/episodes_run": 4.0})
        killed = name == "sampler-uniform" and not resumed
        return subprocess.CompletedProcess(cmd, 130 if killed else 0)

    monkeypatch.setattr(ablate.subprocess, "run", child)
    assert ablate_main([str(spec), f"run.output_dir={tmp_path}"]) == 1
    assert len(calls) == 2
    assert ablate_main([str(spec), "--resume", f"run.output_dir={tmp_path}"]) == 0
    assert len(calls) == 3 and "run.name=sampler-uniform" in calls[2]  # the finished cell was kept
    assert calls[2][-2:] == ["--resume", str(tmp_path / "abl" / "sampler-uniform-2")]
    result = json.loads((tmp_path / "abl" / "ablation.json").read_text())
    assert [(r["cell"], r["status"], r["summary"]["iterations"]) for r in result["rows"]] == [
        ("sampler=frontier", "ok", 1), ("sampler=uniform", "ok", 2)]  # resumed: its second line, same run dir
    assert ablate_main([str(spec), f"run.output_dir={tmp_path}"]) == 1 and len(calls) == 5  # no --resume: anew


def test_jobs_runs_cells_side_by_side_keeps_the_plan_order_and_logs_each_child_apart(tmp_path, monkeypatch):
    """``--jobs 2``: both stood-in children must be running at once (a barrier neither passes alone), each
    writes its output to its own ``<run name>.log``, and the rows keep the plan's order whichever ends first."""
    import subprocess
    import threading

    from core.commands import ablate

    spec = tmp_path / "abl.yaml"
    spec.write_text(f"base: {ROOT / 'configs' / 'quickstart.yaml'}\nmatrix:\n  sampler: [frontier, uniform]\n"
                    "metrics: [success/rate]\nlast: 1\nseeds: [0]\n")
    both_running = threading.Barrier(2, timeout=60)
    ended: list[str] = []

    def child(cmd, *args, **kwargs):
        name = next(a for a in cmd if a.startswith("run.name=")).split("=", 1)[1]
        both_running.wait()  # BrokenBarrierError (a failed cell) if the cells ran one after another
        kwargs["stdout"].write(f"training {name}\n")
        run_dir = tmp_path / "abl" / f"{name}-run"
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text("{}\n")
        MetricsLog(run_dir).append({"iteration": 0, "success/rate": 0.25 if "frontier" in name else 0.75,
                                    "rollout/episodes_run": 4.0})
        ended.append(name)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(ablate.subprocess, "run", child)
    assert ablate_main([str(spec), "--jobs", "2", f"run.output_dir={tmp_path}"]) == 0
    result = json.loads((tmp_path / "abl" / "ablation.json").read_text())
    assert [(r["cell"], r["summary"]["success/rate"]) for r in result["rows"]] == [
        ("sampler=frontier", 0.25), ("sampler=uniform", 0.75)]
    for name in ("sampler-frontier_seed0", "sampler-uniform_seed0"):
        assert (tmp_path / "abl" / f"{name}.log").read_text() == f"training {name}\n"
    assert len((tmp_path / "abl" / "cells.jsonl").read_text().splitlines()) == 2 and len(ended) == 2
    with pytest.raises(ConfigError, match="--jobs 0"):
        ablate_main([str(spec), "--jobs", "0"])
