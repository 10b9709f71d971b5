"""The ``extra.ray`` section of a config: where the workers run, and the placement plan derived from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import ConfigError


class RayOptions(BaseModel):
    """How a run is spread over a Ray cluster (``extra.ray`` in the YAML; every field has a laptop default).

    With no ``address`` a local Ray instance starts inside the driver (a laptop, a CI
    machine); with ``address: auto`` (or ``ray://host:10001``) the same YAML runs on
    a cluster. GPUs are split by ``rollout_ratio`` as in the paper (25% rollout,
    75% training, Tables 9-11).
    """

    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(None, description="Ray cluster address; null starts a local Ray instance")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of the local instance (null: all); ignored on a cluster")
    nodes: int = Field(1, ge=1, description="GPU nodes to use")
    gpus_per_node: int = Field(0, ge=0, description="GPUs per node (0: everything on CPUs)")
    rollout_ratio: float = Field(0.25, gt=0, lt=1, description="share of the GPUs that generate rollouts")
    rollout_gpus_per_worker: int = Field(1, ge=1, description="GPUs of one rollout worker (the engine's TP size)")
    trainer_gpus_per_worker: int = Field(1, ge=1, description="GPUs of one trainer worker process (1 for FSDP/Megatron ranks)")
    rollout_workers: int | None = Field(None, ge=1, description="rollout workers on CPUs (default 1); with GPUs: "
                                                              "derived from rollout_ratio")
    trainer_workers: int | None = Field(None, ge=1, description="trainer ranks on CPUs (default 1); with GPUs: "
                                                              "derived from rollout_ratio")
    env_workers: int = Field(1, ge=1, description="environment-pool workers (each runs its own pool of desktops)")
    env_resource: str | None = Field(None, description="custom Ray resource marking environment hosts (each env "
                                                       "worker asks for 1 unit, so pools land on those hosts)")
    cpus_per_env_worker: float = Field(1.0, ge=0, description="CPUs reserved by an environment worker")
    cpus_per_rollout_worker: float = Field(1.0, ge=0, description="CPUs reserved by a rollout worker")
    cpus_per_trainer_worker: float = Field(1.0, ge=0, description="CPUs reserved by a trainer worker")
    env_worker_max_restarts: int = Field(
        10, ge=-1, description="times Ray restarts an environment worker whose process died (-1: no limit); its "
                               "desktops are lost and their episodes retried on fresh ones")
    spread_env_workers: bool = Field(True, description="spread environment workers over hosts (Ray SPREAD)")
    object_store_memory_mb: int | None = Field(None, ge=64, description="object store of the local instance")

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> RayOptions:
        raw = extra.get("ray") or {}
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            problems = [f"extra.ray.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
            raise ConfigError(problems) from None


@dataclass(frozen=True)
class Placement:
    """How many workers of each kind, and what each one asks Ray for."""

    rollout_workers: int
    trainer_workers: int
    env_workers: int
    rollout_gpus: int  # per rollout worker
    trainer_gpus: int  # per trainer worker

    def describe(self) -> dict[str, int]:
        return {"rollout_workers": self.rollout_workers, "trainer_workers": self.trainer_workers,
                "env_workers": self.env_workers, "gpus_per_rollout_worker": self.rollout_gpus,
                "gpus_per_trainer_worker": self.trainer_gpus}


def plan_placement(options: RayOptions) -> Placement:
    """Split the cluster's GPUs between rollout and training; CPU-only runs use the explicit worker counts.

    With G = nodes x gpus_per_node GPUs, ``round(G * rollout_ratio)`` (at least one
    engine's worth) go to rollout workers of ``rollout_gpus_per_worker`` GPUs each
    and the rest to trainer ranks of ``trainer_gpus_per_worker``. The paper's 8x8
    H100 setup with ratio 0.25 and vLLM TP=2 gives 8 engines and 48 trainer ranks.
    """
    total = options.nodes * options.gpus_per_node
    if total == 0:
        return Placement(options.rollout_workers or 1, options.trainer_workers or 1, options.env_workers, 0, 0)
    rollout_gpus = max(options.rollout_gpus_per_worker, round(total * options.rollout_ratio))
    rollout_gpus -= rollout_gpus % options.rollout_gpus_per_worker
    trainer_gpus = total - rollout_gpus
    problems = []
    if trainer_gpus < options.trainer_gpus_per_worker:
        problems.append(f"extra.ray: {total} GPUs with rollout_ratio {options.rollout_ratio} leave {trainer_gpus} for "
                        f"training, fewer than trainer_gpus_per_worker={options.trainer_gpus_per_worker}; lower the "
                        "ratio or add GPUs")
    if options.rollout_gpus_per_worker > options.gpus_per_node:
        problems.append(f"extra.ray.rollout_gpus_per_worker={options.rollout_gpus_per_worker} exceeds gpus_per_node="
                        f"{options.gpus_per_node}: one engine must fit on one node")
    if problems:
        raise ConfigError(problems)
    explicit = [(k, v) for k, v in (("rollout_workers", options.rollout_workers),
                                    ("trainer_workers", options.trainer_workers)) if v is not None]
    if explicit:
        raise ConfigError([f"extra.ray.{k}: set only for CPU runs; with GPUs the split follows rollout_ratio"
                           for k, _ in explicit])
    return Placement(rollout_gpus // options.rollout_gpus_per_worker,
                     trainer_gpus // options.trainer_gpus_per_worker, options.env_workers,
                     options.rollout_gpus_per_worker, options.trainer_gpus_per_worker)
