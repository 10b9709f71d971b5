"""``python -m core.sft --config FILE [KEY=VALUE ...] [--resume [RUN_DIR]]``: the warm start (stage 1).

Supervised fine-tuning on demonstrations (:mod:`core.runtime.demonstrations`) through
the configured model family, segmenter and trainer backend: each demonstration
replays into the very context the agent sees at rollout time (same system
prompt, same sliding window) and the trainer's ``cross_entropy`` objective
trains its response tokens. Settings: the ``warm_start`` section
(:class:`core.config.stages.WarmStartSection`) with its ``overrides`` applied.

The run directory holds ``demonstrations/`` (recorded oracles and their
screenshots), ``metrics.jsonl`` (one line per optimizer step; the last step of
each epoch adds the held-out loss), ``checkpoints/iter_NNNNNN`` (NNNNNN =
optimizer steps, the format every stage reads: an RL run starts from it with
``run.init_from``) and ``summary.json``. The configured ``trackers`` get every
step's record (``train/loss/nll``, ``train/actor/lr``, ``heldout/loss`` at each
epoch's end) through ``scalecua_iteration_end``. ``--resume`` (also after kill -9)
continues from the newest complete checkpoint; the data order is a function of
the seed and the epoch, so the resumed run trains exactly what the
uninterrupted one would have.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import structlog

from core.runtime import checkpoint, logs, rundir
from core.commands.cli import config_parser, main_guard
from core.config import ResolvedConfig, apply_overrides, load_config, validate
from core.runtime.demonstrations import (
    Demonstration,
    DemonstrationError,
    LoadReport,
    check_lengths,
    demonstration_segments,
    load_demonstrations,
)
from core.errors import ConfigError
from core.interfaces import JudgeServices
from core.runtime.metrics import MetricsLog, write_trajectories
from core.pluginmanager import Plugins
from core.config.stages import WarmStartSection
from core.runtime.tracking import start_trackers
from core.runtime.tasks import load_tasks
from core.types import Segment, Task

log = structlog.get_logger(__name__)
REQUIRED_SLOTS = ("model", "environment", "segmenter", "trainer")
ORACLE_FILE = "demonstrations/oracle.jsonl"


def stage_config(resolved: ResolvedConfig, plugins: Plugins) -> ResolvedConfig:
    """The config with ``warm_start.overrides`` applied (validated again: an override can be wrong too)."""
    overrides = resolved.config.warm_start.overrides
    if not overrides:
        return resolved
    raw = apply_overrides(resolved.raw, overrides, where="warm_start")
    return validate(raw, plugins, required=REQUIRED_SLOTS, source=resolved.source)


@dataclass
class Split:
    train: list[Demonstration]
    held_out: list[Demonstration]


def split_demonstrations(demos: Sequence[Demonstration], share: float, seed: int) -> Split:
    """A seeded held-out share (at least one when asked for and there are two or more; never all)."""
    ordered = sorted(demos, key=lambda d: d.trajectory_id)
    count = min(max(round(share * len(ordered)), 1 if share > 0 else 0), len(ordered) - 1) if ordered else 0
    order = np.random.default_rng(seed).permutation(len(ordered)).tolist()
    held = {ordered[i].trajectory_id for i in order[:count]}
    return Split([d for d in ordered if d.trajectory_id not in held], [d for d in ordered if d.trajectory_id in held])


def epoch_order(count: int, seed: int, epoch: int) -> list[int]:
    return np.random.default_rng([seed, epoch]).permutation(count).tolist()


def cap_per_task(demos: Sequence[Demonstration], limit: int | None) -> list[Demonstration]:
    if limit is None:
        return list(demos)
    seen: dict[str, int] = {}
    kept = []
    for demo in demos:
        seen[demo.task_id] = seen.get(demo.task_id, 0) + 1
        if seen[demo.task_id] <= limit:
            kept.append(demo)
    return kept


class WarmStart:
    """Stage 1 of the recipe: demonstrations -> segments -> cross-entropy steps -> checkpoints."""

    def __init__(self, resolved: ResolvedConfig, plugins: Plugins, run_dir: Path) -> None:
        self.resolved = stage_config(resolved, plugins)
        self.plugins = plugins
        self.run_dir = run_dir
        self.cfg = self.resolved.config
        self.ws: WarmStartSection = self.cfg.warm_start
        self.metrics_log = MetricsLog(run_dir)
        self.ckpt = checkpoint.CheckpointManager(run_dir, keep=self.cfg.run.keep_checkpoints)
        self.completed = 0  # optimizer steps done
        self.ckpt.register("warm_start", lambda: {"steps": self.completed}, lambda s: None)

    # -- data -----------------------------------------------------------------

    async def record_oracles(self, backend: Any, model: Any, tasks: Mapping[str, Task]) -> Path | None:
        """Record the oracles once (a resumed run reuses the file); returns its path."""
        source = self.ws.demonstrations.oracle
        if source is None:
            return None
        out = self.run_dir / ORACLE_FILE
        if out.is_file():
            log.info("reusing recorded oracle demonstrations", path=str(out))
            return out
        from core.runtime.episode import EpisodeDeps
        from core.runtime.components import settings_from
        from core.commands.record import record_oracles

        wanted = set(source.include) if source.include is not None else None
        unknown = sorted(wanted - set(tasks)) if wanted else []
        if unknown:
            raise ConfigError([f"warm_start.demonstrations.oracle.include: unknown task ids {unknown}"])
        chosen = [t for t in tasks.values() if t.metadata.get("oracle") and (wanted is None or t.id in wanted)]
        if not chosen:
            raise ConfigError(["warm_start.demonstrations.oracle: no task of the pool has a metadata.oracle"])
        if source.sample is not None and source.sample < len(chosen):
            picks = np.random.default_rng(self.cfg.run.seed).choice(len(chosen), source.sample, replace=False)
            chosen = [chosen[i] for i in sorted(picks.tolist())]
            log.info("recording a seeded sample of the oracles", sample=len(chosen), seed=self.cfg.run.seed)
        executor = self.resolved.create("judge", self.plugins) if "judge" in self.resolved.components else None
        deps = EpisodeDeps(backend=backend, engine=None, renderer=model.renderer(),  # type: ignore[arg-type]
                           segmenter=self.resolved.create("segmenter", self.plugins),
                           judge=JudgeServices.of(self.plugins, executor), settings=settings_from(self.resolved))
        loop_cfg = self.cfg.rollout_loop
        started = time.perf_counter()
        try:
            result = await record_oracles(chosen, deps, repeats=source.repeats, concurrency=loop_cfg.concurrency,
                                          retries=loop_cfg.env_retries)
        finally:
            if executor is not None:
                await executor.close()
        if result.failed:
            log.warning("some oracle runs were not recorded", failed=result.failed)
        if not result.recorded:
            raise DemonstrationError([f"no oracle run was judged a success ({len(result.failed)} tried): "
                                      f"{dict(list(result.failed.items())[:5])}"])
        write_trajectories(out, result.recorded, screenshots=True)
        log.info("oracle demonstrations recorded", path=str(out), recorded=len(result.recorded),
                 failed=len(result.failed), seconds=round(time.perf_counter() - started, 1))
        return out

    def segments(self, demos: Sequence[Demonstration], tasks: Mapping[str, Task], backend: Any, model: Any,
                 problems: list[str]) -> dict[str, list[Segment]]:
        segmenter = self.resolved.create("segmenter", self.plugins)
        renderer = model.renderer()
        out: dict[str, list[Segment]] = {}
        for demo in demos:
            task = tasks[demo.task_id]
            out[demo.trajectory_id] = demonstration_segments(
                demo, task=task, system_prompt=backend.system_prompt(task), segmenter=segmenter, renderer=renderer)
        problems.extend(check_lengths([s for segs in out.values() for s in segs], self.cfg.algorithm.max_seq_len,
                                      {d.trajectory_id: d.where for d in demos}))
        return out

    # -- training --------------------------------------------------------------

    async def run(self, *, resume: bool = False, progress: bool = True) -> dict[str, Any]:
        started = time.perf_counter()
        cfg = self.cfg
        model = self.resolved.create("model", self.plugins, run_dir=self.run_dir)
        backend = self.resolved.create("environment", self.plugins, run_dir=self.run_dir)
        try:
            base_dir = self.resolved.source.parent if self.resolved.source else None
            tasks = {t.id: t for t in load_tasks(cfg.tasks.paths, base_dir=base_dir, convert=backend.convert_task,
                                                 include=cfg.tasks.include, domains=cfg.tasks.domains)}
            if not tasks:
                raise ConfigError([f"tasks.paths: no tasks found in {cfg.tasks.paths}"])
            oracle_file = await self.record_oracles(backend, model, tasks)
        finally:
            await backend.close()
        sources = [*self.ws.demonstrations.paths, *([oracle_file] if oracle_file else [])]
        if not sources:
            raise ConfigError(["warm_start.demonstrations: give paths (JSONL files or run directories) and/or "
                               "oracle: {repeats: 1} to record the bundled oracles"])
        d = self.ws.demonstrations
        problems: list[str] = []
        demos, report = load_demonstrations(sources, tasks=tasks, parse=backend.parse_response,
                                            success_only=d.success_only, min_reward=d.min_reward, problems=problems)
        demos = cap_per_task(demos, d.max_per_task)
        segments = self.segments(demos, tasks, backend, model, problems)
        if problems:  # every problem of the set at once, before anything trains
            raise DemonstrationError(problems)
        if not demos:
            raise DemonstrationError([f"no demonstration passed the filter ({report.records} records read, skipped: "
                                      f"{report.skipped}); relax warm_start.demonstrations.success_only/min_reward"])
        split = split_demonstrations(demos, self.ws.held_out, cfg.run.seed)
        trainer = self.resolved.create("trainer", self.plugins, model=model, algorithm=cfg.algorithm,
                                       seed=cfg.run.seed, objective="cross_entropy")
        start_trackers(self.resolved, self.plugins, self.run_dir)  # registered: the lifecycle hooks reach them
        status = "failed"
        try:
            summary = self._train(trainer, split, segments, report, resume=resume, progress=progress,
                                  started=started)
            status = "completed"
            return summary
        except (KeyboardInterrupt, asyncio.CancelledError):
            status = "interrupted"
            raise
        finally:
            trainer.close()
            self.plugins.hook.scalecua_run_end(run_dir=self.run_dir, status=status)

    def _save(self, trainer: Any) -> None:
        path = self.ckpt.save(self.completed, trainer=trainer)
        self.plugins.hook.scalecua_checkpoint_saved(iteration=self.completed, path=path)

    def _held_out_loss(self, trainer: Any, split: Split, segments: Mapping[str, list[Segment]]) -> float | None:
        held = [s for d in split.held_out for s in segments[d.trajectory_id]]
        return float(trainer.eval_step(held)["loss/nll"]) if held else None

    def _train(self, trainer: Any, split: Split, segments: Mapping[str, list[Segment]], report: LoadReport, *,
               resume: bool, progress: bool, started: float) -> dict[str, Any]:
        ws, seed = self.ws, self.cfg.run.seed
        steps_per_epoch = math.ceil(len(split.train) / ws.batch_size)
        total = ws.epochs * steps_per_epoch
        if resume and self.ckpt.latest() is not None:
            restored = self.ckpt.load(trainer=trainer)
            self.completed = restored.iteration
            dropped = self.metrics_log.truncate_from(self.completed)
            log.info("warm start resumed", checkpoint=str(restored.path), next_step=self.completed, dropped=dropped)
        elif resume:  # killed before its first checkpoint: it starts over, and so does its log
            log.warning("no complete warm-start checkpoint; starting over",
                        dropped_metrics=self.metrics_log.truncate_from(0))
        initial = self._held_out_loss(trainer, split, segments) if self.completed == 0 else None
        bar = _progress(total, self.completed, enabled=progress)
        first_loss = last_loss = None
        try:
            for step in range(self.completed, total):
                epoch, k = divmod(step, steps_per_epoch)
                order = epoch_order(len(split.train), seed, epoch)[k * ws.batch_size:(k + 1) * ws.batch_size]
                batch = [s for i in order for s in segments[split.train[i].trajectory_id]]
                metrics = trainer.train_step(batch)
                record: dict[str, Any] = {"iteration": step, "epoch": epoch,
                                          **{f"train/{k2}": v for k2, v in metrics.items()}}
                last_loss = float(metrics.get("loss/nll", float("nan")))
                first_loss = last_loss if first_loss is None else first_loss
                epoch_end = k == steps_per_epoch - 1
                if epoch_end:
                    held = self._held_out_loss(trainer, split, segments)
                    if held is not None:
                        record["heldout/loss"] = held
                self.completed = step + 1
                self.metrics_log.append(record)
                self.plugins.hook.scalecua_iteration_end(iteration=step, metrics=record, run_dir=self.run_dir)
                if epoch_end or self.completed % ws.checkpoint_every == 0:
                    self._save(trainer)
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{last_loss:.3f}")
        finally:
            bar.close()
        latest = self.ckpt.latest()
        if latest is None or latest.name != checkpoint.checkpoint_name(self.completed):
            self._save(trainer)
        final = self._held_out_loss(trainer, split, segments)
        summary = {
            "checkpoint": str(self.ckpt.latest()),
            "demonstrations": {"records": report.records, "kept": len(split.train) + len(split.held_out),
                               "skipped": report.skipped, "train": len(split.train), "held_out": len(split.held_out),
                               "tasks": len({d.task_id for d in [*split.train, *split.held_out]})},
            # the sliding window at work: a demonstration longer than K + Delta screenshots trains as several
            "segments": {"total": sum(counts := [len(v) for v in segments.values()]), "max_per_demonstration":
                         max(counts, default=0), "demonstrations_with_several": sum(c > 1 for c in counts)},
            "steps": self.completed, "epochs": ws.epochs, "batch_size": ws.batch_size,
            "train_loss": {"first": first_loss, "last": last_loss},
            "held_out_loss": {"initial": initial, "final": final},
            "seconds": round(time.perf_counter() - started, 1),
        }
        rundir.write_json_atomic(self.run_dir / "summary.json", summary)
        log.info("warm start finished", **{k: v for k, v in summary.items() if k != "demonstrations"})
        return summary


def _progress(total: int, done: int, *, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc="warm start", unit="step",
                disable=not (enabled and sys.stderr.isatty()), file=sys.stderr)


def main(argv: Sequence[str] | None = None, *, extra_plugins: Sequence[object] = ()) -> int:
    """``extra_plugins``: plugin objects registered for this run only (a launcher's placement plugin)."""
    parser = config_parser("python -m core.sft", __doc__.splitlines()[0])
    parser.add_argument("--resume", nargs="?", const=True, default=None, metavar="RUN_DIR",
                        help="continue from the last checkpoint (default: the latest run with this name)")
    args = parser.parse_args(argv)
    logs.configure()
    resolved, plugins = load_config(args.config, args.overrides, required=REQUIRED_SLOTS)
    for plugin in extra_plugins:
        plugins.register(plugin, name=type(plugin).__name__)
    resolved = validate(apply_overrides(resolved.raw, {"run.name": f"{resolved.config.run.name}-warm-start"},
                                        where="core.sft"), plugins, required=REQUIRED_SLOTS, source=resolved.source)
    run_dir = rundir.prepare(resolved, plugins, resume=args.resume, command="core.sft")
    logs.configure(resolved.config.run.log_level, run_dir / "log.jsonl")
    logs.bind(run_id=run_dir.name)
    summary = asyncio.run(WarmStart(resolved, plugins, run_dir).run(resume=bool(args.resume)))
    print(f"warm start: {summary['steps']} steps, held-out loss {summary['held_out_loss']}, checkpoint "
          f"{summary['checkpoint']}")
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
