"""The asynchronous rollout pipeline (``rollout_loop.mode: async``).

The end-to-end runs use ``configs/simulated-async.yaml``: the ``simulated`` desktops and the ``simulated``
policy are SIMULATIONS (no X server, no model generating; a seeded done/wait coin per turn) with the real
tiny Qwen3-VL tokenizer, segmenter, Frontier/DAPO samplers, torch trainer and checkpoints, so what is
checked is the pipeline's bookkeeping, not learning.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.runtime.async_rollouts import AsyncRollouts, FinishedGroup
from core.runtime.checkpoint import list_complete
from core.runtime.metrics import MetricsLog
from core.types import RolloutGroup, Trajectory, Turn
from core.interfaces import JudgeServices

from .hold import hold_plugin, kill_when_held, only_run_dir, run_cli

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "simulated-async.yaml"


# -- the scheduler alone, under random completion orders ------------------------------------------------


def _scheduled(seed: int, k: int, batch: int, steps: int, reject_every: int, wait: bool = True,
               end: int | None = None) -> dict:
    rng = random.Random(seed)
    state = {"version": 0}
    selected: list[int] = []
    delivered: list[tuple[int, int]] = []

    def select(batch_index: int, size: int) -> list[str]:
        selected.append(batch_index)
        return [f"task-{rng.randrange(5)}" for _ in range(size)]

    async def run_group(task_id: str, b: int, index: int, admitted: int) -> FinishedGroup:
        trajectories = []
        for r in range(2):
            traj = Trajectory(trajectory_id=f"{b}-{index}-{r}", task_id=task_id, group_id=f"{b}-{index}")
            for t in range(rng.randint(1, 6)):  # a turn samples with whatever version is current
                for _ in range(rng.randint(0, 8)):
                    await asyncio.sleep(0)
                traj.turns.append(Turn(t, "x", [1], [0.0], weight_version=state["version"]))
            trajectories.append(traj)
        delivered.append((b, index))
        lost = rng.random() < 0.05
        return FinishedGroup(task_id, b, admitted, None if lost else RolloutGroup(task_id, trajectories))

    async def body() -> dict:
        rollouts = AsyncRollouts(select=select, run_group=run_group, batch_size=batch, max_staleness=k,
                                 first_batch=0, version=lambda: state["version"], wait_for_due=wait,
                                 end_batch=end)
        rollouts.start()
        kept, observed, lags, looked_total, dropped, lost = [], [], [], 0, 0, 0
        try:
            for _ in range(steps):
                calls = {"n": 0}

                def accept(group: RolloutGroup) -> bool:
                    calls["n"] += 1
                    return calls["n"] % reject_every != 0

                taken = await rollouts.take(version=state["version"], needed=batch, accept=accept,
                                            most=2 * batch)
                for group, lag in zip(taken.kept, taken.staleness):
                    oldest = min(t.weight_version for tr in group.trajectories for t in tr.turns)
                    assert lag == state["version"] - oldest
                    lags.append(lag)
                kept += [g.trajectories[0].group_id for g in taken.kept]
                observed += [g.trajectories[0].group_id for g in taken.observed]
                looked_total += len(taken.observed) + taken.dropped_stale + taken.lost_groups
                dropped += taken.dropped_stale
                lost += taken.lost_groups
                for _ in range(rng.randint(0, 30)):  # training takes a while; episodes go on
                    await asyncio.sleep(0)
                state["version"] += 1
                rollouts.wake()
        finally:
            await rollouts.close()
        return {"kept": kept, "observed": observed, "lags": lags, "selected": selected, "looked": looked_total,
                "delivered": delivered, "dropped": dropped, "lost": lost}

    async def bounded() -> dict:
        # only asyncio.sleep(0) drives this schedule, so it ends in milliseconds or never: a deadlock fails the
        # example (and hypothesis shrinks it) instead of hanging the suite
        return await asyncio.wait_for(body(), timeout=60)

    return asyncio.run(bounded())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 3), batch=st.integers(1, 4), reject_every=st.integers(2, 6),
       wait=st.booleans())
def test_no_group_trained_twice_and_none_staler_than_k(seed, k, batch, reject_every, wait):
    out = _scheduled(seed, k, batch, steps=6, reject_every=reject_every, wait=wait)
    if wait:  # stale_groups: wait -- no group is ever run for nothing
        assert out["dropped"] == 0
    assert len(out["kept"]) == len(set(out["kept"])), "a group was trained twice"
    assert len(out["observed"]) == len(set(out["observed"])), "a group was observed twice"
    assert set(out["kept"]) <= set(out["observed"]), "a trained group was not observed by the sampler"
    assert all(0 <= lag <= k for lag in out["lags"]), out["lags"]
    assert out["selected"] == list(range(len(out["selected"]))), "batches are selected once each, in order"
    assert out["looked"] <= len(out["delivered"])


@pytest.mark.parametrize("seed, batch, reject_every", [(9, 2, 2), (18, 3, 4), (20, 3, 2)])
def test_a_step_whose_due_groups_are_rejected_takes_the_groups_it_set_aside(seed, batch, reject_every):
    """Schedules that once deadlocked (k=1, ``wait``): a step set a not-due group aside because the due groups
    still running would fill its batch; the filter then rejected some of them, and the step waited for groups
    the producer would never start (it counted the set-aside ones as outstanding). Now the step takes them."""
    out = _scheduled(seed, 1, batch, steps=6, reject_every=reject_every, wait=True)
    assert out["dropped"] == 0 and len(out["kept"]) == len(set(out["kept"]))
    assert all(0 <= lag <= 1 for lag in out["lags"])


# -- end to end, on the simulation -------------------------------------------------------------------


def small(runs: Path, **extra: object) -> list[str]:
    overrides = {
        "run.output_dir": str(runs), "run.iterations": 4, "run.checkpoint_every": 1,
        "algorithm.batch_size": 2, "algorithm.n_rollouts": 2, "algorithm.max_turns": 4,
        "rollout.options.done_probability": 0.5,
        "environment.options.step_latency_s": "[0.0,0.02]", "environment.options.reset_latency_s": "[0.0,0.02]",
    }
    overrides.update(extra)
    return [f"{k}={v}" for k, v in overrides.items()]



def rollout_records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((run_dir / "rollouts").glob("iter_*.jsonl"))
            for line in path.read_text().splitlines()]


@pytest.mark.parametrize("sampler", ["frontier", "dapo"])
def test_async_run_trains_within_the_staleness_bound(tmp_path, sampler):
    runs = tmp_path / "runs"
    done = run_cli("core.run", "--config", str(CONFIG), *small(runs, **{"sampler.name": sampler}))
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = only_run_dir(runs)
    rows = MetricsLog(run_dir).read()
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3]
    for row in rows:
        assert row["async/staleness_max"] <= 1 and row["groups/kept"] <= 2
        assert row["async/staleness_0"] + row["async/staleness_1"] == row["groups/kept"]
        assert row["rollout/episodes_run"] >= row["rollout/episodes"]  # what was run, dropped groups too
        assert 0 <= row["async/trainer_idle_share"] <= 1 and 0 <= row["async/rollout_idle_share"] <= 1
        # stale_groups: wait (the default): nothing dropped; the work behind the step is accounted for
        assert row["async/dropped_stale"] == 0 and row["work/groups_trained"] == row["groups/kept"]
        assert row["rollout/episodes_run"] == 2 * (row["work/groups_trained"] + row["work/groups_untrained"])
        assert row["work/env_seconds"] >= row["work/env_seconds_untrained"] >= 0 and row["work/env_steps"] > 0
    assert "async/groups_left_at_end" in rows[-1] and "work/env_seconds_left_at_end" in rows[-1]
    assert all("async/groups_left_at_end" not in r for r in rows[:-1])
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert "async.png" in summary["files"] and (run_dir / "report" / "async.png").stat().st_size > 0
    assert summary["async"]["dropped_stale"] == sum(r["async/dropped_stale"] for r in rows)
    records = rollout_records(run_dir)
    ids = [r["trajectory_id"] for r in records]
    assert len(ids) == len(set(ids)), "a trajectory was trained twice"
    for path in sorted((run_dir / "rollouts").glob("iter_*.jsonl")):
        iteration = int(path.stem.split("_")[1])
        for line in path.read_text().splitlines():
            versions = [t["weight_version"] for t in json.loads(line)["turns"]]
            assert versions and all(v is not None for v in versions)
            assert versions == sorted(versions), "a later turn cannot sample with an older policy"
            assert 0 <= iteration - min(versions) <= 1


def test_waiting_for_due_groups_drops_nothing_where_dropping_loses_stragglers():
    """The same seeded schedule (episodes of very different lengths) under both rules: drop loses groups to
    staleness, wait loses none and trains every group it delivered, each within the bound."""
    drops = {wait: sum(_scheduled(seed, 1, 2, steps=8, reject_every=10**6, wait=wait)["dropped"] for seed in range(30))
             for wait in (True, False)}
    assert drops[True] == 0 and drops[False] > 0, drops


def test_no_batch_is_started_that_the_run_will_not_train():
    """A run of 5 iterations (end_batch 5) with k = 2: the producer would run ahead to batches 5 and 6, which no
    step trains; it stops at 4. With rejections the last steps may still need groups: those are admitted."""
    clean = 0
    for seed in range(20):
        out = _scheduled(seed, 2, 2, steps=5, reject_every=10**6, end=5)
        assert out["dropped"] == 0 and len(out["kept"]) >= 10
        if not out["lost"]:  # a group lost to environment errors is replaced by one more batch
            clean += 1
            assert out["selected"] == [0, 1, 2, 3, 4], out["selected"]
    assert clean >= 5
    rejecting = _scheduled(3, 2, 2, steps=5, reject_every=2, end=5)
    assert len(rejecting["selected"]) > 5


def test_async_with_max_staleness_0_is_the_sync_run(tmp_path):
    runs = {mode: tmp_path / mode for mode in ("sync", "async0")}
    for mode, root in runs.items():
        extra = {"rollout_loop.mode": "sync"} if mode == "sync" else {"rollout_loop.max_staleness": 0}
        done = run_cli("core.run", "--config", str(CONFIG), *small(root, **extra))
        assert done.returncode == 0, done.stderr[-3000:]

    def comparable(root: Path) -> tuple[list[dict], list[list[str]]]:
        run_dir = only_run_dir(root)
        rows = [{k: v for k, v in r.items() if not k.startswith(("time/", "train/time/", "judge/seconds",
                                                                 "work/env_seconds"))}
                for r in MetricsLog(run_dir).read()]
        turns = [[t["response_text"] for t in r["turns"]] for r in rollout_records(run_dir)]
        return rows, turns

    assert comparable(runs["sync"]) == comparable(runs["async0"])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_ppo_mini_batches_and_epochs_take_that_many_optimizer_steps_per_iteration(tmp_path, mode):
    runs = tmp_path / "runs"
    done = run_cli("core.run", "--config", str(CONFIG), *small(runs, **{
        "rollout_loop.mode": mode, "algorithm.ppo_mini_batches": 2, "algorithm.ppo_epochs": 3}))
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = only_run_dir(runs)
    rows = MetricsLog(run_dir).read()
    assert [r["train/optimizer_steps"] for r in rows] == [6.0] * 4  # 2 groups a batch: one per mini-batch
    assert all(r["train/batch/segments"] == 3 * r["segments/count"] for r in rows)  # every segment once per epoch
    # the version the engine samples with counts iterations, not optimizer steps
    versions = {t["weight_version"] for r in rollout_records(run_dir) for t in r["turns"]}
    assert versions <= {0, 1, 2, 3}
    trainer_state = json.loads((list_complete(run_dir)[-1] / "trainer" / "trainer.json").read_text())
    assert trainer_state["steps"] == 4 * 6


def test_the_kl_stop_ends_an_iterations_steps_once_its_batch_has_moved(tmp_path):
    runs = tmp_path / "runs"
    done = run_cli("core.run", "--config", str(CONFIG), *small(runs, **{
        "rollout_loop.mode": "sync", "algorithm.ppo_epochs": 3, "algorithm.target_kl": 1e-12,
        "trainer.options.lr": 1e-3, "run.iterations": 3}))
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = only_run_dir(runs)
    rows = MetricsLog(run_dir).read()
    moved = [r for r in rows if r.get("train/actor/kl_stopped")]
    assert moved, "some iteration's first step moved the policy"
    for r in rows:  # the first step always runs; the second starts from a moved policy and is skipped
        if r.get("train/actor/kl_stopped"):
            assert r["train/optimizer_steps"] == 1.0 and r["train/actor/approx_kl_max"] > 1e-12
        else:  # nothing to learn from (no informative group): the policy never moved
            assert r["train/optimizer_steps"] == 3.0 and r["train/actor/approx_kl_max"] <= 1e-12
    trainer_state = json.loads((list_complete(run_dir)[-1] / "trainer" / "trainer.json").read_text())
    assert trainer_state["steps"] == sum(int(r["train/optimizer_steps"]) for r in rows)


def test_sigkill_in_async_mode_then_resume_trains_nothing_twice(tmp_path):
    """The kill lands right after checkpoint 2 was written, by construction (the hold plugin blocks there),
    while the producer has groups of the next batches in flight."""
    runs = tmp_path / "runs"
    env = hold_plugin(tmp_path / "plugin", hook="checkpoint_saved", iteration=2)
    kill_when_held(["core.run", "--config", str(CONFIG), *small(runs)], env, "checkpoint 2")
    run_dir = only_run_dir(runs)
    assert [p.name for p in list_complete(run_dir)][-1] == "iter_000002"
    before = {r["trajectory_id"] for r in rollout_records(run_dir)}
    resumed = run_cli("core.run", "--config", str(CONFIG), *small(runs), "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [r["iteration"] for r in MetricsLog(run_dir).read()] == [0, 1, 2, 3]
    records = rollout_records(run_dir)
    ids = [r["trajectory_id"] for r in records]
    assert len(ids) == len(set(ids)) and before <= set(ids)
    later = [r for r in records if r["trajectory_id"] not in before]
    assert later and all(min(t["weight_version"] for t in r["turns"]) >= 2 for r in later), \
        "the resumed run samples with the checkpoint's weights"


def test_segments_carry_the_oldest_version_of_a_partial_rollout(plugins):
    """An episode whose policy is updated between its turns: each turn records the version that sampled it,
    and its segments carry the oldest (what staleness is measured by)."""
    from core.runtime.episode import EpisodeDeps, EpisodeSettings, run_episode
    from core.types import Task
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions
    from plugins.rollout.simulated import SimulatedPolicy, SimulatedPolicyOptions

    model = QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0))
    engine = SimulatedPolicy(SimulatedPolicyOptions(done_probability=1e-9), model=model)
    engine.begin_weight_update(3)
    engine.commit_weight_update()
    backend = plugins.registry("environment").create("simulated", {"success_rate": 1.0})
    deps = EpisodeDeps(backend=backend, engine=engine, renderer=model.renderer(),
                       segmenter=plugins.registry("segmenter").create("sliding-window", {"keep_images": 2,
                                                                                          "min_removal": 1}),
                       judge=JudgeServices.of(plugins),
                       settings=EpisodeSettings(max_turns=6, max_new_tokens=64))

    def bump(traj: Trajectory) -> None:  # after turn 2, the trainer's next version arrives
        if len(traj.turns) == 2:
            engine.begin_weight_update(4)
            engine.commit_weight_update()

    task = Task(id="t", instruction="do it", evaluator={"func": "simulated"})
    traj = asyncio.run(run_episode(task, deps, trajectory_id="r", group_id="g", seed=1, on_turn=bump))
    assert [t.weight_version for t in traj.turns] == [3, 3, 4, 4, 4, 4]
    assert len(traj.segments) > 1 and {s.weight_version for s in traj.segments} == {3}


def test_episode_timeout_ends_the_episode_between_turns(plugins):
    """``rollout_loop.episode_timeout_s`` is read: an episode past it ends as incomplete at the next turn."""
    from core.runtime.episode import EpisodeDeps, EpisodeSettings, run_episode
    from core.runtime.components import settings_from
    from core.config import load_config
    from core.types import EpisodeStatus, Task
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions
    from plugins.rollout.simulated import SimulatedPolicy, SimulatedPolicyOptions

    resolved, _ = load_config(CONFIG, ["rollout_loop.episode_timeout_s=12.5", "rollout_loop.env_call_timeout_s=7"])
    settings = settings_from(resolved)
    assert (settings.episode_timeout_s, settings.env_call_timeout_s) == (12.5, 7.0)
    model = QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0))
    deps = EpisodeDeps(backend=plugins.registry("environment").create("simulated", {}),
                       engine=SimulatedPolicy(SimulatedPolicyOptions(done_probability=1e-9), model=model),
                       renderer=model.renderer(), segmenter=plugins.registry("segmenter").create("sliding-window", {}),
                       judge=JudgeServices.of(plugins),
                       settings=EpisodeSettings(max_turns=6, max_new_tokens=64, episode_timeout_s=1e-9))
    task = Task(id="t", instruction="do it", evaluator={"func": "simulated"})
    traj = asyncio.run(run_episode(task, deps, trajectory_id="r", group_id="g", seed=1))
    assert (traj.status, traj.status_reason, traj.turns) == (EpisodeStatus.INCOMPLETE, "episode timeout", [])


def test_async_run_with_the_openai_compatible_engine_against_a_served_policy(tmp_path):
    """The rollout engine is ``openai-compatible`` talking to a real ``plugins.serving`` server on loopback (an
    in-process hf engine behind vLLM's HTTP protocol: generate API with images, weight transfer) while the
    trainer steps in async mode; desktops are the SIMULATED backend. Every trained turn was sampled by the
    server, each update reached it over HTTP (its weight version follows the trainer's), and staleness stays
    within k = 1."""
    from tests.rollout.serve_fixtures import serving

    runs = tmp_path / "runs"
    with serving() as (server, url):
        config = yaml.safe_load(CONFIG.read_text())
        config["rollout"] = {"name": "openai-compatible", "options": {"base_url": url, "max_retries": 0}}
        (tmp_path / "served.yaml").write_text(yaml.safe_dump(config))
        overrides = [o for o in small(runs, **{"model.options.seed": 3, "algorithm.max_new_tokens": 8,
                                               "run.iterations": 3}) if not o.startswith("rollout.options.")]
        done = run_cli("core.run", "--config", str(tmp_path / "served.yaml"), *overrides)
        assert done.returncode == 0, done.stderr[-3000:]
        updates = server.weights.updates
    run_dir = only_run_dir(runs)
    rows = MetricsLog(run_dir).read()
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert all(r["async/staleness_max"] <= 1 for r in rows)
    records = rollout_records(run_dir)
    assert records and all(t["response_text"] is not None for r in records for t in r["turns"])
    versions = {t["weight_version"] for r in records for t in r["turns"]}
    assert versions <= {0, 1, 2} and max(versions) >= 1  # later turns were sampled after an update over HTTP
    assert updates > 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_rollout_budget_ends_the_run_at_equal_cost_and_evaluates_its_last_iteration(tmp_path, mode):
    """``run.rollout_budget``: DAPO's refills count, the run stops after the iteration that reaches the budget
    (before ``run.iterations``), that iteration is evaluated and checkpointed even off the ``eval_every`` grid."""
    runs = tmp_path / "runs"
    done = run_cli("core.run", "--config", str(CONFIG), *small(runs, **{
        "rollout_loop.mode": mode, "sampler.name": "dapo", "run.iterations": 50, "run.rollout_budget": 10,
        "run.eval_every": 100, "run.checkpoint_every": 100}))
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = only_run_dir(runs)
    rows = MetricsLog(run_dir).read()
    spent = [sum(r["rollout/episodes_run"] for r in rows[: i + 1]) for i in range(len(rows))]
    assert spent[-1] >= 10 and all(s < 10 for s in spent[:-1]), spent  # stopped by the budget, not iterations
    assert len(rows) < 50
    assert "eval/success" in rows[-1] and not any("eval/success" in r for r in rows[:-1])
    assert [p.name for p in list_complete(run_dir)] == [f"iter_{len(rows):06d}"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_decoupled_objective_recomputes_the_proximal_policy_once_per_iteration(tmp_path, mode):
    """``algorithm.old_logprobs: recompute`` with two optimizer steps per iteration and the hf engine (a real
    policy: the tiny Qwen3-VL samples, so rollout logprobs are the model's). Sync: the proximal policy is the one
    that sampled, so the behaviour weight is 1 and its KL 0 up to float error. Async, k = 1: a group sampled
    before the last update has a behaviour KL above that (the weights moved since its tokens were sampled)."""
    runs = tmp_path / "runs"
    config = yaml.safe_load(CONFIG.read_text())
    config["rollout"] = {"name": "hf", "options": {"device": "cpu"}}
    (tmp_path / "hf.yaml").write_text(yaml.safe_dump(config))
    overrides = [o for o in small(runs, **{"rollout_loop.mode": mode, "algorithm.old_logprobs": "recompute",
                                           "algorithm.tis_cap": 2.0, "algorithm.ppo_epochs": 2,
                                           "algorithm.max_new_tokens": 8, "trainer.options.lr": 1e-2,
                                           # the random policy never succeeds (no advantage): weight decay moves
                                           # its weights anyway, so a stale group's sampler is outdated
                                           "trainer.options.weight_decay": 1.0,
                                           "run.iterations": 3}) if not o.startswith("rollout.options.")]
    done = run_cli("core.run", "--config", str(tmp_path / "hf.yaml"), *overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = MetricsLog(only_run_dir(runs)).read()
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    for row in rows:
        assert row["train/optimizer_steps"] == 2.0 and row["train/time/proximal_logprobs"] > 0
        assert 0 <= row["train/actor/behaviour_capfrac"] <= 1
        if mode == "sync" or row["async/staleness_max"] == 0:
            assert row["train/actor/behaviour_kl"] < 1e-4 and row["train/actor/behaviour_weight_mean"] == \
                pytest.approx(1.0, abs=1e-2)
    if mode == "async":
        stale = [r for r in rows if r["async/staleness_1"] > 0]
        assert stale and max(r["train/actor/behaviour_kl"] for r in stale) > 1e-4, rows
