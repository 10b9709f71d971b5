"""The training run end to end, with every part real: real desktops (Xvfb + xterm tasks) driven through
the probe, the tiny Qwen3-VL built from a config generating in-process, the sandboxed judges, Frontier
Sampling, sliding-window segments and the torch trainer. Sizes are cut down so each run takes about a
minute on 2 cores; the full quickstart is the README's first command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.runtime.checkpoint import list_complete
from core.runtime.metrics import MetricsLog

from .hold import hold_plugin, only_run_dir, wait_for

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
FAST_TASKS = "[os-count-lines,os-make-executable,os-sort-unique,os-rename-extension]"


def small(run_dir_root: Path, **extra: object) -> list[str]:
    overrides = {
        "run.output_dir": str(run_dir_root),
        "run.iterations": 3,
        "run.checkpoint_every": 1,
        "tasks.include": FAST_TASKS,
        "algorithm.batch_size": 2,
        "algorithm.n_rollouts": 2,
        "algorithm.max_turns": 2,
        "algorithm.max_new_tokens": 16,
        "model.options.max_pixels": 65536,
        "environment.options.settle_s": 0.0,
    }
    overrides.update(extra)
    return [f"{k}={v}" for k, v in overrides.items()]


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)



def tagged_processes(run_dir: Path) -> list[str]:
    """Processes whose command line or environment points into the run directory (desktops, probes, apps)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            continue
        # confined desktops (as root) keep their homes in /tmp/scalecua-desktops-<run name>-*, not in the run
        ours = str(run_dir) in env or f"scalecua-desktops-{run_dir.name}-" in env
        if state != "Z" and (str(run_dir) in cmd or "SCALECUA_ENV_ID=desk-" in env and ours):
            out.append(f"{pid}: {cmd[:120]}")
    return out


def test_run_completes_with_metrics_checkpoints_and_report(tmp_path):
    proc = run_cli("core.run", "--config", str(QUICKSTART), *small(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    records = MetricsLog(run_dir).read()
    assert [r["iteration"] for r in records] == [0, 1, 2]
    for r in records:
        assert r["rollout/episodes"] == 4 and r["segments/count"] >= 4
        assert r["tokens/trainable"] > 0 and "train/loss/pg" in r and "time/rollout" in r
    assert [p.name for p in list_complete(run_dir)] == ["iter_000002", "iter_000003"]  # keep_checkpoints 2
    rollouts = (run_dir / "rollouts" / "iter_000002.jsonl").read_text().splitlines()
    assert len(rollouts) == 4 and json.loads(rollouts[0])["turns"]
    # every turn names the policy that sampled it: iteration i's rollouts use the weights after i updates
    assert {t["weight_version"] for r in map(json.loads, rollouts) for t in r["turns"]} == {2}
    manifest = json.loads((run_dir / "plugins.json").read_text())
    assert manifest["selected"]["sampler"]["name"] == "frontier"
    assert (run_dir / "report" / "curves.png").stat().st_size > 5000  # written when the run ended
    report = run_cli("core.report", str(run_dir))
    assert report.returncode == 0, report.stderr
    assert not tagged_processes(run_dir)

    # evaluate the last checkpoint: per-domain table with pass@k, and JSON
    out = tmp_path / "eval.json"
    evaluation = run_cli("core.eval", "--config", str(QUICKSTART), "--checkpoint",
                         str(run_dir / "checkpoints" / "iter_000003"), "--passes", "2", "--out", str(out),
                         *small(tmp_path / "eval-runs", **{"tasks.include": "[os-count-lines,os-sort-unique]"}))
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    assert "Overall" in evaluation.stdout and "pass@2" in evaluation.stdout
    result = json.loads(out.read_text())
    overall = result["domains"]["Overall"]
    assert result["passes"] == 2 and overall["tasks"] == 2
    assert overall["pass_at"]["4"] is None and 0.0 <= overall["success"] <= 100.0


def test_sigkill_mid_iteration_then_resume_loses_and_duplicates_nothing(tmp_path):
    """The kill lands inside iteration 2 by construction: an observer plugin holds the run right after the
    first episode of iteration 2 has been judged (iterations 0 and 1 are complete and checkpointed), and
    the test kills the run only once the plugin says it holds."""
    runs = tmp_path / "runs"
    env = hold_plugin(tmp_path / "plugin", hook="episode_end", iteration=2)
    args = ["core.run", "--config", str(QUICKSTART), *small(runs, **{"run.iterations": 4})]
    child = subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    marker = Path(env["SCALECUA_TEST_HOLD_MARKER"])
    try:
        wait_for(marker.exists, "the first episode of iteration 2", child=child)
        run_dir = only_run_dir(runs)
        assert marker.read_text().startswith("it000002-")
        assert [p.name for p in list_complete(run_dir)] == ["iter_000001", "iter_000002"]
        assert not (run_dir / "rollouts" / "iter_000002.jsonl").exists()
        assert tagged_processes(run_dir), "the held run should still own its desktops"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    # the desktops' watchdogs notice that their parent is gone
    wait_for(lambda: not tagged_processes(run_dir), "the desktops of the SIGKILLed run to exit", timeout_s=120)
    assert [p.name for p in list_complete(run_dir)] == ["iter_000001", "iter_000002"]

    resumed = run_cli("core.run", "--config", str(QUICKSTART), *small(runs, **{"run.iterations": 4}),
                      "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [r["iteration"] for r in MetricsLog(run_dir).read()] == [0, 1, 2, 3]
    resumed_turns = [t for line in (run_dir / "rollouts" / "iter_000002.jsonl").read_text().splitlines()
                     for t in json.loads(line)["turns"]]
    assert {t["weight_version"] for t in resumed_turns} == {2}  # the resumed engine got the checkpoint's version
    assert not tagged_processes(run_dir)


def test_sigkill_before_the_first_checkpoint_then_resume_starts_over_with_a_clean_log(tmp_path):
    """Killed inside iteration 2 with no checkpoint yet (checkpoint_every 10): the resume has nothing to
    continue, so it starts over, and what the killed attempt wrote (iterations 0 and 1 in metrics.jsonl, their
    rollout files) is discarded instead of being counted twice."""
    runs = tmp_path / "runs"
    overrides = {"run.iterations": 3, "run.checkpoint_every": 10}
    env = hold_plugin(tmp_path / "plugin", hook="episode_end", iteration=2)
    child = subprocess.Popen([sys.executable, "-m", "core.run", "--config", str(QUICKSTART), *small(runs, **overrides)],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                             env=env)
    marker = Path(env["SCALECUA_TEST_HOLD_MARKER"])
    try:
        wait_for(marker.exists, "the first episode of iteration 2", child=child)
        run_dir = only_run_dir(runs)
        assert not list_complete(run_dir)
        assert [r["iteration"] for r in MetricsLog(run_dir).read()] == [0, 1]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    wait_for(lambda: not tagged_processes(run_dir), "the desktops of the SIGKILLed run to exit", timeout_s=120)
    stale = {p.name: p.stat().st_mtime_ns for p in (run_dir / "rollouts").glob("iter_*.jsonl")}
    assert set(stale) == {"iter_000000.jsonl", "iter_000001.jsonl"}

    resumed = run_cli("core.run", "--config", str(QUICKSTART), *small(runs, **overrides), "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "starts over" in resumed.stderr
    assert [r["iteration"] for r in MetricsLog(run_dir).read()] == [0, 1, 2]
    # the rollout files are the new attempt's, none left from the killed one
    assert all((run_dir / "rollouts" / name).stat().st_mtime_ns > mtime for name, mtime in stale.items())
    weights = [json.loads(line)["iteration"] for line in (run_dir / "sampler_weights.jsonl").read_text().splitlines()]
    assert weights == sorted(set(weights))


def test_sigint_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    args = ["core.run", "--config", str(QUICKSTART), *small(tmp_path, **{"run.iterations": 50,
                                                                         "run.checkpoint_every": 25})]
    child = subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 400
    run_dir = None
    while time.monotonic() < deadline:
        dirs = [p for p in tmp_path.iterdir() if (p / "config.yaml").exists()] if tmp_path.exists() else []
        if dirs and len(MetricsLog(dirs[0]).read()) >= 1:
            run_dir = dirs[0]
            break
        assert child.poll() is None
        time.sleep(0.5)
    assert run_dir is not None, "no iteration completed"
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=180)
    assert child.returncode == 130, err[-2000:]
    completed = len(MetricsLog(run_dir).read())
    assert [p.name for p in list_complete(run_dir)] == [f"iter_{completed:06d}"]
    assert "Traceback" not in err
    assert not tagged_processes(run_dir)


def test_environment_dying_mid_episode_is_replaced_and_never_scored(tmp_path, plugins):
    """A desktop whose X server and probe are SIGKILLed mid-episode: the episode is retried on a fresh
    desktop, the dead one is discarded, and no process of either outlives the pool. The backend below is
    the real local-desktop backend; the test only decides *when* to kill (after the first turn)."""
    import asyncio

    from core import hookimpl
    from core.config import load_config
    from core.runtime.components import build_components
    from core.runtime.rollouts import collect_groups
    from environments import display
    from environments.local_desktop import LocalDesktopBackend

    killed: list[str] = []
    discarded: list[str] = []

    class KillOnceBackend(LocalDesktopBackend):
        async def acquire(self):
            env = await super().acquire()
            original_step, original_observe = env.step, env.observe

            calls = []

            async def kill_first_time():
                calls.append(1)
                if not killed and len(calls) >= 2:  # the first observe() is reset's own
                    killed.append(env.env_id)
                    await asyncio.to_thread(display.sweep, env.env_id)  # Xvfb, bus, WM, probe, apps

            async def step(action):
                await kill_first_time()
                return await original_step(action)

            async def observe():  # the random policy's unparsable turns observe instead of stepping
                await kill_first_time()
                return await original_observe()

            env.step, env.observe = step, observe
            return env

        async def release(self, env, *, discard=False):
            if discard:
                discarded.append(env.env_id)
            await super().release(env, discard=discard)

    class Plugin:
        @hookimpl
        def scalecua_register_environments(self, registry):
            registry.register("kill-once-desktop", KillOnceBackend,
                              options="environments.local_desktop:LocalDesktopOptions")

    plugins.register(Plugin(), name="kill-once")
    try:
        overrides = small(tmp_path, **{"environment.name": "kill-once-desktop", "algorithm.max_turns": 3})
        resolved, _ = load_config(QUICKSTART, overrides, plugins=plugins)
        c = build_components(resolved, plugins, tmp_path)

        async def go():
            try:
                return await collect_groups(["os-count-lines"], c.tasks, c.deps, n=2, concurrency=2, retries=2,
                                            iteration=0, seed=0)
            finally:
                await c.close()

        groups, stats = asyncio.run(go())
    finally:
        plugins.unregister("kill-once")
    assert killed and discarded == killed
    assert stats.env_errors == 1 and stats.lost_rollouts == 0
    assert [t.status.value for t in groups[0].trajectories] != ["env_error"] * 2
    assert all(t.status.value != "env_error" and t.judgement is not None for t in groups[0].trajectories)
    assert not display.tagged_processes(killed[0])


def test_ablation_matrix_2x2_runs_and_prints_its_table(tmp_path):
    spec = tmp_path / "ablation.yaml"
    overrides = small(tmp_path / "runs", **{"run.iterations": 1, "algorithm.batch_size": 1})
    spec.write_text(
        f"base: {QUICKSTART}\n"
        f"overrides: {json.dumps(overrides)}\n"
        "matrix:\n  sampler: [frontier, uniform]\n  segmenter: [sliding-window, step-wise]\n"
        "metrics: [reward/mean, segments/per_episode, time/iteration]\nlast: 1\n"
    )
    proc = run_cli("core.ablate", str(spec), "algorithm.max_turns=1", timeout=900)  # for every cell
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout
    for cell in ("sampler=frontier,segmenter=sliding-window", "sampler=frontier,segmenter=step-wise",
                 "sampler=uniform,segmenter=sliding-window", "sampler=uniform,segmenter=step-wise"):
        assert cell in table
    result = json.loads((tmp_path / "runs" / "ablation" / "ablation.json").read_text())
    assert [r["status"] for r in result["rows"]] == ["ok"] * 4
    assert all(r["summary"]["iterations"] == 1 for r in result["rows"])
    for row in result["rows"]:  # the command-line override reached every cell; its curve is against rollouts
        assert yaml.safe_load((Path(row["run_dir"]) / "config.yaml").read_text())["algorithm"]["max_turns"] == 1
        assert row["curves"]["reward/mean"][0][0] == 2.0  # one task x small()'s 2 rollouts
    assert (tmp_path / "runs" / "ablation" / "ablation.png").stat().st_size > 0
