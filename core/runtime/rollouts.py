"""Collect rollout groups: n episodes per task, run concurrently over the environment pool.

Episodes that end in an environment error are retried on a fresh environment
(up to ``retries`` times) and never scored as failures; a rollout that keeps
failing is left out of its group and counted in ``env_errors``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import structlog

from core.runtime.episode import EpisodeDeps, run_episode
from core.types import EpisodeStatus, RolloutGroup, Task, Trajectory

log = structlog.get_logger(__name__)


@dataclass
class RolloutStats:
    episodes: int = 0
    env_errors: int = 0
    lost_rollouts: int = 0
    dropped_groups: list[str] = field(default_factory=list)


def trajectory_id(iteration: int, task_index: int, rollout: int, tag: str = "it") -> str:
    return f"{tag}{iteration:06d}-t{task_index:04d}-r{rollout:02d}"


async def collect_groups(
    task_ids: Sequence[str],
    tasks: Mapping[str, Task],
    deps: EpisodeDeps,
    *,
    n: int,
    concurrency: int,
    retries: int,
    iteration: int,
    seed: int,
    tag: str = "it",
    on_episode: Callable[[Trajectory], None] | None = None,
    first_index: int = 0,
    limit: asyncio.Semaphore | None = None,
) -> tuple[list[RolloutGroup], RolloutStats]:
    """Run ``n`` rollouts of every task in ``task_ids``; groups come back in ``task_ids`` order.

    Task ``i`` of the call is task ``first_index + i`` of its iteration (ids and seeds); ``limit``, when given,
    is shared with other calls running at the same time (else ``concurrency`` bounds this call alone).
    """
    unknown = [t for t in task_ids if t not in tasks]
    if unknown:
        raise KeyError(f"sampler selected unknown task ids {unknown[:5]}")
    limit = limit if limit is not None else asyncio.Semaphore(concurrency)
    stats = RolloutStats()

    async def one(task_index: int, task_id: str, rollout: int) -> Trajectory | None:
        tid = trajectory_id(iteration, task_index, rollout, tag)
        episode_seed = (seed * 1_000_003 + iteration * 10_007 + task_index * 101 + rollout) % (2**31)
        for attempt in range(retries + 1):
            async with limit:
                traj = await run_episode(
                    tasks[task_id], deps, trajectory_id=tid, group_id=f"{tag}{iteration:06d}-{task_id}",
                    seed=episode_seed,
                )
            stats.episodes += 1
            if traj.status != EpisodeStatus.ENV_ERROR:
                traj.metadata["attempts"] = attempt + 1
                if on_episode is not None:
                    on_episode(traj)
                return traj
            stats.env_errors += 1
            log.warning("retrying episode on a fresh environment", trajectory_id=tid, attempt=attempt + 1,
                        reason=traj.status_reason)
        stats.lost_rollouts += 1
        return None

    jobs = [one(first_index + i, task_id, j) for i, task_id in enumerate(task_ids) for j in range(n)]
    results = await asyncio.gather(*jobs)
    groups: list[RolloutGroup] = []
    for i, task_id in enumerate(task_ids):
        trajectories = [t for t in results[i * n:(i + 1) * n] if t is not None]
        if not trajectories:
            stats.dropped_groups.append(task_id)
            log.error("every rollout of the task failed with environment errors; group dropped", task_id=task_id)
            continue
        groups.append(RolloutGroup(task_id=task_id, trajectories=trajectories))
    return groups, stats
