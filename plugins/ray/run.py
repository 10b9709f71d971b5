"""``python -m plugins.ray.run --config FILE [KEY=VALUE ...] [--resume [RUN_DIR]]``: train on Ray.

The training loop is :mod:`core.runtime.loop`'s, unchanged, on the driver; the trainer,
the rollout engines and the environment pools are Ray actors placed by the
config's ``extra.ray`` section (:class:`plugins.ray.options.RayOptions`). Without
``extra.ray.address`` a local Ray instance starts (a laptop); with
``address: auto`` the same YAML uses the cluster it runs on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import structlog

from core import hookimpl

from core.runtime import logs, rundir
from core.commands.cli import config_parser, main_guard
from core.config import ResolvedConfig, load_config
from core.errors import ScaleCUAError
from plugins.ray.options import Placement, RayOptions, plan_placement

log = structlog.get_logger(__name__)

REQUIRED_SLOTS = ("model", "environment", "sampler", "segmenter", "trainer", "rollout", "judge")


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ScaleCUAError("plugins.ray needs Ray: pip install 'scalecua[ray]'") from None
    return ray


class RayCluster:
    """The run's actors: trainer ranks, rollout engines, environment pools."""

    def __init__(self, resolved: ResolvedConfig, options: RayOptions, placement: Placement, run_dir: Path) -> None:
        from plugins.ray.workers import EnvironmentWorker, RolloutWorker, TrainerWorker

        ray = import_ray()
        self.ray = ray
        self.started_ray = False
        if not ray.is_initialized():
            init: dict[str, Any] = {"address": options.address, "include_dashboard": False,
                                    "log_to_driver": True}
            if options.address is None:
                init.update(num_cpus=options.num_cpus, num_gpus=options.nodes * options.gpus_per_node)
                if options.object_store_memory_mb:
                    init["object_store_memory"] = options.object_store_memory_mb << 20
            ray.init(**{k: v for k, v in init.items() if v is not None})
            self.started_ray = True
        check_resources(options, placement, ray.cluster_resources())
        raw, source = resolved.raw, str(resolved.source) if resolved.source else None
        trainer_cls = ray.remote(num_cpus=options.cpus_per_trainer_worker, num_gpus=placement.trainer_gpus)(TrainerWorker)
        self.trainers = [trainer_cls.remote(raw, source, rank, placement.trainer_workers)
                         for rank in range(placement.trainer_workers)]
        master_addr, master_port = ray.get(self.trainers[0].address.remote())
        ray.get([t.setup.remote(master_addr, master_port) for t in self.trainers])
        rollout_cls = ray.remote(num_cpus=options.cpus_per_rollout_worker, num_gpus=placement.rollout_gpus)(RolloutWorker)
        self.rollouts = [rollout_cls.remote(raw, source, i) for i in range(placement.rollout_workers)]
        # a worker that dies is restarted (an empty pool); its calls in flight fail (environment faults: the
        # episodes are retried) and are never re-run by Ray (max_task_retries 0: steps are not idempotent)
        env_kw: dict[str, Any] = {"num_cpus": options.cpus_per_env_worker,
                                  "max_restarts": options.env_worker_max_restarts, "max_task_retries": 0}
        if options.env_resource:
            env_kw["resources"] = {options.env_resource: 1}
        if options.spread_env_workers:
            env_kw["scheduling_strategy"] = "SPREAD"
        env_cls = ray.remote(**env_kw)(EnvironmentWorker)
        work_dir = str(run_dir) if options.address is None else None  # remote hosts use their own temp dirs
        self.envs = [env_cls.remote(raw, source, i, work_dir) for i in range(placement.env_workers)]
        ray.get([r.__ray_ready__.remote() for r in self.rollouts + self.envs])
        log.info("ray workers ready", **placement.describe(), cluster=ray.cluster_resources())

    def shutdown(self) -> None:
        for actor in self.trainers + self.rollouts + self.envs:
            self.ray.kill(actor)
        if self.started_ray:
            self.ray.shutdown()


def check_resources(options: RayOptions, placement: Placement, cluster: dict[str, float]) -> None:
    """Fail fast when the workers ask for more than the cluster has (Ray would wait forever)."""
    from core.errors import ConfigError

    cpus = (placement.trainer_workers * options.cpus_per_trainer_worker
            + placement.rollout_workers * options.cpus_per_rollout_worker
            + placement.env_workers * options.cpus_per_env_worker)
    gpus = placement.trainer_workers * placement.trainer_gpus + placement.rollout_workers * placement.rollout_gpus
    problems = []
    if cpus > cluster.get("CPU", 0.0) + 1e-9:
        problems.append(f"extra.ray: the workers reserve {cpus:g} CPUs but the cluster has {cluster.get('CPU', 0):g}; "
                        "lower cpus_per_trainer_worker / cpus_per_rollout_worker / cpus_per_env_worker (fractions "
                        "are fine) or env_workers")
    if gpus > cluster.get("GPU", 0.0) + 1e-9:
        problems.append(f"extra.ray: the workers need {gpus} GPUs but the cluster has {cluster.get('GPU', 0):g}; "
                        "check nodes and gpus_per_node")
    if options.env_resource and cluster.get(options.env_resource, 0.0) < placement.env_workers:
        problems.append(f"extra.ray.env_resource: {placement.env_workers} environment workers need "
                        f"{placement.env_workers} units of '{options.env_resource}', the cluster has "
                        f"{cluster.get(options.env_resource, 0):g}; start env hosts with --resources "
                        f"'{{\"{options.env_resource}\": N}}'")
    if problems:
        raise ConfigError(problems)


class RayPlacement:
    """The placement plugin of a Ray run (``core/hookspecs.py``): trainer, rollout engine and environment pool
    are proxies of the cluster's actors; every other component is built here as configured."""

    def __init__(self, cluster: RayCluster, run_dir: Path) -> None:
        self.cluster = cluster
        self.run_dir = run_dir

    @hookimpl
    def scalecua_place_component(self, slot: str, component: Any, options: Any, context: Any) -> Any:
        from plugins.ray.proxies import RayEnvironmentPool, RayRolloutEngine, RayTrainer, RemoteProtocol

        if slot == "trainer":
            return RayTrainer(self.cluster.trainers)
        if slot == "rollout":
            return RayRolloutEngine(self.cluster.rollouts)
        if slot != "environment":
            return None
        capacity = int(getattr(options, "max_environments", 1))
        # a local instance of the same kind for its agent protocol only: it never starts a desktop
        try:
            protocol: Any = component.factory(options, run_dir=self.run_dir / "env-protocol")
        except Exception as exc:  # e.g. a driver host without the desktop programs
            log.warning("environment kind not buildable on the driver; its protocol is asked of worker 0",
                        error=str(exc))
            protocol = RemoteProtocol(self.cluster.envs[0])
        return RayEnvironmentPool(self.cluster.envs, protocol, capacity)


def main(argv: Sequence[str] | None = None) -> int:
    parser = config_parser("python -m plugins.ray.run", __doc__.splitlines()[0])
    parser.add_argument("--resume", nargs="?", const=True, default=None, metavar="RUN_DIR",
                        help="continue a run from its last checkpoint (default: the latest run with this name)")
    args = parser.parse_args(argv)
    logs.configure()
    resolved, plugins = load_config(args.config, args.overrides, required=REQUIRED_SLOTS)
    options = RayOptions.from_extra(resolved.config.extra)
    placement = plan_placement(options)
    import_ray()
    run_dir = rundir.prepare(resolved, plugins, resume=args.resume, command="plugins.ray.run")
    logs.configure(resolved.config.run.log_level, run_dir / "log.jsonl")
    logs.bind(run_id=run_dir.name)
    log.info("ray run prepared", run_dir=str(run_dir), placement=placement.describe())
    from core.runtime.loop import train

    cluster = RayCluster(resolved, options, placement, run_dir)
    plugins.register(RayPlacement(cluster, run_dir), name="ray-placement", distribution="scalecua (plugins.ray)")
    try:
        return train(resolved, plugins, run_dir, resume=bool(args.resume))
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main_guard(main))
