"""The Ray actors' classes (plain classes: :mod:`plugins.ray.run` turns them into actors).

Each worker rebuilds the components it owns from the same validated config the
driver loaded, so a worker on another host needs only the installed package
and the YAML's content (sent as a dict), never the driver's objects.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path
from typing import Any, Mapping

import structlog

from core.interfaces import GenerationRequest, JudgeServices
from core.types import Action, Task

log = structlog.get_logger(__name__)


def _resolve(raw: Mapping[str, Any], source: str | None) -> tuple[Any, Any]:
    from core.config import PluginsSection, validate
    from core.pluginmanager import load_plugins

    section = PluginsSection.model_validate(raw.get("plugins") or {})
    plugins = load_plugins(disable=section.disable, require=section.require, only=section.only)
    return validate(dict(raw), plugins, source=Path(source) if source else None), plugins


class TrainerWorker:
    """One trainer rank. Ranks of a multi-rank backend (``torch-fsdp``) find each other through rank 0's address."""

    def __init__(self, raw: Mapping[str, Any], source: str | None, rank: int, world_size: int) -> None:
        self.raw, self.source, self.rank, self.world_size = raw, source, rank, world_size
        self.trainer: Any = None

    def address(self) -> tuple[str, int]:
        """This host's address and a free port, for the process group's rendezvous (asked of rank 0)."""
        import ray

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = int(probe.getsockname()[1])
        return ray.util.get_node_ip_address(), port

    def setup(self, master_addr: str, master_port: int) -> int:
        if self.world_size > 1:
            os.environ.update(RANK=str(self.rank), WORLD_SIZE=str(self.world_size), LOCAL_RANK="0",
                              MASTER_ADDR=master_addr, MASTER_PORT=str(master_port))
        resolved, plugins = _resolve(self.raw, self.source)
        cfg = resolved.config
        model = resolved.create("model", plugins, run_dir=None)
        self.trainer = resolved.create("trainer", plugins, model=model, algorithm=cfg.algorithm, seed=cfg.run.seed)
        return self.rank

    def train_step(self, segments: list[Any], kl_limit: float | None = None) -> dict[str, float]:
        return self.trainer.train_step(segments, kl_limit)

    def eval_step(self, segments: list[Any]) -> dict[str, float]:
        return self.trainer.eval_step(segments)

    def recompute_logprobs(self, segments: list[Any], reference: bool = False) -> list[list[float]]:
        return self.trainer.recompute_logprobs(segments, reference=reference)

    def load_weights(self, path: str) -> None:
        self.trainer.load_weights(Path(path))

    def export_weights(self, bucket_bytes: int) -> list[list[tuple[str, Any]]]:
        """Every rank iterates (gathers are collectives); rank 0 returns the buckets as CPU tensors."""
        buckets = []
        for bucket in self.trainer.export_weights(bucket_bytes):
            if self.rank == 0:
                buckets.append([(name, tensor.detach().to("cpu", copy=True)) for name, tensor in bucket])
        return buckets

    def save(self, path: str) -> None:
        self.trainer.save(Path(path))

    def load(self, path: str) -> None:
        self.trainer.load(Path(path))

    def close(self) -> None:
        if self.trainer is not None:
            self.trainer.close()


class RolloutWorker:
    """One rollout engine (async actor: concurrent ``generate`` calls batch inside the engine)."""

    def __init__(self, raw: Mapping[str, Any], source: str | None, index: int) -> None:
        resolved, plugins = _resolve(raw, source)
        cfg = resolved.config
        model = resolved.create("model", plugins, run_dir=None)
        self.engine = resolved.create("rollout", plugins, model=model, seed=cfg.run.seed + index)
        self.index = index

    async def generate(self, request: GenerationRequest) -> Any:
        return await self.engine.generate(request)

    async def begin_weight_update(self, version: int) -> None:
        self.engine.begin_weight_update(version)

    async def update_weights(self, bucket: list[tuple[str, Any]]) -> int:
        self.engine.update_weights(bucket)
        return len(bucket)

    async def commit_weight_update(self) -> None:
        self.engine.commit_weight_update()

    async def abort_weight_update(self) -> None:
        self.engine.abort_weight_update()

    async def close(self) -> None:
        await self.engine.close()


class EnvironmentWorker:
    """A pool of environments on one host, driven remotely by :class:`plugins.ray.proxies.RayEnvironmentPool`.

    Judging happens here, next to the desktops: the judge executor and the
    getter/metric registries are this worker's own.
    """

    def __init__(self, raw: Mapping[str, Any], source: str | None, index: int, work_dir: str | None) -> None:
        resolved, plugins = _resolve(raw, source)
        run_dir = Path(work_dir) / f"env-worker-{index}" if work_dir else None
        if run_dir is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
        self.backend = resolved.create("environment", plugins, run_dir=run_dir)
        executor = resolved.create("judge", plugins) if "judge" in resolved.components else None
        self.judge = JudgeServices.of(plugins, executor)
        self.index = index
        #: this process's incarnation: Ray restarts a worker that died (``max_restarts``) with an empty pool, and
        #: a key handed out before the restart must never name an environment of the new one
        self.incarnation = uuid.uuid4().hex[:8]
        self.envs: dict[str, Any] = {}

    def _env(self, key: str) -> Any:
        env = self.envs.get(key)
        if env is None:
            raise KeyError(f"environment worker {self.index} ({self.incarnation}) holds no environment {key}: the "
                           "worker restarted since it was acquired (its desktops are gone), or it was released")
        return env

    async def acquire(self) -> dict[str, Any]:
        env = await self.backend.acquire()
        key = f"w{self.index}-{self.incarnation}/{env.env_id}"
        self.envs[key] = env
        return {"key": key, "env_id": key, "screen_size": tuple(env.screen_size), "isolated": bool(env.isolated)}

    async def release(self, key: str, discard: bool) -> None:
        env = self.envs.pop(key, None)
        if env is not None:
            await self.backend.release(env, discard=discard)

    async def reset(self, key: str, task: Task) -> Any:
        return await self._env(key).reset(task)

    async def step(self, key: str, action: Action) -> Any:
        return await self._env(key).step(action)

    async def observe(self, key: str) -> Any:
        return await self._env(key).observe()

    async def healthy(self, key: str) -> bool:
        return await self._env(key).healthy()

    async def evaluate(self, key: str, task: Task, last_action: Action | None) -> Any:
        return await self.backend.evaluate(self._env(key), task, judge=self.judge, last_action=last_action)

    # the agent protocol, for drivers that cannot build the environment kind locally
    def system_prompt(self, task: Task) -> str:
        return self.backend.system_prompt(task)

    def parse_response(self, text: str) -> list[Action]:
        return self.backend.parse_response(text)

    def format_response(self, actions: list[Action]) -> str:
        return self.backend.format_response(actions)

    def convert_task(self, raw: Mapping[str, Any]) -> Task:
        return self.backend.convert_task(raw)

    async def close(self) -> None:
        for key in list(self.envs):
            await self.release(key, discard=True)
        if self.judge.executor is not None:
            await self.judge.executor.close()
        await self.backend.close()
