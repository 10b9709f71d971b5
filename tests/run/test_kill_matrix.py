"""Resume is exact at any kill point: an RL run SIGKILLed at each point of the matrix (kill point x rollout mode)
and resumed must end with every iteration's metrics, rollout record and sampler snapshot exactly once, its
checkpoints complete and no half-written one left.

Real parts: the simulated-desktop config (the tiny Qwen3-VL's tokenizer, segments and torch trainer; episodes
from a seeded policy simulation, so a cell costs seconds), a third-party observer plugin (``hold.py``) that holds
the run at the point, so the kill lands there by construction, and ``kill -9``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.runtime.checkpoint import COMPLETE_MARKER
from core.runtime.metrics import MetricsLog

from .hold import hold_plugin, kill_when_held, only_run_dir, run_cli

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "simulated-async.yaml"
ITERATIONS = 5
#: kill point -> (hold hook, at which iteration); checkpoints every 2 iterations (iter_000002, iter_000004, ...)
POINTS = {
    "before the first checkpoint": ("episode_end", 1),
    "between checkpoints": ("episode_end", 3),
    "right after a checkpoint": ("checkpoint_saved", 2),
    "during a checkpoint write": ("checkpoint_write", 4),
}


def args(runs: Path, mode: str) -> list[str]:
    return ["--config", str(CONFIG), f"run.output_dir={runs}", "run.name=killed", f"run.iterations={ITERATIONS}",
            "run.checkpoint_every=2", "run.keep_checkpoints=10", f"rollout_loop.mode={mode}",
            "rollout_loop.max_staleness=1", "algorithm.batch_size=2", "algorithm.n_rollouts=2",
            "algorithm.max_turns=3", "rollout.options.done_probability=0.5",
            "environment.options.step_latency_s=[0.0,0.01]", "environment.options.reset_latency_s=[0.0,0.01]"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("point", list(POINTS))
def test_a_run_killed_at_any_point_resumes_without_losing_or_repeating_an_iteration(tmp_path, point, mode) -> None:
    runs = tmp_path / "runs"
    hook, at = POINTS[point]
    env = hold_plugin(tmp_path / "plugin", hook=hook, iteration=at)
    kill_when_held(["core.run", *args(runs, mode)], env, f"{point} ({hook} {at})")
    run_dir = only_run_dir(runs)
    if hook == "checkpoint_write":  # killed inside the write: a temporary directory without its marker
        torn = list((run_dir / "checkpoints").glob(f".tmp-iter_{at:06d}-*"))
        assert torn and not (torn[0] / COMPLETE_MARKER).exists()

    resumed = run_cli("core.run", *args(runs, mode), "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [r["iteration"] for r in MetricsLog(run_dir).read()] == list(range(ITERATIONS))
    rollouts = sorted(p.name for p in (run_dir / "rollouts").glob("iter_*.jsonl"))
    assert rollouts == [f"iter_{i:06d}.jsonl" for i in range(ITERATIONS)]
    for name in rollouts:  # each file written once, by one attempt: one batch of groups
        records = [json.loads(line) for line in (run_dir / "rollouts" / name).read_text().splitlines()]
        assert len({r["group_id"] for r in records}) == 2, (name, [r["trajectory_id"] for r in records])
    snapshots = [json.loads(line)["iteration"] for line in
                 (run_dir / "sampler_weights.jsonl").read_text().splitlines()]
    assert snapshots == sorted(set(snapshots))
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints == ["iter_000002", "iter_000004", "iter_000005"], checkpoints  # no .tmp- left behind
    assert all((run_dir / "checkpoints" / c / COMPLETE_MARKER).is_file() for c in checkpoints)
