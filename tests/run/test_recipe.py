"""The paper's recipe as one command (``python -m core.pipeline``), every stage real and small: warm start
on oracles recorded on real desktops, refinement rollouts with trajectory-guided synthesis whose LLM roles
talk to a scripted OpenAI-compatible server on loopback (a real HTTP server replaying scripted replies: no
LLM API can be reached here), RL on the refined pool from the warm start, and the before/after evaluation.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from core.runtime.checkpoint import list_complete
from core.runtime.metrics import MetricsLog

from ..synthesis.helpers import act, fenced, file_task, typed_then, verdict
from ..synthesis.scripted_llm import Rule, ScriptedLLM
from .hold import hold_plugin, kill_when_held, run_cli, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
TASKS = ["os-count-lines", "os-make-executable"]
XTERM = {"type": "open", "parameters": {"path": "xterm"}}
SUBTASK = file_task("Create ~/Documents/wc.txt containing 3.", path="~/Documents/wc.txt", text="3", suffix="rc01",
                    config=[{"type": "execute", "parameters": {"command": "mkdir -p ~/Documents", "shell": True,
                                                               "check": True}}, XTERM])


def rules() -> list[Rule]:
    """Any failed task decomposes into one sub-task; solved ones compose; the judger approves; the checker
    types the command that writes the file, then says done once it has run."""
    decomposition = {"deviation_step": 1, "analysis": "the command was mistyped", "subtasks": [SUBTASK]}
    composed = fenced({"instruction": "Count the lines of ~/data/access.log into ~/line_count.txt and make "
                                      "~/bin/backup.sh executable.", "explanation": "both", "difficulty": "medium",
                       "estimated_steps": 8})
    return [
        Rule(model="proposer", contains="Failed task", replies=[fenced(decomposition)], repeat_last=True),
        Rule(model="proposer", contains="Tasks to combine", replies=[composed], repeat_last=True),
        Rule(model="judger", replies=[verdict(True)], repeat_last=True),
        Rule(model="checker", respond=typed_then("mkdir -p ~/Documents && echo 3 > ~/Documents/wc.txt",
                                                 act({"type": "done"}))),
        Rule(model="fixer", replies=[fenced(SUBTASK)], repeat_last=True),
    ]


def recipe_config(tmp_path: Path, server: ScriptedLLM | None) -> Path:
    config = yaml.safe_load(QUICKSTART.read_text())
    config["run"].update(output_dir=str(tmp_path / "runs"), iterations=3, checkpoint_every=1, keep_checkpoints=5,
                         eval_every=3, eval_passes=1)
    config["tasks"] = {"paths": ["package:environments.tasks/osworld"], "include": TASKS}
    config["model"]["options"]["max_pixels"] = 65536
    config["environment"]["options"].update(max_environments=2, settle_s=0.0)
    config["rollout_loop"] = {"concurrency": 2}
    config["algorithm"].update(batch_size=2, n_rollouts=2, max_turns=6, max_new_tokens=24)
    config["warm_start"].update(epochs=2, batch_size=2, held_out=0.0, checkpoint_every=50)
    config["recipe"] = {"stages": ["warm_start", "refine", "rl", "evaluate"], "refine": {"rollouts": 2},
                        "evaluate": {"passes": 2}}
    if server is not None:
        endpoint = {"base_url": server.base_url, "api_key_env": None, "timeout_s": 60, "max_retries": 1}
        config["synthesis"] = {
            "proposer": {"name": "trajectory-proposer",
                         "options": {**endpoint, "model": "proposer", "rollouts": "(set by the recipe)",
                                     "tasks": ["(set by the recipe)"], "failed_at_most": 0.5,
                                     "solved_at_least": 0.9}},
            "validator": {"name": "rule-validator"},
            "judger": {"name": "llm-judger", "options": {**endpoint, "model": "judger"}},
            "checker": {"name": "llm-checker", "options": {**endpoint, "model": "checker", "max_steps": 4}},
            "fixer": {"name": "llm-fixer", "options": {**endpoint, "model": "fixer"}},
            "pipeline": {"name": "verigen", "options": {"candidates": 2, "workers": 1, "environments": 1}},
        }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(config))
    return path



def recipe_root(tmp_path: Path) -> Path:
    roots = [p for p in (tmp_path / "runs").iterdir() if (p / "pipeline.json").exists()]
    assert len(roots) == 1, roots
    return roots[0]


@pytest.mark.desktop
@pytest.mark.slow
def test_recipe_runs_every_stage_and_resumes_after_sigkill_without_redoing_a_stage(tmp_path) -> None:
    with ScriptedLLM(rules()) as server:
        config = recipe_config(tmp_path, server)
        env = hold_plugin(tmp_path / "plugin", hook="episode_end", iteration=1)
        child = subprocess.Popen([sys.executable, "-m", "core.pipeline", "--config", str(config)], cwd=ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:  # held inside RL iteration 1, after warm start and refinement completed
            wait_for((tmp_path / "plugin" / "held").exists, "RL iteration 1", child=child, timeout_s=1500)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(30)
        finally:
            if child.poll() is None:
                child.kill()
        root = recipe_root(tmp_path)
        state = json.loads((root / "pipeline.json").read_text())["stages"]
        assert state["warm_start"]["status"] == state["refine"]["status"] == "completed"
        assert state["rl"]["status"] == "running"
        done = {stage: (root / stage / name).stat().st_mtime_ns
                for stage, name in (("warm_start", "summary.json"), ("refine", "pass_rates.json"))}

        resumed = run_cli("core.pipeline", "--config", str(config), "--resume", str(root))
        assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert {stage: (root / stage / name).stat().st_mtime_ns
            for stage, name in (("warm_start", "summary.json"), ("refine", "pass_rates.json"))} == done
    assert resumed.stderr.count("stage already completed; skipped") == 2
    state = json.loads((root / "pipeline.json").read_text())["stages"]
    assert all(state[s]["status"] == "completed" for s in ("warm_start", "refine", "rl", "evaluate"))

    # each stage's outputs are the next stage's inputs, by path
    rl_config = yaml.safe_load((root / "rl" / "config.yaml").read_text())
    assert rl_config["run"]["init_from"] == state["warm_start"]["outputs"]["checkpoint"]
    assert rl_config["tasks"]["pass_rates"] == state["refine"]["outputs"]["pass_rates"]
    refine = state["refine"]["outputs"]
    assert refine["synthesized"] >= 1 and rl_config["tasks"]["paths"][-1] == refine["tasks_dir"]
    assert len(list(Path(refine["demonstrations"]).glob("*.jsonl"))) == refine["synthesized"]  # dry runs
    records = MetricsLog(root / "rl").read()
    assert [r["iteration"] for r in records] == [0, 1, 2]
    assert "eval/success" not in records[1] and records[2]["eval/episodes"] == len(TASKS)  # run.eval_every=3
    assert [p.name for p in list_complete(root / "rl")][-1] == "iter_000003"

    table = (root / "evaluate" / "before_after.md").read_text()
    assert "| Overall |" in table and "warm start" in table and "after RL" in table
    summary = json.loads((root / "report" / "summary.json").read_text())
    assert summary["warm_start_success"]["passes"] == 2 and summary["post_rl_success"] is not None
    assert len(summary["rl"]["informative_share_per_iteration"]) == 3
    assert list(summary["rl"]["eval_success"]) == ["2"]
    assert set(summary["stage_seconds"]) == {"warm_start", "refine", "rl", "evaluate"}
    assert (root / "report" / "curves.png").stat().st_size > 5000
    # the evaluate stage kept its screenshots, downscaled; its page shows each task before and after side by side,
    # and the report links it
    page = root / "evaluate" / "report" / "pool.html"
    assert summary["episodes"] == {"pool": str(page)}
    text = page.read_text()
    assert all(f"<h2>{label}: " in text for label in ("before", "after"))
    shots = list((root / "evaluate" / "after" / "rollouts" / "shots").glob("*.png"))
    assert shots and f'src="../after/rollouts/shots/{shots[0].name}"' in text
    assert all(max(Image.open(shot).size) <= 640 for shot in shots)
    assert 'href="../evaluate/report/pool.html"' in (root / "report" / "index.html").read_text()
    assert "evaluate/report/pool.html" not in table and "report/pool.html" in table

    # the main job's trajectories export to a dataset that datasets and TRL read without our code
    import datasets
    from trl.data_utils import is_conversational

    out = tmp_path / "dataset"
    exported = run_cli("core.export", str(root / "evaluate" / "after"),
                       str(root / "warm_start" / "demonstrations" / "oracle.jsonl"), "--out", str(out))
    assert exported.returncode == 0, exported.stderr[-3000:]
    ds = datasets.load_dataset("parquet", data_dir=str(out), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert len(ds) == json.loads(exported.stdout)["rows"] >= len(TASKS)
    assert all(is_conversational(row) and len(row["images"]) >= 1 for row in ds)


def test_a_stage_whose_input_is_missing_names_the_stage_that_should_have_produced_it(tmp_path) -> None:
    config = recipe_config(tmp_path, None)
    root = tmp_path / "runs" / "quickstart-x"
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(config.read_text())
    gone = str(tmp_path / "deleted" / "iter_000004")
    (root / "pipeline.json").write_text(json.dumps({"stages": {
        "warm_start": {"status": "completed", "outputs": {"checkpoint": gone}},
        "refine": {"status": "completed", "outputs": {"pass_rates": str(config), "tasks_dir": None,
                                                      "rollouts": str(config), "eval": str(config)}}}}))
    proc = run_cli("core.pipeline", "--config", str(config), "--resume", str(root))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "stage 'rl' needs checkpoint from stage 'warm_start'" in proc.stderr
    assert f"recorded '{gone}' but it no longer exists" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.desktop
@pytest.mark.slow
@pytest.mark.parametrize("stage, hook, at", [("warm_start", "checkpoint_write", 2),
                                             ("refine", "call:core.commands.eval.write_rollouts", 1),
                                             ("evaluate", "call:core.commands.eval.write_rollouts", 2)],
                         ids=["inside the warm start's checkpoint write", "inside the refine stage",
                              "inside the evaluate stage"])
def test_a_recipe_killed_inside_a_stage_redoes_only_what_was_lost(tmp_path, stage, hook, at) -> None:
    """SIGKILL inside the warm start's last checkpoint write (its files written, the marker not), inside the
    refine stage (its rollouts written, its pass rates not) or inside the evaluate stage (the "after" rollouts
    written, its results not); the resume continues the warm start from its complete checkpoint / redoes the
    refinement / redoes the evaluation, and every step, iteration and record is there exactly once."""
    config = recipe_config(tmp_path, None)
    env = hold_plugin(tmp_path / "plugin", hook=hook, iteration=at)
    kill_when_held(["core.pipeline", "--config", str(config)], env, f"{hook} {at} in {stage}", timeout_s=1500)
    root = recipe_root(tmp_path)
    assert json.loads((root / "pipeline.json").read_text())["stages"][stage]["status"] == "running"

    resumed = run_cli("core.pipeline", "--config", str(config), "--resume", str(root))
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    state = json.loads((root / "pipeline.json").read_text())["stages"]
    assert all(state[s]["status"] == "completed" for s in ("warm_start", "refine", "rl", "evaluate"))
    steps = json.loads((root / "warm_start" / "summary.json").read_text())["steps"]
    assert [r["iteration"] for r in MetricsLog(root / "warm_start").read()] == list(range(steps))
    assert [p.name for p in (root / "warm_start" / "checkpoints").iterdir() if p.name.startswith(".tmp")] == []
    assert [r["iteration"] for r in MetricsLog(root / "rl").read()] == [0, 1, 2]
    results = json.loads((root / "evaluate" / "before_after.json").read_text())
    assert results["before"]["passes"] == results["after"]["passes"] == 2
    after = (root / "evaluate" / "after" / "rollouts" / "eval_000000.jsonl").read_text().splitlines()
    assert len(after) == 2 * len(TASKS)  # one evaluation's episodes, not two attempts'
    refined = (root / "refine" / "rollouts" / "eval_000000.jsonl").read_text().splitlines()
    assert len(refined) == 2 * len(TASKS)  # one refinement's episodes (refine.rollouts: 2 per task)
    assert set(json.loads((root / "refine" / "pass_rates.json").read_text())) == set(TASKS)
