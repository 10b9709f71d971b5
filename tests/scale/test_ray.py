"""Ray orchestration: placement plans, and the quickstart on a local Ray cluster (2 CPUs) matching one process.

The Ray run puts the trainer, the rollout engine and the environment pool
(real Xvfb desktops) in actors; the driver runs the unchanged core loop over
proxies. For the same seed every non-timing metric must equal the
single-process run's (weights reach the rollout actor between iterations, so
iteration 1 also checks the weight path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ConfigError
from plugins.ray.options import RayOptions, plan_placement

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "configs" / "quickstart.yaml"
OVERRIDES = ["run.iterations=2", "run.checkpoint_every=2", "run.name=qs"]
RAY = ["extra.ray.num_cpus=2", "extra.ray.cpus_per_env_worker=0.5", "extra.ray.cpus_per_rollout_worker=0.5",
       "extra.ray.cpus_per_trainer_worker=0.5"]


def test_paper_cluster_split() -> None:
    """8 nodes x 8 GPUs, 25% rollout with TP=2 engines: 8 engines on 16 GPUs, 48 trainer ranks (Tables 9-11)."""
    plan = plan_placement(RayOptions(nodes=8, gpus_per_node=8, rollout_ratio=0.25, rollout_gpus_per_worker=2,
                                     env_workers=20))
    assert (plan.rollout_workers, plan.trainer_workers, plan.env_workers) == (8, 48, 20)
    laptop = plan_placement(RayOptions())
    assert (laptop.rollout_workers, laptop.trainer_workers, laptop.rollout_gpus) == (1, 1, 0)


def test_impossible_splits_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="trainer_gpus_per_worker"):
        plan_placement(RayOptions(nodes=1, gpus_per_node=2, rollout_ratio=0.9, trainer_gpus_per_worker=2))
    with pytest.raises(ConfigError, match="one engine must fit on one node"):
        plan_placement(RayOptions(nodes=2, gpus_per_node=2, rollout_gpus_per_worker=4))
    with pytest.raises(ConfigError, match="rollout_ratio"):
        plan_placement(RayOptions(nodes=1, gpus_per_node=8, trainer_workers=3))
    with pytest.raises(ConfigError, match="extra.ray.rollout_ratio"):
        RayOptions.from_extra({"ray": {"rollout_ratio": 1.5}})


def _run(module: str, out: Path, extra: list[str]) -> list[dict]:
    cmd = [sys.executable, "-m", module, "--config", str(QUICKSTART), *OVERRIDES, f"run.output_dir={out}", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1150, cwd=REPO,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    (metrics,) = out.glob("*/metrics.jsonl")
    return [json.loads(line) for line in metrics.read_text().splitlines()]


#: infrastructure counters: a desktop that fails to start under load is retried with the same episode seed,
#: which changes these counts but not the episode (every learning metric must still match)
RETRY_COUNTERS = ("rollout/env_errors", "rollout/episodes")


def _comparable(record: dict) -> dict:
    return {k: v for k, v in record.items()
            if not k.startswith(("time/", "train/time/")) and "seconds" not in k  # wall clock
            and k not in RETRY_COUNTERS}


@pytest.mark.slow
@pytest.mark.desktop
@pytest.mark.timeout(2400)  # ~5 min on an idle 2-core machine; far more when other jobs share the cores
def test_quickstart_on_ray_matches_the_single_process_run(tmp_path) -> None:
    single = _run("core.run", tmp_path / "single", [])
    ray = _run("plugins.ray.run", tmp_path / "ray", RAY)
    assert [m["iteration"] for m in ray] == [m["iteration"] for m in single] == [0, 1]
    for a, b in zip(single, ray):
        a, b = _comparable(a), _comparable(b)
        assert set(a) == set(b)
        assert a["groups/kept"] > 0 and "train/loss/pg" in a
        # approx_kl is a mean of differences of equal logprobs (~1e-9): float noise between processes
        differ = {key: (a[key], b[key]) for key in a
                  if b[key] != pytest.approx(a[key], rel=1e-6,
                                             abs=1e-6 if key == "train/actor/approx_kl" else 1e-9)}
        assert not differ, f"iteration {a['iteration']}: single-process vs Ray metrics differ: {differ}"
    ray_dirs = list((tmp_path / "ray").glob("*/checkpoints")) or list((tmp_path / "ray").glob("*/ckpt*"))
    assert ray_dirs, "the Ray run checkpointed through its trainer actor"


@pytest.mark.slow
def test_two_fsdp_trainer_workers_on_ray_equal_one_torch_process() -> None:
    """Trainer ranks as Ray actors: rank 0's address seeds the process group; every call runs on both ranks."""
    import ray
    import torch

    from core.config import AlgorithmSection
    from plugins.ray.proxies import RayTrainer
    from plugins.ray.workers import TrainerWorker
    from tests.scale import batch
    from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

    raw = {"model": {"name": "qwen-vl", "options": {"tiny": batch.TINY}},
           "trainer": {"name": "torch-fsdp", "options": {"device": "cpu", "lr": 1e-3, "micro_batch_tokens": 700,
                                                          "adam_eps": batch.ADAM_EPS}},
           "algorithm": {"kl_coef": 0.01}}
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    try:
        actor = ray.remote(num_cpus=1)(TrainerWorker)
        workers = [actor.remote(raw, None, rank, 2) for rank in range(2)]
        address = ray.get(workers[0].address.remote())
        assert ray.get([w.setup.remote(*address) for w in workers]) == [0, 1]
        trainer = RayTrainer(workers)
        model = batch.policy_model()
        segments = batch.segments(model.renderer())
        remote_metrics = trainer.train_step(segments)
        remote_weights = {n: t for bucket in trainer.export_weights(1 << 16) for n, t in bucket}
        trainer.close()
    finally:
        ray.shutdown()
    options = TorchTrainerOptions(device="cpu", lr=1e-3, micro_batch_tokens=700, adam_eps=batch.ADAM_EPS)
    local = TorchTrainer(options, model=model, algorithm=AlgorithmSection(kl_coef=0.01))
    metrics = local.train_step(segments)
    assert remote_metrics["dist/world_size"] == 2.0
    assert remote_metrics["loss/pg"] == pytest.approx(metrics["loss/pg"], rel=1e-4)
    weights = {n: t for bucket in local.export_weights() for n, t in bucket}
    assert set(remote_weights) == set(weights)
    for name, tensor in weights.items():
        torch.testing.assert_close(remote_weights[name], tensor, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.desktop
def test_protocol_answered_by_an_environment_worker(tmp_path) -> None:
    """A driver without the desktop programs asks environment worker 0 for the agent protocol."""
    import ray

    from core.config import load_config
    from plugins.ray.proxies import RemoteProtocol
    from plugins.ray.workers import EnvironmentWorker

    resolved, plugins = load_config(QUICKSTART, ["run.name=protocol"])
    local = resolved.create("environment", plugins, run_dir=tmp_path / "local")
    ray.init(num_cpus=1, include_dashboard=False)
    try:
        worker = ray.remote(num_cpus=0.5)(EnvironmentWorker).remote(resolved.raw, str(QUICKSTART), 0, str(tmp_path))
        protocol = RemoteProtocol(worker)
        raw = {"id": "t-1", "instruction": "Open the terminal", "config": [], "evaluator": {"func": "infeasible"}}
        task = local.convert_task(raw)
        assert protocol.convert_task(raw) == task
        assert protocol.system_prompt(task) == local.system_prompt(task)
        text = '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [10, 20]}}</tool_call>'
        assert protocol.parse_response(text) == local.parse_response(text)
        from core.errors import ActionParseError

        with pytest.raises(ActionParseError, match="no action found"):  # the worker's error, its type kept
            protocol.parse_response("click somewhere")
        ray.get(worker.close.remote())
    finally:
        ray.shutdown()


def test_oversubscribed_clusters_fail_fast() -> None:
    from plugins.ray.run import check_resources

    laptop = RayOptions()  # 3 workers x 1 CPU
    check_resources(laptop, plan_placement(laptop), {"CPU": 4.0})
    with pytest.raises(ConfigError, match="reserve 3 CPUs but the cluster has 2"):
        check_resources(laptop, plan_placement(laptop), {"CPU": 2.0})
    gpus = RayOptions(nodes=1, gpus_per_node=8, rollout_gpus_per_worker=2, cpus_per_trainer_worker=0.1)
    with pytest.raises(ConfigError, match="need 8 GPUs but the cluster has 4"):
        check_resources(gpus, plan_placement(gpus), {"CPU": 64.0, "GPU": 4.0})
    pools = RayOptions(env_workers=3, env_resource="desktops", cpus_per_env_worker=0.1)
    with pytest.raises(ConfigError, match="units of 'desktops'"):
        check_resources(pools, plan_placement(pools), {"CPU": 8.0, "desktops": 2.0})


@pytest.mark.slow
def test_async_mode_on_ray_trains_within_the_staleness_bound(tmp_path) -> None:
    """configs/simulated-async.yaml (SIMULATED desktops and policy, the real tiny model's trainer) with the
    trainer, the rollout engine and the environments in Ray actors: the async producer keeps episodes going
    while the trainer actor steps, and every trained group is at most k = 1 versions old."""
    out = tmp_path / "ray"
    cmd = [sys.executable, "-m", "plugins.ray.run", "--config", str(REPO / "configs" / "simulated-async.yaml"),
           f"run.output_dir={out}", "run.iterations=3", "run.checkpoint_every=1", "algorithm.batch_size=2",
           "algorithm.n_rollouts=2", "algorithm.max_turns=4", "rollout.options.done_probability=0.5",
           "environment.options.step_latency_s=[0.0,0.02]", "environment.options.reset_latency_s=[0.0,0.02]", *RAY]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ray workers ready" in proc.stderr
    (metrics,) = out.glob("*/metrics.jsonl")
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    for row in rows:
        assert row["async/staleness_max"] <= 1 and row["groups/kept"] == 2 and "train/loss/pg" in row
        assert row["async/staleness_0"] + row["async/staleness_1"] == row["groups/kept"]
    assert max(r["async/staleness_max"] for r in rows) == 1  # rollouts ran ahead of the trainer actor
