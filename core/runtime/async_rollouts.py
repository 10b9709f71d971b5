"""Asynchronous rollouts (``rollout_loop.mode: async``): episodes never wait for the trainer.

A producer keeps the environment pool busy. Batch ``b`` (``sampler.select(b, batch_size)``, indices counting
up from the resumed iteration, one rollout group per task) starts as soon as the policy version reaches
``b - max_staleness``: so while the trainer steps on batch ``v``, batches up to ``v + max_staleness`` are
already rolling out, and a batch is normally trained within ``max_staleness`` versions of its start. When
the trainer is waiting and nothing is outstanding (DAPO rejected groups, drops, lost groups), the next batch
starts at once. Groups are delivered the moment their last rollout ends, in completion
order. The trainer takes groups one by one until ``batch_size`` of them pass the sampler's acceptance rule
(DAPO's filter keeps working: a rejected group is observed, not trained, and admission lets another batch
start), trains on them in a worker thread, and pushes the new weights to the engine while episodes go on.

Staleness. Every turn records the policy version that sampled it (:attr:`core.types.Turn.weight_version`,
the number of training iterations its weights reflect, however many optimizer steps each took). An episode in
flight across a weight update goes on with the new weights (a partial rollout); the importance ratio keeps
using the logprobs recorded at sampling time, or with ``algorithm.old_logprobs: recompute`` clips against the
proximal policy recomputed before the step and weights each token by pi_proximal / pi_rollout (the decoupled
objective, :func:`trainers.objective.grpo_token_loss`). A group's staleness when the step that makes version ``v + 1`` takes it is ``v`` minus the oldest
version among its turns. Nothing trained is ever staler than ``max_staleness``, by one of two rules
(``rollout_loop.stale_groups``):

* ``wait`` (the default): a group admitted at version ``u`` is *due* at the step that makes version
  ``u + max_staleness + 1``; that step waits for every due group and trains it, beside its batch if the batch
  is already full (``async/due_extra``). A group that finishes while a step waits only for due ones, and is
  not due itself, is set aside for the next step (unless the filter rejects due groups and leaves room: then
  this step takes it back). Admission caps the groups in flight at ``max_staleness + 1``
  batches, so at most about one batch is due at a time (SkyRL's and AReaL's capacity rule): no environment
  time is thrown away, at the price of the trainer waiting for a straggler.
* ``drop``: steps never wait; a group that finishes staler than ``max_staleness`` is **dropped**: counted
  (``async/dropped_stale``), never trained and never observed by the sampler (its task may be selected
  again), its episodes' environment time lost (``work/env_seconds_untrained``).

Every step reports the work behind it (:func:`core.runtime.metrics.work_metrics`): groups trained and not,
environment steps and seconds, the mean episode length trained and run (asynchronous training favours short
episodes), and at the run's end the groups started and never trained with the environment seconds their
finished episodes took (``async/groups_left_at_end``, ``work/env_seconds_left_at_end``).

Checkpoints hold what was trained: the trainer and the sampler as of the last completed step. Groups in
flight or buffered at a checkpoint are not saved; after a kill and ``--resume`` their tasks are simply
re-queued through the sampler (the EMA never saw them), so nothing is trained twice and nothing trained is
lost. ``max_staleness: 0`` is the synchronous schedule itself (``core.runtime.loop``), so it reproduces sync runs.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import structlog

from core.runtime.metrics import PhaseTimer, work_metrics
from core.runtime.rollouts import RolloutStats, collect_groups
from core.types import RolloutGroup

log = structlog.get_logger(__name__)


@dataclass
class FinishedGroup:
    """One task's rollout group as the producer delivers it."""

    task_id: str
    batch: int
    #: the policy version when its batch was admitted (the staleness floor when no turn reports a version)
    admitted_version: int
    group: RolloutGroup | None  # None: every rollout was lost to environment errors
    stats: RolloutStats = field(default_factory=RolloutStats)

    @property
    def version(self) -> int:
        """The oldest policy version that sampled any of its tokens."""
        versions = [t.oldest_weight_version for t in (self.group.trajectories if self.group else [])]
        known = [v for v in versions if v is not None]
        return min(known) if known else self.admitted_version


@dataclass
class Taken:
    """What one training step took from the buffer."""

    kept: list[RolloutGroup] = field(default_factory=list)
    staleness: list[int] = field(default_factory=list)  # of each kept group
    #: groups observed by the sampler: kept ones and those its acceptance rule rejected (not the dropped)
    observed: list[RolloutGroup] = field(default_factory=list)
    dropped_stale: int = 0
    #: groups dropped as too stale (``stale_groups: drop``): run, never trained
    dropped: list[RolloutGroup] = field(default_factory=list)
    lost_groups: int = 0
    env_errors: int = 0
    lost_rollouts: int = 0
    wait_s: float = 0.0
    #: groups a step waited for beyond its batch because they were due (``stale_groups: wait``), trained with it
    due_extra: int = 0


#: a step looks at most this many batches' worth of groups for its batch (DAPO's top-up budget, asynchronously)
MOST_GROUPS_PER_STEP = 2

#: (task id, batch index, index within the batch, admitted version) -> the finished group
RunGroup = Callable[[str, int, int, int], Awaitable[FinishedGroup]]


class AsyncRollouts:
    """The producer and the buffer of the asynchronous pipeline (no training in here: see the module doc)."""

    def __init__(self, *, select: Callable[[int, int], list[str]], run_group: RunGroup, batch_size: int,
                 max_staleness: int, first_batch: int, version: Callable[[], int], wait_for_due: bool = True,
                 end_batch: int | None = None) -> None:
        if max_staleness < 1:
            raise ValueError("AsyncRollouts needs max_staleness >= 1 (0 is the synchronous loop)")
        self.select, self.run_group = select, run_group
        self.batch_size, self.max_staleness = batch_size, max_staleness
        self.next_batch = first_batch
        self.version = version
        self.wait_for_due = wait_for_due
        #: the run's last iteration + 1 (``run.iterations``): batches from here on are admitted only when a step
        #: still needs groups, never ahead (None: no known end, e.g. a rollout budget)
        self.end_batch = end_batch
        self.outstanding = 0  # groups started and not yet taken
        #: admitted version -> groups started then and not yet taken out of the buffer (running or finished)
        self._admitted: Counter[int] = Counter()
        #: groups a step took out of the buffer but left for the next step (not due, batch already full)
        self._carry: list[FinishedGroup] = []
        self._wanted = 0  # groups the step being filled still needs (0: the trainer is not waiting)
        self.busy_episodes_s = 0.0
        self._buffer: asyncio.Queue[FinishedGroup] = asyncio.Queue()
        self._room = asyncio.Event()
        self._room.set()
        self._producer: asyncio.Task | None = None
        self._groups: set[asyncio.Task] = set()
        self._failure: BaseException | None = None

    def start(self) -> None:
        self._producer = asyncio.create_task(self._produce(), name="async-rollouts-producer")

    def _has_room(self) -> bool:
        if self.outstanding < self._wanted:  # the trainer waits for groups nothing running will deliver
            return True
        if self.end_batch is not None and self.next_batch >= self.end_batch:
            return False  # no step will ever train it: the run ends first
        return self.next_batch <= self.version() + self.max_staleness

    def wake(self) -> None:
        """The version moved (or the trainer's needs did): the producer re-checks its admission rule."""
        self._room.set()

    async def _produce(self) -> None:
        while True:
            while not self._has_room():
                self._room.clear()
                await self._room.wait()
            batch, version = self.next_batch, self.version()
            task_ids = self.select(batch, self.batch_size)
            self.next_batch += 1
            if not task_ids:
                raise RuntimeError(f"the sampler selected no task for batch {batch}")
            for index, task_id in enumerate(task_ids):
                self.outstanding += 1
                self._admitted[version] += 1
                job = asyncio.create_task(self._one(task_id, batch, index, version), name=f"group-{batch}-{index}")
                self._groups.add(job)
                job.add_done_callback(self._group_done)

    async def _one(self, task_id: str, batch: int, index: int, version: int) -> None:
        finished = await self.run_group(task_id, batch, index, version)
        await self._buffer.put(finished)

    def _group_done(self, job: asyncio.Task) -> None:
        self._groups.discard(job)
        if not job.cancelled() and job.exception() is not None and self._failure is None:
            self._failure = job.exception()
            self._buffer.put_nowait(None)  # type: ignore[arg-type]  # wake the trainer to re-raise

    def due(self, version: int) -> int:
        """Groups not yet taken that the step making ``version + 1`` must train (``stale_groups: wait``): admitted
        at ``version - max_staleness`` or earlier, so the next step would find them too stale."""
        if not self.wait_for_due:
            return 0
        limit = version - self.max_staleness
        return (sum(n for admitted, n in self._admitted.items() if admitted <= limit)
                + sum(1 for f in self._carry if f.admitted_version <= limit))

    async def take(self, *, version: int, needed: int, accept: Callable[[RolloutGroup], bool],
                   most: int | None = None) -> Taken:
        """Groups for the step that trains on policy ``version``, in completion order: ``needed`` accepted ones,
        or fewer once ``most`` groups were looked at (a bound on a filter that rejects most groups). With
        ``wait_for_due`` it also waits for every due group (:meth:`due`) and trains it; a group that arrives
        meanwhile and is not due waits for the next step (it is not stale there)."""
        taken, started, looked = Taken(), time.perf_counter(), 0
        later: list[FinishedGroup] = []  # arrived while the batch was full, not due: the next step's
        while (len(taken.kept) < needed and (most is None or looked < most)) or self.due(version) > 0:
            self._wanted = max(needed - len(taken.kept), 0)
            self.wake()
            if self._producer is not None and self._producer.done() and not self._producer.cancelled():
                self._producer.result()  # re-raise a producer failure (e.g. the sampler's)
            if self._carry:
                finished = self._carry.pop(0)
            elif later and len(taken.kept) + self.due(version) < needed:
                # set aside for due groups that were to fill the batch, and did not (the filter rejected some):
                # nothing new may come (the producer counts these as outstanding), so they are this step's now
                finished = later.pop(0)
            else:
                finished = await self._next()
                self._admitted[finished.admitted_version] -= 1
                if not self._admitted[finished.admitted_version]:
                    del self._admitted[finished.admitted_version]
            full = len(taken.kept) >= needed or (most is not None and looked >= most)
            due = finished.admitted_version <= version - self.max_staleness
            # a group that is not due waits for the next step (within the bound there) when the batch is full, or
            # when the due groups still running will fill what is left of it: due groups come first
            if not due and (full or len(taken.kept) + self.due(version) >= needed):
                later.append(finished)
                continue
            looked += 1
            self.outstanding -= 1
            self._room.set()
            taken.env_errors += finished.stats.env_errors
            taken.lost_rollouts += finished.stats.lost_rollouts
            if finished.group is None:
                taken.lost_groups += 1
                continue
            lag = version - finished.version
            if lag > self.max_staleness:
                taken.dropped_stale += 1
                taken.dropped.append(finished.group)
                log.info("group dropped: too stale", task_id=finished.task_id, staleness=lag,
                         max_staleness=self.max_staleness)
                continue
            taken.observed.append(finished.group)
            if accept(finished.group):
                taken.kept.append(finished.group)
                taken.staleness.append(lag)
                taken.due_extra += int(len(taken.kept) > needed)
        self._carry += later  # what this step did not reach stays first in line, then what it set aside
        self._wanted = 0
        taken.wait_s = time.perf_counter() - started
        return taken

    async def _next(self) -> FinishedGroup:
        producer = self._producer
        get = asyncio.ensure_future(self._buffer.get())
        waits = {get} | ({producer} if producer is not None else set())
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if get not in done:
            get.cancel()
            assert producer is not None
            producer.result()  # raises what stopped the producer
            raise RuntimeError("the rollout producer stopped")
        finished = get.result()
        if finished is None:
            assert self._failure is not None
            raise self._failure
        return finished

    async def close(self) -> None:
        """Cancel the producer and every group in flight; what was not taken is discarded (re-queued)."""
        jobs = [j for j in (self._producer, *self._groups) if j is not None]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        self._groups.clear()


class AsyncIterations:
    """``rollout_loop.mode: async`` for a :class:`core.runtime.loop.TrainingRun`: its ``iteration`` replacement."""

    def __init__(self, run: Any, c: Any) -> None:
        self.run, self.c = run, c
        cfg = run.cfg
        self.limit = asyncio.Semaphore(cfg.rollout_loop.concurrency)
        self.concurrency = cfg.rollout_loop.concurrency
        self.rollouts = AsyncRollouts(select=c.sampler.select, run_group=self._run_group,
                                      batch_size=cfg.algorithm.batch_size,
                                      max_staleness=cfg.rollout_loop.max_staleness,
                                      first_batch=run.completed, version=self.version,
                                      wait_for_due=cfg.rollout_loop.stale_groups == "wait",
                                      end_batch=cfg.run.iterations if cfg.run.rollout_budget is None else None)
        self._since = time.perf_counter()
        #: environment seconds of every episode finished so far, and of those in groups a step disposed of
        #: (trained, rejected, dropped): the difference at the end is work the run never used
        self.finished_s = 0.0
        self.disposed_s = 0.0

    async def _run_group(self, task_id: str, batch: int, index: int, version: int) -> FinishedGroup:
        cfg, c = self.run.cfg, self.c
        groups, stats = await collect_groups(
            [task_id], c.tasks, c.deps, n=cfg.algorithm.n_rollouts, concurrency=self.concurrency,
            retries=cfg.rollout_loop.env_retries, iteration=batch, seed=cfg.run.seed, tag="as",
            on_episode=self._episode_done, first_index=index, limit=self.limit,
        )
        return FinishedGroup(task_id, batch, version, groups[0] if groups else None, stats)

    def version(self) -> int:
        """The policy version episodes sample with now (the engine's; the run's step count if it reports none)."""
        version = self.c.engine.weight_version
        return self.run.completed if version is None else int(version)

    def _episode_done(self, traj: Any) -> None:
        seconds = float(traj.metadata.get("duration_s", 0.0))
        self.rollouts.busy_episodes_s += seconds
        self.finished_s += seconds
        self.run._episode_done(traj)

    def start(self) -> None:
        self.rollouts.start()

    async def iteration(self, c: Any) -> dict[str, Any]:
        run, a = self.run, self.run.cfg.algorithm
        timer = PhaseTimer()
        run.display.start_iteration(run.completed, a.batch_size * a.n_rollouts)
        with timer.phase("rollout"):
            taken = await self.rollouts.take(version=self.version(), needed=a.batch_size,
                                             accept=lambda g: c.sampler.accept(g.task_id, run.rewards(g)),
                                             most=MOST_GROUPS_PER_STEP * a.batch_size)
        outcomes: dict[str, list[float]] = {}
        for group in taken.observed:  # a task taken twice in one step is observed once, with both groups
            outcomes.setdefault(group.task_id, []).extend(1.0 if t.success else 0.0 for t in group.trajectories)
        now = time.perf_counter()
        window, self._since = now - self._since, now
        busy, self.rollouts.busy_episodes_s = self.rollouts.busy_episodes_s, 0.0
        counts = Counter(taken.staleness)
        rejected = [g for g in taken.observed if not any(g is k for k in taken.kept)]
        counters: dict[str, float] = {
            "rollout/env_errors": float(taken.env_errors), "rollout/lost": float(taken.lost_rollouts),
            # every episode run to its end that this step disposed of: trained, rejected or dropped as too stale
            "rollout/episodes_run": float(sum(len(g.trajectories) for g in (*taken.observed, *taken.dropped))),
            **work_metrics(taken.kept, [*rejected, *taken.dropped]),
            "async/dropped_stale": float(taken.dropped_stale), "async/lost_groups": float(taken.lost_groups),
            "async/due_extra": float(taken.due_extra),
            "async/staleness_mean": sum(taken.staleness) / max(len(taken.staleness), 1),
            "async/staleness_max": float(max(taken.staleness, default=0)),
            **{f"async/staleness_{k}": float(counts.get(k, 0)) for k in range(run.cfg.rollout_loop.max_staleness + 1)},
            # the trainer waited for groups this share of the time since its last step ended
            "async/trainer_idle_share": min(1.0, taken.wait_s / window) if window > 0 else 0.0,
            # environment slots without an episode, over the same window (episode time / slot time)
            "async/rollout_idle_share": max(0.0, 1.0 - busy / (self.concurrency * window)) if window > 0 else 0.0,
            "async/outstanding_groups": float(self.rollouts.outstanding),
        }
        self.disposed_s += counters["work/env_seconds"]
        metrics = await run.train_on(c, taken.kept, outcomes, counters, timer, in_threads=True)
        if run.finishes_with(run.completed + 1):  # the run ends here: what it started and will never train
            metrics["async/groups_left_at_end"] = float(self.rollouts.outstanding)
            metrics["work/env_seconds_left_at_end"] = max(0.0, self.finished_s - self.disposed_s)
        self.rollouts.wake()  # a new version admits the next batch
        metrics["async/weight_version_lag"] = counters["async/staleness_mean"]
        return metrics

    async def close(self) -> None:
        await self.rollouts.close()
