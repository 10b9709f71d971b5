"""``bench/async_pipeline.py``'s runs load: every override it gives ``core.run`` (the run's seed, each mode's
loop settings, the desktops' iteration settings) is valid for the config it runs, simulated desktops and the
quickstart's real ones alike (the ``--desktops`` run once died at start: it seeded real desktops, which take no
seed); its learning-parity part runs both modes' recipes on equal work."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.config import load_config

from tests.bench_modules import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("async_pipeline.py")


@pytest.mark.parametrize("which", ["SIMULATED", "QUICKSTART"])
def test_every_mode_of_the_bench_loads_against_its_config(bench, which: str) -> None:
    config = getattr(bench, which)
    desktops = ["run.iterations=3", "run.checkpoint_every=3", "run.eval_every=0"]
    for mode in bench.MODES:
        overrides = [*desktops, *bench.seed_overrides(config, 1), *bench.MODES[mode]]
        loaded, _ = load_config(config, overrides)
        assert loaded.config.run.seed == 1 and loaded.config.run.iterations == 3
    simulated, _ = load_config(bench.SIMULATED, bench.seed_overrides(bench.SIMULATED, 7))
    assert simulated.options["environment"].seed == 7  # the simulated desktops' latencies follow the seed


@pytest.mark.slow
@pytest.mark.desktop
def test_learning_parity_runs_both_modes_on_the_same_tasks_and_equal_work(bench) -> None:
    """``--quick --learning-parity``: the recipe twice on real desktops, RL in sync then in async k=1, evaluated
    on the same tasks and passes, both training the same number of groups."""
    proc = subprocess.run([sys.executable, str(bench.ROOT / "bench" / "async_pipeline.py"), "--quick",
                           "--learning-parity"], cwd=bench.ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["machine"] and report["settings"]["quick"] is True
    (row,) = report["learning_parity"]["per_seed"]
    sync, async_k1 = row["sync"], row["async_k1"]
    for key in ("warm_start", "after_rl"):
        assert (sync[key]["tasks"], sync[key]["passes"]) == (async_k1[key]["tasks"], async_k1[key]["passes"]) == (2, 1)
    assert sync["trained_groups"] == async_k1["trained_groups"] == 2  # the smoke settings: 1 iteration, batch_size 2
    assert row["async_minus_sync"] == round(async_k1["after_rl"]["success"] - sync["after_rl"]["success"], 4)
    assert sync["rl_work"]["trained_tokens"] > 0 and async_k1["rl_work"]["loop_seconds"] > 0
    assert row["async_vs_sync_per_hour"]["groups"] > 0 and row["async_vs_sync_per_hour"]["tokens"] > 0


def test_per_hour_ratios_divide_work_by_rl_loop_time(bench) -> None:
    sync = {"trained_groups": 10, "rl_work": {"trained_tokens": 1000, "loop_seconds": 100.0}}
    async_k1 = {"trained_groups": 10, "rl_work": {"trained_tokens": 900, "loop_seconds": 80.0}}
    assert bench.per_hour_ratios(sync, async_k1) == {"groups": 1.25, "tokens": 1.125}
    idle = {"trained_groups": 0, "rl_work": {"trained_tokens": 0, "loop_seconds": 0.0}}
    assert bench.per_hour_ratios(idle, async_k1) == {"groups": None, "tokens": None}


def test_the_simulated_learner_parity_compares_the_schedules_at_equal_trained_groups(bench) -> None:
    """``--learning-parity``'s simulated part (``--quick``: 800 tasks, 60 iterations, 2 seeds): one row per
    learner setting and sampler, each mode's mean final pass rate, the per-seed differences it averages."""
    report = bench.simulated_learner_parity(quick=True)
    assert set(report["learners"]) == {f"base/{name}" for name in bench.SIMULATED_LEARNER_SAMPLERS}
    for row in report["learners"].values():
        assert row["trained_groups"] == 60 * 32
        diffs = row["async_minus_sync"]["per_seed"]
        assert len(diffs) == 2 and row["async_minus_sync"]["mean"] == pytest.approx(sum(diffs) / 2, abs=1e-4)
        assert 0.0 < row["sync"] < 1.0 and 0.0 < row["async_k1"] < 1.0
    worst = max(abs(r["async_minus_sync"]["mean"]) for r in report["learners"].values())
    assert report["target"]["worst_mean"] == worst and report["target"]["met"] == (worst <= bench.TARGET_PARITY_POINTS)
