"""The live components of a run, created from the config's slots, and the task pool they run on.

:func:`build_components` creates the model, the environment backend, the task pool (checked up front by
:mod:`core.runtime.task_check`: a task nothing here can set up or judge is a config error before any desktop starts),
the judge services, sampler, segmenter, trainer and rollout engine, and the episode dependencies.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import structlog

from core.config import ResolvedConfig, TasksSection
from core.runtime.episode import EpisodeDeps, EpisodeSettings
from core.errors import ConfigError
from core.interfaces import JudgeServices
from core.pluginmanager import Plugins
from core.runtime.splits import check_splits
from core.runtime.task_check import check_pool
from core.runtime.tasks import load_tasks
from core.types import Task

log = structlog.get_logger(__name__)


@dataclass
class Components:
    """The live components of a run, created from the config's slots."""

    model: Any
    backend: Any
    sampler: Any
    segmenter: Any
    trainer: Any
    engine: Any
    executor: Any
    tasks: dict[str, Task]
    deps: EpisodeDeps
    #: the tasks of ``run.eval_set`` for periodic evaluations (None: they roll out on ``tasks``)
    eval_tasks: dict[str, Task] | None = None
    #: with ``build_components(eval_sets=...)``: each set's task ids (None: the training pool)
    set_ids: dict[str | None, list[str]] = field(default_factory=dict)

    async def close(self) -> None:
        for what, closer in (("rollout engine", self.engine.close), ("judge executor", self.executor.close),
                             ("environments", self.backend.close)):
            try:
                await closer()
            except Exception as exc:  # keep closing the rest
                log.warning(f"closing the {what} failed", error=str(exc))
        if self.trainer is not None:
            self.trainer.close()


def settings_from(resolved: ResolvedConfig) -> EpisodeSettings:
    a, loop_cfg = resolved.config.algorithm, resolved.config.rollout_loop
    return EpisodeSettings(
        max_turns=a.max_turns, max_new_tokens=a.max_new_tokens, max_seq_len=a.max_seq_len,
        temperature=a.temperature, top_p=a.top_p, max_parse_failures=a.max_parse_failures,
        env_call_timeout_s=loop_cfg.env_call_timeout_s, episode_timeout_s=loop_cfg.episode_timeout_s,
    )


def build_components(
    resolved: ResolvedConfig, plugins: Plugins, run_dir: Path, *, train: bool = True, eval_set: str | None = None,
    eval_sets: Sequence[str | None] = (),
) -> Components:
    """Create every component of an RL run. ``train=False`` (evaluation) skips sampler and trainer; ``eval_set``
    (a name of ``tasks.evaluation_sets()``) runs on that set instead of the training pool; ``eval_sets`` on
    several at once (None: the training pool), ``tasks`` then their union and ``set_ids`` each set's ids. The
    evaluation sets are checked against the training pool first (:mod:`core.runtime.splits`): nothing evaluated
    may be trained on."""
    cfg = resolved.config
    seed = cfg.run.seed
    model = resolved.create("model", plugins, run_dir=run_dir)
    backend = resolved.create("environment", plugins, run_dir=run_dir)
    base_dir = resolved.source.parent if resolved.source else None
    executor = resolved.create("judge", plugins)
    judge = JudgeServices.of(plugins, executor)
    try:
        pools = TaskPools(cfg.tasks, base_dir=base_dir, convert=backend.convert_task, seed=seed)
        names = list(eval_sets) or [eval_set]
        chosen = {name: pools.evaluation(name) if name is not None else pools.training() for name in names}
        for name in names if not train else [None]:
            pools.check(only=name)
        union = {t.id: t for members in chosen.values() for t in members}
        tasks = check_pool(list(union.values()), backend, judge, policy=cfg.tasks.unsupported, run_dir=run_dir)
        kept = {t.id for t in tasks}
        set_ids = {name: [t.id for t in members if t.id in kept] for name, members in chosen.items()} \
            if eval_sets else {}
        eval_tasks = None
        if train and cfg.run.eval_set is not None:
            eval_tasks = {t.id: t for t in check_pool(pools.evaluation(cfg.run.eval_set), backend, judge,
                                                      policy=cfg.tasks.unsupported, run_dir=run_dir)}
    except ConfigError:
        close_now(backend.close(), executor.close())  # nothing started yet; leave nothing behind
        raise
    sampler = resolved.create("sampler", plugins) if train else None
    if sampler is not None:
        sampler.setup(tasks, seed=seed)
    segmenter = resolved.create("segmenter", plugins)
    trainer = resolved.create("trainer", plugins, model=model, algorithm=cfg.algorithm, seed=seed,
                              objective="grpo") if train else None
    engine = resolved.create("rollout", plugins, model=model, seed=seed)
    deps = EpisodeDeps(
        backend=backend, engine=engine, renderer=model.renderer(), segmenter=segmenter, judge=judge,
        settings=settings_from(resolved),
    )
    return Components(model, backend, sampler, segmenter, trainer, engine, executor, {t.id: t for t in tasks}, deps,
                      eval_tasks, set_ids)




def close_now(*closing: Any) -> None:
    """Run ``closing`` coroutines to completion from synchronous code, inside a running event loop or not."""
    async def all_of() -> None:
        await asyncio.gather(*closing, return_exceptions=True)

    worker = threading.Thread(target=lambda: asyncio.run(all_of()))
    worker.start()
    worker.join()


class TaskPools:
    """The training pool (``tasks.paths``) and the evaluation sets of a config, each loaded once, on demand."""

    def __init__(self, section: TasksSection, *, base_dir: Path | None, convert: Any, seed: int) -> None:
        self.section, self.base_dir, self.convert, self.seed = section, base_dir, convert, seed
        self.sets = section.evaluation_sets()
        self._loaded: dict[str | None, list[Task]] = {}

    def training(self) -> list[Task]:
        if None not in self._loaded:
            s = self.section
            tasks = load_tasks(s.paths, base_dir=self.base_dir, convert=self.convert, include=s.include,
                               domains=s.domains)
            if not tasks:
                raise_empty(s.paths)
            self._loaded[None] = tasks
        return self._loaded[None]

    def evaluation(self, name: str) -> list[Task]:
        if name not in self.sets:
            known = ", ".join(self.sets) or "none: add tasks.eval_sets (or tasks.eval_paths)"
            raise ConfigError([f"evaluation set {name!r} is not configured; the sets are: {known}"])
        if name not in self._loaded:
            spec = self.sets[name]
            tasks = load_tasks(spec.paths, base_dir=self.base_dir, convert=self.convert,
                               domains=self.section.domains)
            if not tasks:
                raise_empty(spec.paths, where=f"tasks.eval_sets.{name}.paths")
            if spec.sample is not None and spec.sample < len(tasks):
                import numpy as np

                picks = np.random.default_rng([self.seed, len(tasks)]).choice(len(tasks), spec.sample, replace=False)
                tasks = [tasks[i] for i in sorted(picks.tolist())]
            self._loaded[name] = tasks
        return self._loaded[name]

    def check(self, only: str | None = None) -> None:
        """Every evaluation set (or ``only`` that one) must be disjoint from the training pool (core/runtime/splits.py)."""
        names = [n for n in ([only] if only is not None else self.sets) if not self.sets[n].training]
        if not names:
            return
        check_splits({t.id: t for t in self.training()},
                     {n: {t.id: t for t in self.evaluation(n)} for n in names})


def raise_empty(paths: list[str], where: str = "tasks.paths") -> None:
    raise ConfigError([f"{where}: no tasks found in {paths or '(no paths given)'}; point it at task JSON "
                       "files or directories, e.g. package:environments.tasks/osworld"])
