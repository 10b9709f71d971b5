"""The training iteration loop behind ``python -m core.run``.

sampler.select -> n rollouts per task over the environment pool (the
segmenter owns each episode's context) -> judges score final states ->
sampler.observe -> group-relative advantages -> trainer.train_step ->
weights to the rollout engine -> metrics -> checkpoint every N iterations.

Ctrl-C or SIGTERM: the iteration in flight is abandoned and a checkpoint of
the last completed iteration is written before exiting. ``--resume`` (also
after kill -9) continues from the newest complete checkpoint; metrics of the
redone iterations are replaced, never duplicated.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any, Mapping

import structlog

from core.runtime import advantages, checkpoint, progress, updates
from core.config import ResolvedConfig
from core.errors import ConfigError
from core.interfaces import TrainerBackend
from core.runtime.components import Components, build_components
from core.runtime.metrics import (MetricsLog, PhaseTimer, discard_attempt, rollout_metrics, work_metrics,
                                  write_rollouts)
from core.pluginmanager import Plugins
from core.runtime.rollouts import collect_groups
from core.runtime.shots import ScreenshotPolicy
from core.runtime.tracking import start_trackers
from core.types import RolloutGroup, Task, Trajectory
from core.runtime.threads import in_thread
from core.runtime.weights import EngineWeights

log = structlog.get_logger(__name__)


def group_outcomes(group: RolloutGroup) -> list[float]:
    """What the sampler observes of a group: 1 per successful rollout, 0 otherwise."""
    return [1.0 if t.success else 0.0 for t in group.trajectories]


def load_pass_rates(path: str, tasks: Mapping[str, Task]) -> dict[str, float]:
    """``{task_id: rate}`` from a JSON file, for the tasks of the pool (others are ignored)."""

    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError([f"tasks.pass_rates: {path}: {exc}"]) from None
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in data.values()):
        raise ConfigError([f"tasks.pass_rates: {path} must be a JSON object {{task_id: rate in [0, 1]}}"])
    return {str(k): float(v) for k, v in data.items() if k in tasks}


class TrainingRun:
    def __init__(self, resolved: ResolvedConfig, plugins: Plugins, run_dir: Path) -> None:
        self.resolved = resolved
        self.plugins = plugins
        self.run_dir = run_dir
        self.cfg = resolved.config
        self.metrics_log = MetricsLog(run_dir)
        self.ckpt = checkpoint.CheckpointManager(run_dir, keep=self.cfg.run.keep_checkpoints)
        self.completed = 0  # iterations completed (== index of the next iteration)
        self.rollouts_spent = 0.0  # training rollouts run so far (run.rollout_budget)
        self.step_applied = False
        self.weights: EngineWeights  # made with the components (run)
        self.rng_at_completion: dict[str, Any] | None = None
        self.last_saved: int | None = None
        self.display = progress.Progress(total=self.cfg.run.iterations)

    # -- checkpoints ----------------------------------------------------------

    def save_checkpoint(self, c: Components) -> None:
        if self.last_saved == self.completed:
            return
        if self.rng_at_completion is not None:
            checkpoint.restore_rng(self.rng_at_completion)  # as it was when the iteration completed
        path = self.ckpt.save(self.completed, trainer=c.trainer, sampler=c.sampler)
        self.last_saved = self.completed
        self.plugins.hook.scalecua_checkpoint_saved(iteration=self.completed, path=path)
        self._record_sampler_weights(c)

    def _record_sampler_weights(self, c: Components) -> None:
        weights = dict(c.sampler.weights())
        if not weights:
            return
        record: dict[str, Any] = {"iteration": self.completed}
        if len(weights) <= 10_000:
            record["weights"] = weights
        else:
            import numpy as np

            counts, edges = np.histogram(np.fromiter(weights.values(), float), bins=50)
            record["histogram"] = {"counts": counts.tolist(), "edges": edges.tolist()}
        with (self.run_dir / "sampler_weights.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def initialize(self, c: Components) -> None:
        """``run.init_from``: the trainer (and its reference model) start from another run's weights. Also on
        resume, before the checkpoint: the KL reference is the starting point, never checkpointed."""
        if not self.cfg.run.init_from:
            return
        source = checkpoint.resolve_checkpoint(self.cfg.run.init_from, what="run.init_from")
        c.trainer.load_weights(source / "trainer")
        log.info("policy initialized", init_from=str(source))

    def known_pass_rates(self, c: Components) -> dict[str, float]:
        """``tasks.pass_rates``: earlier estimates handed to the sampler before the first iteration."""
        if not self.cfg.tasks.pass_rates:
            return {}
        rates = load_pass_rates(self.cfg.tasks.pass_rates, c.tasks)
        if rates:
            c.sampler.set_initial_pass_rates(rates)
        log.info("pass rates from tasks.pass_rates", path=self.cfg.tasks.pass_rates, tasks=len(rates),
                 pool=len(c.tasks))
        return rates

    def resume(self, c: Components) -> None:
        restored = self.ckpt.load(trainer=c.trainer, sampler=c.sampler)
        self.completed = self.last_saved = restored.iteration
        self.rng_at_completion = checkpoint.capture_rng()
        dropped = discard_attempt(self.run_dir, self.completed)
        self.rollouts_spent = sum(float(r.get("rollout/episodes_run", 0.0)) for r in self.metrics_log.read())
        log.info("resumed", checkpoint=str(restored.path), next_iteration=self.completed, dropped_metrics=dropped)
        self.weights.push(self.completed)

    # -- the loop ----------------------------------------------------------------

    async def initial_pass(self, c: Components, known: Mapping[str, float]) -> None:
        n = c.sampler.initial_pass_rollouts
        todo = [t for t in c.tasks if t not in known]
        log.info("initial pass-rate sweep", tasks=len(todo), known=len(known), rollouts_per_task=n)
        if not todo:
            return
        groups, stats = await collect_groups(
            todo, c.tasks, c.deps, n=n, concurrency=self.cfg.rollout_loop.concurrency,
            retries=self.cfg.rollout_loop.env_retries, iteration=0, seed=self.cfg.run.seed, tag="init",
        )
        rates = {g.task_id: sum(g.successes) / len(g.trajectories) for g in groups}
        c.sampler.set_initial_pass_rates({**known, **rates})
        write_rollouts(self.run_dir, 0, groups, tag="init")

    def _episode_done(self, traj: Trajectory) -> None:
        self.display.episode_done(traj)
        self.plugins.hook.scalecua_episode_end(iteration=self.completed, trajectory=traj, run_dir=self.run_dir)

    async def iteration(self, c: Components) -> dict[str, Any]:
        """One synchronous iteration: select a batch, roll it out (with top-ups), train, sync the weights."""
        it, a, loop_cfg = self.completed, self.cfg.algorithm, self.cfg.rollout_loop
        timer = PhaseTimer()
        task_ids = c.sampler.select(it, a.batch_size)
        self.display.start_iteration(it, len(task_ids) * a.n_rollouts)
        kept: list[RolloutGroup] = []
        rejected: list[RolloutGroup] = []
        outcomes: dict[str, list[float]] = {}
        extra_draws, env_errors, lost, episodes_run = 0, 0, 0, 0
        with timer.phase("rollout"):
            pending = task_ids
            while pending:
                groups, stats = await collect_groups(
                    pending, c.tasks, c.deps, n=a.n_rollouts, concurrency=loop_cfg.concurrency,
                    retries=loop_cfg.env_retries, iteration=it, seed=self.cfg.run.seed,
                    tag=f"it{extra_draws:02d}-" if extra_draws else "it", on_episode=self._episode_done,
                )
                env_errors += stats.env_errors
                lost += stats.lost_rollouts
                episodes_run += sum(len(group.trajectories) for group in groups)
                for group in groups:
                    outcomes[group.task_id] = group_outcomes(group)
                    if c.sampler.accept(group.task_id, self.rewards(group)):
                        kept.append(group)
                    else:
                        rejected.append(group)
                missing = a.batch_size - len(kept)
                seen = [g.task_id for g in kept] + list(pending)
                pending = c.sampler.top_up(it, missing, seen) if missing > 0 else []
                if pending:
                    extra_draws += 1
        # rollout/episodes counts the trained (kept) groups' episodes; episodes_run also those a sampler dropped
        counters = {"rollout/env_errors": float(env_errors), "rollout/lost": float(lost),
                    "rollout/episodes_run": float(episodes_run), "sampler/top_up_rounds": float(extra_draws),
                    **work_metrics(kept, rejected)}
        return await self.train_on(c, kept, outcomes, counters, timer)

    def rewards(self, group: RolloutGroup) -> list[float]:
        return [advantages.episode_reward(t, self.cfg.algorithm.incomplete_penalty) for t in group.trajectories]

    async def train_on(self, c: Components, kept: list[RolloutGroup], outcomes: Mapping[str, list[float]],
                       counters: Mapping[str, float], timer: PhaseTimer, *, in_threads: bool = False) -> dict[str, Any]:
        """The sampler observes ``outcomes``; ``kept`` groups get advantages and train one step; the weights
        reach the engine as version ``it + 1``. ``in_threads``: the step and the sync run off the event loop,
        so episodes in flight go on meanwhile (the asynchronous pipeline)."""
        it, a = self.completed, self.cfg.algorithm
        c.sampler.observe(it, outcomes)
        advantages.assign_with(kept, a)
        segments = [s for g in kept for t in g.trajectories for s in t.segments]
        metrics: dict[str, Any] = {"iteration": it, **rollout_metrics(kept), **counters,
                                   "groups/kept": float(len(kept))}
        if not a.credit_unparsable_turns:
            metrics["tokens/withheld"] = float(sum(t.metadata.get("withheld_tokens", 0)
                                                   for g in kept for t in g.trajectories))
        metrics.update({f"sampler/{k}": float(v) for k, v in c.sampler.stats().items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)})
        if segments:
            # held: a restore after a server restart must not push the trainer between its steps and their push
            async with self.weights.lock:
                await self.step_and_push(c, kept, segments, metrics, timer, in_threads=in_threads)
        else:
            log.warning("no trainable segments this iteration", iteration=it)
        write_rollouts(self.run_dir, it, kept, screenshots=ScreenshotPolicy.of(self.cfg.run))
        self.rollouts_spent += float(counters.get("rollout/episodes_run", 0.0))
        every = self.cfg.run.eval_every
        if every and ((it + 1) % every == 0 or self.finishes_with(it + 1)):  # the last iteration is always evaluated
            with timer.phase("eval"):
                metrics.update(await self.evaluate(c, it))
        metrics.update(timer.as_metrics())
        return metrics

    async def step_and_push(self, c: Components, kept: list[RolloutGroup], segments: list[Any],
                            metrics: dict[str, Any], timer: PhaseTimer, *, in_threads: bool) -> None:
        """The iteration's optimizer steps on ``segments`` (its metrics into ``metrics``), then the push of the
        new weights to the engine as version ``completed + 1``."""
        it, a = self.completed, self.cfg.algorithm
        self.step_applied = True  # the trainer is ahead of `completed` until the iteration is recorded
        with timer.phase("train"):
            if a.old_logprobs == "recompute":  # the proximal policy: the weights before this iteration's steps
                started = time.perf_counter()
                proximal = (await in_thread(c.trainer.recompute_logprobs, segments) if in_threads
                            else c.trainer.recompute_logprobs(segments))
                updates.set_proximal(segments, proximal)
                metrics["train/time/proximal_logprobs"] = time.perf_counter() - started
            steps = []
            for batch in updates.mini_batches(kept, count=a.ppo_mini_batches, epochs=a.ppo_epochs,
                                              seed=self.cfg.run.seed, iteration=it):
                limit = a.target_kl if steps else None  # the KL stop never skips the iteration's first step
                steps.append(await in_thread(c.trainer.train_step, batch, limit) if in_threads
                             else c.trainer.train_step(batch, limit))
                if steps[-1].get("actor/kl_stopped"):
                    break
            metrics.update({f"train/{k}": v for k, v in updates.merge_step_metrics(steps).items()})
        with timer.phase("weight_sync"):
            if in_threads:  # the engine's session pauses generation only while its buckets load
                await self.weights.push_off_loop(it + 1)
            else:
                self.weights.push(it + 1)  # the version: iterations the weights reflect

    def finishes_with(self, completed: int) -> bool:
        """Whether the run ends once ``completed`` iterations are done: ``run.iterations`` or ``run.rollout_budget``."""
        budget = self.cfg.run.rollout_budget
        return completed >= self.cfg.run.iterations or (budget is not None and self.rollouts_spent >= budget)

    async def evaluate(self, c: Components, it: int) -> dict[str, float]:
        """The updated policy on ``run.eval_set`` (else the whole pool), with ``core.eval``'s episode seeds
        (comparable across calls and with a ``core.eval`` of the starting checkpoint)."""
        tasks = c.eval_tasks if c.eval_tasks is not None else c.tasks
        groups, stats = await collect_groups(
            list(tasks), tasks, c.deps, n=self.cfg.run.eval_passes, concurrency=self.cfg.rollout_loop.concurrency,
            retries=self.cfg.rollout_loop.env_retries, iteration=0, seed=self.cfg.run.seed, tag="eval",
        )
        write_rollouts(self.run_dir, it, groups, tag="eval")
        trajs = [t for g in groups for t in g.trajectories]
        success = sum(t.success for t in trajs) / len(trajs) if trajs else float("nan")
        log.info("periodic evaluation", iteration=it, success=round(success, 4), episodes=len(trajs))
        return {"eval/success": success, "eval/episodes": float(len(trajs)), "eval/lost": float(stats.lost_rollouts)}

    async def run(self, resume: bool) -> str:
        c = build_components(self.resolved, self.plugins, self.run_dir)
        self.weights = EngineWeights(c.trainer, c.engine)
        c.deps.restore_weights = self.weights.restore  # an episode whose rollout server restarted awaits it
        if self.cfg.algorithm.old_logprobs == "recompute" and \
                type(c.trainer).recompute_logprobs is TrainerBackend.recompute_logprobs:
            raise ConfigError([f"algorithm.old_logprobs: recompute (set by tis_cap too) needs a trainer that "
                               f"recomputes logprobs; trainer '{self.resolved.components['trainer'].name}' does "
                               "not: use old_logprobs: rollout, or the torch / torch-fsdp trainer"])
        self.plugins.hook.scalecua_configure(config=self.resolved.raw, run_dir=self.run_dir)
        start_trackers(self.resolved, self.plugins, self.run_dir)  # registered: the lifecycle hooks reach them
        status = "failed"
        pipeline = None
        try:
            self.initialize(c)
            if resume and self.ckpt.latest() is not None:
                self.resume(c)
            else:
                if resume:  # killed before its first checkpoint: nothing to continue, nothing of it to keep
                    log.warning("no complete checkpoint to resume from; the run starts over",
                                discarded=discard_attempt(self.run_dir, 0))
                known = self.known_pass_rates(c)
                if c.sampler.initial_pass_rollouts > 0:
                    await self.initial_pass(c, known)
                self.weights.push(self.completed)
            self.rng_at_completion = checkpoint.capture_rng()
            step = self.iteration
            loop_cfg = self.cfg.rollout_loop
            if loop_cfg.mode == "async" and loop_cfg.max_staleness > 0:
                from core.runtime.async_rollouts import AsyncIterations

                pipeline = AsyncIterations(self, c)
                pipeline.start()
                step = pipeline.iteration
            while not self.finishes_with(self.completed):
                started, restores = time.perf_counter(), self.weights.restores
                metrics = await step(c)
                metrics["rollout/weight_restores"] = float(self.weights.restores - restores)
                self.completed += 1
                self.step_applied = False
                self.rng_at_completion = checkpoint.capture_rng()
                metrics["time/iteration"] = round(time.perf_counter() - started, 4)
                # metrics first: a kill between the two redoes the iteration and drops its line on resume
                self.metrics_log.append(metrics)
                if self.completed % self.cfg.run.checkpoint_every == 0 or self.finishes_with(self.completed):
                    self.save_checkpoint(c)
                self.plugins.hook.scalecua_iteration_end(iteration=metrics["iteration"], metrics=metrics,
                                                         run_dir=self.run_dir)
                self.display.end_iteration(metrics)
            status = "completed"
        except asyncio.CancelledError:
            status = "interrupted"
            if self.step_applied:  # its weights are not those of `completed` iterations: never label them so
                log.warning("interrupted after the iteration's optimizer step, before it was recorded; no checkpoint "
                            "written (--resume redoes it from the last one)", completed=self.completed)
            else:
                log.warning("interrupted; saving a checkpoint of the last completed iteration",
                            completed=self.completed)
                self.save_checkpoint(c)
        finally:
            if pipeline is not None:
                await pipeline.close()
            self.display.close()
            await c.close()
            self.plugins.hook.scalecua_run_end(run_dir=self.run_dir, status=status)
        return status


async def _main(run: TrainingRun, resume: bool) -> str:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await run.run(resume)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def train(resolved: ResolvedConfig, plugins: Plugins, run_dir: Path, *, resume: bool = False) -> int:
    """Run the training loop; exit code 0 when completed, 130 when interrupted."""
    run = TrainingRun(resolved, plugins, run_dir)
    try:
        status = asyncio.run(_main(run, resume))
    except asyncio.CancelledError:
        status = "interrupted"
    if run.metrics_log.read():
        try:
            from core.runtime.plots import write_report

            write_report(run_dir)  # plots next to the metrics, so a finished run is self-describing
        except Exception as exc:  # a plotting problem must not turn a finished run into a failure
            log.warning("could not write the report", error=str(exc))
    log.info("run finished", status=status, iterations=run.completed, run_dir=str(run_dir),
             report=str(run_dir / "report"))
    return 0 if status == "completed" else 130
