"""Driver-side stand-ins for the components that live in Ray actors.

They implement the same interfaces (:class:`~core.interfaces.TrainerBackend`,
:class:`~core.interfaces.RolloutEngine`, :class:`~core.interfaces.EnvironmentBackend`),
so :mod:`core.runtime.loop` runs unchanged on top of them.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import structlog

from core.interfaces import (
    Environment,
    EnvironmentBackend,
    Generation,
    GenerationRequest,
    JudgeServices,
    RolloutEngine,
    TrainerBackend,
)
from core.types import Action, Judgement, Observation, Segment, Task
from core.weight_sync import WeightSession

log = structlog.get_logger(__name__)

#: how long an acquire waits for an environment worker that Ray is restarting (its process died)
RESTART_WAIT_S = 120.0


def _ray() -> Any:
    import ray

    return ray


class RayTrainer(TrainerBackend):
    """All trainer ranks make every call (SPMD); rank 0 answers.

    Exported weights come to the driver as CPU tensors and go once into the object
    store for every rollout worker: simple, and fine up to mid-size models; large
    models should push weights trainer-to-engine over vLLM's NCCL weight transfer.
    Checkpoints are written by the trainer workers at the driver's run-directory
    path: on a cluster, put ``run.output_dir`` on a shared filesystem.
    """

    def __init__(self, workers: Sequence[Any]) -> None:
        self.workers = list(workers)

    def _all(self, method: str, *args: Any) -> list[Any]:
        ray = _ray()
        refs = [ray.put(a) for a in args]  # one copy in the object store, shared by every rank
        return ray.get([getattr(w, method).remote(*refs) for w in self.workers])

    def train_step(self, segments: Sequence[Segment], kl_limit: float | None = None) -> dict[str, float]:
        return self._all("train_step", list(segments), kl_limit)[0]

    def eval_step(self, segments: Sequence[Segment]) -> dict[str, float]:
        return self._all("eval_step", list(segments))[0]

    def recompute_logprobs(self, segments: Sequence[Segment], *, reference: bool = False) -> list[list[float]]:
        return self._all("recompute_logprobs", list(segments), reference)[0]

    def load_weights(self, path: Path) -> None:
        self._all("load_weights", str(path))

    def export_weights(self, bucket_bytes: int = 256 << 20) -> Iterator[list[tuple[str, Any]]]:
        return iter(self._all("export_weights", bucket_bytes)[0])

    def save(self, path: Path) -> None:
        self._all("save", str(path))

    def load(self, path: Path) -> None:
        self._all("load", str(path))

    def close(self) -> None:
        self._all("close")


class RayRolloutEngine(RolloutEngine):
    """Requests go to the rollout worker with the fewest in flight; weight buckets go to every worker."""

    def __init__(self, workers: Sequence[Any]) -> None:
        self.workers = list(workers)
        self.in_flight = [0] * len(self.workers)
        self._weights = WeightSession("ray rollout engines")

    async def generate(self, request: GenerationRequest) -> Generation:
        index = min(range(len(self.workers)), key=lambda i: (self.in_flight[i], i))
        self.in_flight[index] += 1
        try:
            return await self.workers[index].generate.remote(request)
        finally:
            self.in_flight[index] -= 1

    @property
    def weight_version(self) -> int | None:
        return self._weights.version

    def begin_weight_update(self, version: int) -> None:
        self._weights.begin(version)
        try:
            _ray().get([w.begin_weight_update.remote(version) for w in self.workers])
        except BaseException:
            self.abort_weight_update()
            raise

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        self._weights.bucket()
        ray = _ray()
        bucket = ray.put(list(weights))
        ray.get([w.update_weights.remote(bucket) for w in self.workers])

    def commit_weight_update(self) -> None:
        self._weights.bucket()
        _ray().get([w.commit_weight_update.remote() for w in self.workers])
        self._weights.commit()

    def abort_weight_update(self) -> None:
        """Every worker ends its session (those that never began one ignore it)."""
        self._weights.abort()
        _ray().get([w.abort_weight_update.remote() for w in self.workers])

    async def close(self) -> None:
        await asyncio.gather(*(w.close.remote() for w in self.workers), return_exceptions=True)


class RemoteEnvironment(Environment):
    """An environment held by an environment worker; calls travel to it."""

    isolated = False
    home_dir = None
    client = None

    def __init__(self, worker: Any, info: dict[str, Any]) -> None:
        self.worker = worker
        self.key = info["key"]
        self.env_id = info["env_id"]
        self.screen_size = tuple(info["screen_size"])
        self.isolated = info["isolated"]

    async def reset(self, task: Task) -> Observation:
        return await self.worker.reset.remote(self.key, task)

    async def step(self, action: Action) -> Observation:
        return await self.worker.step.remote(self.key, action)

    async def observe(self) -> Observation:
        return await self.worker.observe.remote(self.key)

    async def healthy(self) -> bool:
        return await self.worker.healthy.remote(self.key)


class RemoteProtocol:
    """The agent protocol answered by an environment worker (when the driver cannot build the kind locally).

    Each call is a short blocking round trip; a local protocol instance is preferred.
    """

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def system_prompt(self, task: Task) -> str:
        return _ray().get(self.worker.system_prompt.remote(task))

    def parse_response(self, text: str) -> list[Action]:
        return _ray().get(self.worker.parse_response.remote(text))

    def format_response(self, actions: Sequence[Action]) -> str:
        return _ray().get(self.worker.format_response.remote(list(actions)))

    def convert_task(self, raw: Any) -> Task:
        return _ray().get(self.worker.convert_task.remote(raw))

    async def close(self) -> None:
        return None


class RayEnvironmentPool(EnvironmentBackend):
    """Environment pools of many workers (hosts) seen as one backend.

    ``protocol`` is a local instance of the same environment kind, used only for
    its agent protocol (system prompt, response parsing, task format): it never
    starts an environment. Each worker holds at most ``capacity`` environments
    at once; ``acquire`` rotates over the workers with room.
    """

    def __init__(self, workers: Sequence[Any], protocol: EnvironmentBackend | RemoteProtocol, capacity: int) -> None:
        self.workers = list(workers)
        self.protocol = protocol
        self.capacity = capacity
        self._held = [0] * len(self.workers)
        self._order = itertools.cycle(range(len(self.workers)))
        self._free: asyncio.Condition | None = None
        self._owner: dict[str, int] = {}

    def _condition(self) -> asyncio.Condition:
        if self._free is None:
            self._free = asyncio.Condition()
        return self._free

    async def acquire(self) -> Environment:
        cond = self._condition()
        async with cond:
            while True:
                for _ in range(len(self.workers)):
                    index = next(self._order)
                    if self._held[index] < self.capacity:
                        self._held[index] += 1
                        break
                else:
                    await cond.wait()
                    continue
                break
        try:
            info = await self._acquire_on(index)
        except BaseException:
            await self._give_back(index)
            raise
        self._owner[info["key"]] = index
        return RemoteEnvironment(self.workers[index], info)

    async def _acquire_on(self, index: int) -> dict[str, Any]:
        """An environment of worker ``index``, waiting (up to :data:`RESTART_WAIT_S`) while Ray restarts it."""
        ray = _ray()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_WAIT_S
        while True:
            try:
                return await self.workers[index].acquire.remote()
            except ray.exceptions.ActorUnavailableError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def _give_back(self, index: int) -> None:
        cond = self._condition()
        async with cond:
            self._held[index] -= 1
            cond.notify()

    async def release(self, env: Environment, *, discard: bool = False) -> None:
        assert isinstance(env, RemoteEnvironment)
        index = self._owner.pop(env.key)
        try:
            await env.worker.release.remote(env.key, discard)
        finally:
            await self._give_back(index)

    async def close(self) -> None:
        await asyncio.gather(*(w.close.remote() for w in self.workers), return_exceptions=True)
        await self.protocol.close()

    def system_prompt(self, task: Task) -> str:
        return self.protocol.system_prompt(task)

    def parse_response(self, text: str) -> list[Action]:
        return self.protocol.parse_response(text)

    def format_response(self, actions: Sequence[Action]) -> str:
        return self.protocol.format_response(actions)

    def convert_task(self, raw: Any) -> Task:
        return self.protocol.convert_task(raw)

    def unsupported_steps(self, task: Task) -> list[str]:
        return self.protocol.unsupported_steps(task)

    async def evaluate(self, env: Environment, task: Task, *, judge: JudgeServices,
                       last_action: Action | None) -> Judgement:
        """Judged on the environment's worker, with that worker's executor and registries (next to the desktop)."""
        assert isinstance(env, RemoteEnvironment)
        return await env.worker.evaluate.remote(env.key, task, last_action)
