"""The main job on the family pool (``configs/families-rl.yaml``), every stage real and tiny: the pool built
through VeriGen on live desktops (stage 0), the warm start from a pretrained base on the oracle runs VeriGen's
checker kept of the train split, RL
with Frontier batches smaller than the pool, and the evaluation of the test and train sets before and after,
sampled and greedy, with the floors measured on the same desktops."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from core.config import load_config
from core.errors import ConfigError
from core.runtime.metrics import MetricsLog
from core.runtime.tasks import resolve_source

from .hold import hold_plugin, kill_when_held, run_cli

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "families-rl.yaml"
FAMILIES = ["count-lines", "infeasible", "write-lines"]  # short, the always-fail answer, long (15 turns)


def tiny_config(tmp_path: Path) -> Path:
    config = yaml.safe_load(CONFIG.read_text())
    config["run"].update(output_dir=str(tmp_path / "runs"), iterations=1, checkpoint_every=1)
    config["tasks"]["eval_sets"] = {"test": {"paths": ["pool:test"]},
                                    "train": {"paths": ["pool:train"], "sample": 3, "training": True}}
    config["environment"]["options"].update(max_environments=2, settle_s=0.0)
    config["rollout_loop"] = {"concurrency": 2}
    config["algorithm"].update(batch_size=2, n_rollouts=2, max_new_tokens=16, max_parse_failures=1)
    config["warm_start"].update(epochs=1)
    # the configured pretrained base, at a size a test can build (into the test's own cache)
    config["model"]["options"]["tiny"]["pretrain"] = {"steps": 3, "batch_size": 2, "examples": 20, "held_out": 0}
    recipe = config["recipe"]
    recipe["synthesize"]["overrides"] = {
        "synthesis.proposer.options.families": FAMILIES, "synthesis.proposer.options.train": 2,
        "synthesis.proposer.options.validation": 0, "synthesis.proposer.options.test": 1,
        "synthesis.proposer.options.heldout": 0, "environment.options.max_environments": 2,
        "synthesis.pipeline.options.workers": 2, "synthesis.pipeline.options.environments": 2}
    recipe["refine"] = {"rollouts": 1}
    recipe["stages"] = ["synthesize", "warm_start", "refine", "rl", "control", "evaluate"]
    recipe["control"] = {"epochs": 1}
    recipe["evaluate"] = {"passes": 1, "sets": ["test", "train"], "greedy": True, "floors": True}
    path = tmp_path / "families-rl.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.desktop
@pytest.mark.slow
def test_the_family_recipe_builds_its_pool_and_evaluates_the_test_split_before_and_after(tmp_path) -> None:
    env = {**os.environ, "SCALECUA_CACHE": str(tmp_path / "cache")}
    proc = run_cli("core.pipeline", "--config", str(tiny_config(tmp_path)), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [root] = (tmp_path / "runs").glob("families-rl-*")
    state = json.loads((root / "pipeline.json").read_text())
    assert {s for s, e in state["stages"].items() if e["status"] == "completed"} == \
        {"synthesize", "warm_start", "refine", "rl", "control", "evaluate"}
    assert state["stages"]["synthesize"]["outputs"]["splits"] == {"test": 3, "train": 6}
    # one pretrained base, built by the first stage that loaded the model and reused by every later one
    [base] = [p for p in (tmp_path / "cache" / "tiny-pretrained").iterdir() if p.is_dir()]
    assert json.loads((base / "pretrain.json").read_text())["settings"]["steps"] == 3
    # the warm start imitated the oracle runs VeriGen's checker kept of the 6 train tasks, and no test task's
    demos = Path(state["stages"]["synthesize"]["outputs"]["demonstrations"])
    assert sorted(p.stem for p in (demos / "train").glob("*.jsonl")) == \
        sorted(p.stem for p in (root / "synthesize" / "pool" / "train").rglob("*.json"))
    warm = json.loads((root / "warm_start" / "summary.json").read_text())
    assert warm["demonstrations"]["kept"] == warm["demonstrations"]["tasks"] == 6
    assert not (root / "warm_start" / "demonstrations").exists()  # nothing recorded a second time
    long_demos = sum("write-lines" in p.stem for p in (demos / "train").glob("*.jsonl"))
    # a write-lines oracle (15 turns) overflows K + Delta = 10 screenshots: it trains as several segments
    assert warm["segments"]["demonstrations_with_several"] == long_demos
    # RL's batches are a part of the pool, chosen by the sampler
    [record] = MetricsLog(root / "rl").read()
    assert record["groups/kept"] <= 2 < record["sampler/selectable_tasks"] == 6
    # the SFT-only control is the warm start continued: its log goes on from the warm start's last step
    control = [r["iteration"] for r in MetricsLog(root / "control").read()]
    warm_steps = warm["steps"]
    assert control == list(range(warm_steps + warm_steps // warm["epochs"]))
    assert MetricsLog(root / "control").read()[:warm_steps] == MetricsLog(root / "warm_start").read()
    results = json.loads((root / "evaluate" / "before_after.json").read_text())
    assert set(results["sets"]) == {"test", "train"}
    test = results["sets"]["test"]
    assert {"before", "after", "control", "before_greedy", "after_greedy", "control_greedy", "floors"} <= set(test)
    assert test["before_greedy"]["greedy"] and not test["before"]["greedy"]
    assert test["before"]["domains"]["Overall"]["tasks"] == 3
    assert set(test["before"]["families"]) == set(FAMILIES)
    # one test task of three is infeasible: answering fail solves exactly it; the commonest train oracle is that
    # fail (every infeasible variant shares it; each feasible oracle names its own files)
    assert test["floors"]["always_fail"]["success"] == pytest.approx(1 / 3, abs=1e-4)
    frequent = test["floors"]["frequent_oracle"]
    assert frequent["oracle"] == [{"type": "fail"}]
    assert (frequent["shared_by"], frequent["of_training_tasks"], frequent["success"]) == (2, 6, test["floors"][
        "always_fail"]["success"])
    assert results["sets"]["train"]["before"]["domains"]["Overall"]["tasks"] == 3
    summary = json.loads((root / "report" / "summary.json").read_text())
    assert set(summary["eval_sets"]["test"]["families"]) == set(FAMILIES)
    assert summary["eval_sets"]["test"]["sft_only_control"]["tasks"] == 3
    assert "| floor: always_fail | 33.3 |" in (root / "evaluate" / "before_after.md").read_text()


@pytest.mark.slow
def test_a_recipe_killed_inside_the_synthesize_stage_builds_the_pool_once_on_resume(tmp_path) -> None:
    """SIGKILL while VeriGen writes the checker's demonstrations (two of nine written, the third being named); the
    resume starts the stage over and the pool and its demonstrations are there exactly once, as a run never killed
    leaves them."""
    config = yaml.safe_load(tiny_config(tmp_path).read_text())
    config["recipe"]["stages"] = ["synthesize"]
    path = tmp_path / "synthesize-only.yaml"
    path.write_text(yaml.safe_dump(config))
    env = hold_plugin(tmp_path / "plugin", hook="call:plugins.synthesis.pipeline.safe_name", iteration=3)
    kill_when_held(["core.pipeline", "--config", str(path)], env, "the third demonstration named", timeout_s=900)
    [root] = (tmp_path / "runs").glob("families-rl-*")
    assert json.loads((root / "pipeline.json").read_text())["stages"]["synthesize"]["status"] == "running"
    assert len(list((root / "synthesize" / "demonstrations").rglob("*.jsonl"))) == 2

    resumed = run_cli("core.pipeline", "--config", str(path), "--resume", str(root))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    stage = json.loads((root / "pipeline.json").read_text())["stages"]["synthesize"]
    assert stage["status"] == "completed" and stage["outputs"]["splits"] == {"test": 3, "train": 6}
    for split in ("train", "test"):
        pool = sorted(p.stem for p in (root / "synthesize" / "pool" / split).rglob("*.json"))
        demos = sorted(p.stem for p in (root / "synthesize" / "demonstrations" / split).glob("*.jsonl"))
        assert pool == demos and len(pool) == len(set(pool))
        for demo in (root / "synthesize" / "demonstrations" / split).glob("*.jsonl"):
            assert len(demo.read_text().splitlines()) == 1  # one oracle run, not one per attempt


@pytest.mark.slow
def test_a_recipe_killed_inside_the_control_stage_redoes_only_the_control(tmp_path) -> None:
    """SIGKILL inside the SFT-only control, once it copied the warm start's run directory and made its trainer
    (the second WarmStart of the recipe; the first is the warm start's); the resume keeps every earlier stage,
    redoes the control whole (its log going on from the warm start's once) and evaluates."""
    env = {**hold_plugin(tmp_path / "plugin", hook="call:core.commands.sft.WarmStart", iteration=2),
           "SCALECUA_CACHE": str(tmp_path / "cache")}
    config = tiny_config(tmp_path)
    kill_when_held(["core.pipeline", "--config", str(config)], env, "the control's copy of the warm start",
                   timeout_s=1500)
    [root] = (tmp_path / "runs").glob("families-rl-*")
    stages = json.loads((root / "pipeline.json").read_text())["stages"]
    assert stages["control"]["status"] == "running" and stages["rl"]["status"] == "completed"
    rl_done = (root / "rl" / "metrics.jsonl").stat().st_mtime_ns

    resumed = run_cli("core.pipeline", "--config", str(config), "--resume", str(root),
                      env={**os.environ, "SCALECUA_CACHE": str(tmp_path / "cache")})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    stages = json.loads((root / "pipeline.json").read_text())["stages"]
    assert all(stages[s]["status"] == "completed" for s in stages)
    assert (root / "rl" / "metrics.jsonl").stat().st_mtime_ns == rl_done  # RL was not redone
    warm = json.loads((root / "warm_start" / "summary.json").read_text())
    control = [r["iteration"] for r in MetricsLog(root / "control").read()]
    assert control == list(range(warm["steps"] + warm["steps"] // warm["epochs"]))  # each step once


def test_pool_paths_outside_a_recipe_say_what_builds_them() -> None:
    with pytest.raises(ConfigError, match="synthesize stage builds"):
        resolve_source("pool:train")


def test_an_evaluate_set_that_is_not_configured_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"recipe.evaluate.sets: \['validation'\] not among tasks.eval_sets"):
        load_config(CONFIG, ["recipe.evaluate.sets=[test,validation]"], environ={})


def test_a_synthesize_stage_needs_its_section() -> None:
    with pytest.raises(ConfigError, match="no recipe.synthesize section"):
        load_config(CONFIG, ["~recipe.synthesize"], environ={})


def test_pool_paths_need_the_synthesize_stage(tmp_path) -> None:
    from core.commands.pipeline import Recipe

    resolved, plugins = load_config(CONFIG, ["recipe.stages=[warm_start,rl]"], environ={})
    with pytest.raises(ConfigError, match="name what the synthesize stage builds"):
        Recipe(resolved, plugins, tmp_path).stage_config("rl", {}, ())
    resolved, plugins = load_config(CONFIG, ["recipe.stages=[warm_start,rl]", "tasks.paths=[tasks/os]",
                                             "tasks.eval_sets={}", "recipe.evaluate.sets=null",
                                             "warm_start.demonstrations.paths=[demos:train]"], environ={})
    with pytest.raises(ConfigError, match=r"demos:<split> demonstration paths name what the synthesize stage"):
        Recipe(resolved, plugins, tmp_path).stage_config("warm_start", {}, ())


def test_demos_paths_outside_a_recipe_say_what_keeps_them() -> None:
    from core.runtime.demonstrations import DemonstrationError, demonstration_files

    with pytest.raises(DemonstrationError, match="demos:train: names the demonstrations the recipe's synthesize"):
        demonstration_files(["demos:train"])
