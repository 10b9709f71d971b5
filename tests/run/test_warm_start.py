"""Demonstrations and the warm start (stage 1), with real parts: bundled oracles recorded on real desktops
(Xvfb + xterm through the probe, judged in the sandbox), the tiny Qwen3-VL with its real BPE tokenizer,
the sliding-window segmenter and the torch trainer's cross-entropy objective."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image
from safetensors.torch import load_file

from core.runtime.checkpoint import list_complete
from core.config import load_config
from core.runtime.demonstrations import demonstration_segments, load_demonstrations
from core.commands.envcheck import oracle_of
from core.runtime.metrics import MetricsLog, write_trajectories

from .hold import hold_plugin, only_run_dir, run_cli, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
TASKS = ["os-count-lines", "os-make-executable"]


def small_config(tmp_path: Path, **extra: object) -> Path:
    """The quickstart with a tiny warm start on two bundled tasks."""
    config = yaml.safe_load(QUICKSTART.read_text())
    config["run"].update(output_dir=str(tmp_path / "runs"), seed=3, keep_checkpoints=10)
    config["tasks"] = {"paths": ["package:environments.tasks/osworld"], "include": TASKS}
    config["model"]["options"]["max_pixels"] = 65536
    config["environment"]["options"].update(max_environments=2, settle_s=0.0)
    config["rollout_loop"] = {"concurrency": 2}
    config["warm_start"] = {"demonstrations": {"oracle": {"repeats": 1}}, "epochs": 3, "batch_size": 1,
                            "held_out": 0.0, "checkpoint_every": 1,
                            "overrides": {"trainer.options.lr": 1e-3, "trainer.options.warmup_steps": 2}}
    config.pop("recipe", None)
    for key, value in extra.items():
        section, _, name = key.partition(".")
        config.setdefault(section, {})[name] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path




@pytest.mark.desktop
def test_a_recorded_oracle_round_trips_through_the_parser_and_the_segmenter(tmp_path) -> None:
    from core.runtime.components import build_components
    from core.commands.record import record_oracles

    resolved, plugins = load_config(small_config(tmp_path))
    c = build_components(resolved, plugins, tmp_path / "run", train=False)

    async def record():
        try:
            return await record_oracles(list(c.tasks.values()), c.deps, concurrency=2)
        finally:
            await c.close()

    result = asyncio.run(record())
    assert not result.failed and len(result.recorded) == len(TASKS)
    out = write_trajectories(tmp_path / "demos" / "oracle.jsonl", result.recorded, screenshots=True)
    demos, report = load_demonstrations([out], tasks=c.tasks, parse=c.backend.parse_response)
    assert report.kept == len(TASKS) and not report.skipped
    renderer = c.model.renderer()
    for demo in demos:
        task = c.tasks[demo.task_id]
        # response text -> the backend's parser -> exactly the oracle's actions, one per turn
        assert [a for turn in demo.turns for a in turn.actions] == oracle_of(task)
        assert all(c.backend.parse_response(turn.response_text) == turn.actions for turn in demo.turns)
        assert demo.initial is not None and all(t.screenshot is not None for t in demo.turns[:-1])
        segments = demonstration_segments(demo, task=task, system_prompt=c.backend.system_prompt(task),
                                          segmenter=c.segmenter, renderer=renderer)
        trained = [renderer.decode([i for i, m in zip(s.input_ids, s.loss_mask) if m]) for s in segments]
        stop = renderer.decode([renderer.stop_ids[0]])
        assert "".join(trained) == "".join(t.response_text + stop for t in demo.turns)
        # the context is the one the agent sees: the system prompt and the task instruction lead the stream
        head = renderer.decode(segments[0].input_ids[:2000])
        assert c.backend.system_prompt(task)[:60] in head and task.instruction in head


def png(color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 200), color).save(buffer, "PNG")
    return buffer.getvalue()


def test_bad_demonstrations_are_one_error_listing_every_problem_and_nothing_trains(tmp_path) -> None:
    demos = tmp_path / "bad"
    (demos / "shots").mkdir(parents=True)
    (demos / "shots" / "a.png").write_bytes(png((10, 10, 10)))
    good_turns = [{"response_text": '<tool_call>\n{"name": "computer_use", "arguments": {"action": "done"}}\n'
                                    "</tool_call>", "actions": [{"type": "done"}]}]
    lines = [
        {"task_id": "os-count-lines", "success": True, "initial_screenshot": "shots/a.png",
         "turns": [{"response_text": "I will just think about it.", "screenshot": "shots/a.png"}] + good_turns},
        {"task_id": "no-such-task", "success": True, "initial_screenshot": "shots/a.png", "turns": good_turns},
        {"task_id": "os-make-executable", "success": True, "initial_screenshot": "shots/missing.png",
         "turns": good_turns},
        {"task_id": "os-count-lines", "success": True, "initial_screenshot": "shots/a.png", "turns": good_turns},
    ]
    (demos / "demos.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = small_config(tmp_path, **{"algorithm.max_seq_len": 100})  # below one screenshot + the system prompt
    raw = yaml.safe_load(config.read_text())
    raw["warm_start"]["demonstrations"] = {"paths": [str(demos / "demos.jsonl")]}
    config.write_text(yaml.safe_dump(raw))

    proc = run_cli("core.sft", "--config", str(config))
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr
    assert "Traceback" not in err and "demonstrations have 4 problems" in err, err[-3000:]
    file = demos / "demos.jsonl"
    assert f"{file}:1: turn 0: the response does not parse into actions" in err
    assert f"{file}:2: unknown task id 'no-such-task'" in err
    assert f"{file}:3: the first observation: screenshot {demos / 'shots' / 'missing.png'} is missing" in err
    assert f"{file}:4: segment 0 has" in err and "more than algorithm.max_seq_len = 100" in err
    run_dir = only_run_dir(tmp_path / "runs")
    assert not (run_dir / "checkpoints").exists() and not (run_dir / "metrics.jsonl").exists()


@pytest.mark.desktop
@pytest.mark.slow
def test_warm_start_sigkilled_mid_training_resumes_to_the_same_weights(tmp_path) -> None:
    """Two warm starts on the same recorded oracles: one uninterrupted, one SIGKILLed right after its
    checkpoint of step 3 (held there by an observer plugin, so the kill lands there by construction) and
    resumed. Both end with identical weights, metrics for every step exactly once, and lower loss."""
    config = small_config(tmp_path)
    first = run_cli("core.sft", "--config", str(config), "run.name=straight")
    assert first.returncode == 0, first.stderr[-3000:]
    straight = only_run_dir(tmp_path / "runs")
    oracle = straight / "demonstrations" / "oracle.jsonl"
    reuse = [f"warm_start.demonstrations.paths={json.dumps([str(oracle)])}", "warm_start.demonstrations.oracle=null"]

    env = hold_plugin(tmp_path / "plugin", hook="checkpoint_saved", iteration=3)
    child = subprocess.Popen([sys.executable, "-m", "core.sft", "--config", str(config), "run.name=killed", *reuse],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        wait_for((tmp_path / "plugin" / "held").exists, "the checkpoint of step 3", child=child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    killed = next(p for p in (tmp_path / "runs").iterdir() if p.name.startswith("killed"))
    assert [p.name for p in list_complete(killed)][-1] == "iter_000003"
    resumed = run_cli("core.sft", "--config", str(config), "run.name=killed", *reuse, "--resume", str(killed))
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    steps = len(TASKS) * 3
    for run in (straight, killed):
        records = MetricsLog(run).read()
        assert [r["iteration"] for r in records] == list(range(steps))
        assert records[-1]["train/loss/nll"] < records[0]["train/loss/nll"]
    a = load_file(str(list_complete(straight)[-1] / "trainer" / "model.safetensors"))
    b = load_file(str(list_complete(killed)[-1] / "trainer" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["steps"] == steps and summary["demonstrations"]["kept"] == len(TASKS)
