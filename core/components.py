"""The live components of a run, created from the config's slots, and the task pool they run on.

:func:`build_components` creates the model, the environment backend, the task pool (checked up front by
:mod:`core.task_check`: a task nothing here can set up or judge is a config error before any desktop starts),
the judge services, sampler, segmenter, trainer and rollout engine, and the episode dependencies.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from core.config import ResolvedConfig
from core.episode import EpisodeDeps, EpisodeSettings
from core.errors import ConfigError
from core.interfaces import JudgeServices
from core.pluginmanager import Plugins
from core.task_check import check_pool
from core.tasks import load_tasks
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
    resolved: ResolvedConfig, plugins: Plugins, run_dir: Path, *, train: bool = True, task_paths: list[str] | None = None
) -> Components:
    """Create every component of an RL run. ``train=False`` (evaluation) skips sampler and trainer."""
    cfg = resolved.config
    seed = cfg.run.seed
    paths = cfg.tasks.paths if task_paths is None else task_paths
    model = resolved.create("model", plugins, run_dir=run_dir)
    backend = resolved.create("environment", plugins, run_dir=run_dir)
    base_dir = resolved.source.parent if resolved.source else None
    tasks = load_tasks(paths, base_dir=base_dir, convert=backend.convert_task,
                       include=cfg.tasks.include if task_paths is None else None, domains=cfg.tasks.domains)
    if not tasks:
        raise_empty(paths)
    executor = resolved.create("judge", plugins)
    judge = JudgeServices.of(plugins, executor)
    try:
        tasks = check_pool(tasks, backend, judge, policy=cfg.tasks.unsupported, run_dir=run_dir)
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
    return Components(model, backend, sampler, segmenter, trainer, engine, executor, {t.id: t for t in tasks}, deps)




def close_now(*closing: Any) -> None:
    """Run ``closing`` coroutines to completion from synchronous code, inside a running event loop or not."""
    async def all_of() -> None:
        await asyncio.gather(*closing, return_exceptions=True)

    worker = threading.Thread(target=lambda: asyncio.run(all_of()))
    worker.start()
    worker.join()


def raise_empty(paths: list[str]) -> None:
    raise ConfigError([f"tasks.paths: no tasks found in {paths or '(no paths given)'}; point it at task JSON "
                       "files or directories, e.g. package:environments.tasks/osworld"])
