"""The trainer's weights on the rollout engine: every push of a run, and the push again after a server restart.

A run pushes the trainer's weights to its engine as version ``v`` (the iterations they reflect) at its start,
after a resume and after every train step. An engine in front of a server (``openai-compatible``) can lose
them: the server process dies and comes back with the weights it loaded at start. The engine notices (the
answering server is another process) and raises :class:`core.interfaces.EngineRestarted` from ``generate``;
the episode awaits :meth:`EngineWeights.restore`, which pushes the trainer's weights of the last pushed version
again, once for every episode that noticed, and re-issues its request.

The lock keeps a restore from reading the trainer between a train step and the push that follows it (the
asynchronous pipeline steps while episodes run): a restore waits, and after the push there is nothing left
to restore.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from core.runtime.threads import in_thread
from core.weight_sync import WeightSyncError, sync_weights

log = structlog.get_logger(__name__)

#: sessions a push tries before it gives up (the server may die again while it loads)
PUSH_ATTEMPTS = 3


class EngineWeights:
    """Pushes ``trainer``'s weights to ``engine`` and restores them after the engine's server restarted."""

    def __init__(self, trainer: Any, engine: Any) -> None:
        self.trainer, self.engine = trainer, engine
        #: the version last pushed (None: nothing pushed yet)
        self.version: int | None = None
        #: pushes made again after a server restart, over the run
        self.restores = 0
        self._lock: asyncio.Lock | None = None

    @property
    def lock(self) -> asyncio.Lock:
        """Held while the trainer is ahead of the engine (train steps, then their push) and during a restore."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def push(self, version: int) -> int:
        """Push the trainer's weights as ``version`` (blocking); returns the tensors sent. A session that fails
        (the server died during it) is aborted and made again, whole, up to :data:`PUSH_ATTEMPTS` times."""
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            try:
                sent = sync_weights(self.trainer, self.engine, version)
            except WeightSyncError as exc:
                if attempt == PUSH_ATTEMPTS:
                    raise WeightSyncError(f"pushing the weights of version {version} failed {attempt} times: "
                                          f"{exc}") from exc
                log.warning("pushing the weights failed; pushing them again", version=version, attempt=attempt,
                            error=str(exc))
                continue
            self.version = version
            return sent
        raise AssertionError("unreachable")

    async def push_off_loop(self, version: int) -> int:
        """:meth:`push` in a worker thread (episodes in flight go on meanwhile)."""
        return await in_thread(self.push, version)

    async def restore(self) -> None:
        """Push the last pushed version again if the engine lost it; episodes that all noticed push once."""
        async with self.lock:
            if self.version is None or self.engine.weight_version == self.version:
                return  # never pushed (the engine serves its own weights), or restored by another episode
            await self.push_off_loop(self.version)
            self.restores += 1
            log.warning("rollout server restarted: the trainer's weights were pushed again", version=self.version,
                        restores=self.restores)
