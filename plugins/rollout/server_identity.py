"""Which server process answers a remote engine, and whether it still holds the weights the trainer pushed.

A server that restarts (killed, crashed, rescheduled) comes back with the weights it loaded at start. Its
answers look the same as before, so an engine that only counted on its pushes would tag generations of the
base model with the trainer's weight version. Two ways to see a restart:

* ``plugins.serving`` names its process in every answer (:data:`plugins.serving.protocol.INSTANCE_HEADER`);
  another name than the one the weights were pushed to is a restart.
* A server without that header (``vllm serve``): a refused connection means no process listened, so the
  next answer after one is taken for a restarted server's (a refusal without a restart costs one push).

A generation checks the answering process against the one it started with; weight pushes adopt whichever
process they reach, because a push after a restart is what restores the weights.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any, Mapping

import structlog

from core.interfaces import EngineRestarted
from plugins.serving.protocol import INSTANCE_HEADER

log = structlog.get_logger(__name__)

#: the server process the current task's generation started with (each episode is an asyncio task of its own)
_STARTED_WITH: contextvars.ContextVar[str | None] = contextvars.ContextVar("started_with", default=None)


class ServerIdentity:
    """The process behind a server URL as an engine last knew it (thread-safe: pushes run off the loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._instance: str | None = None
        self._refusals = 0  # connection refusals seen from a server that does not name its process

    @property
    def instance(self) -> str | None:
        return self._instance

    @property
    def refusals(self) -> int:
        return self._refusals

    def refused(self) -> None:
        """A connection was refused: no process listened."""
        with self._lock:
            self._refusals += 1

    def answered(self, headers: Mapping[str, str]) -> str:
        """The process that sent an answer with ``headers`` (a name of our own for a server without the header)."""
        named = headers.get(INSTANCE_HEADER)
        with self._lock:
            return named if named is not None else f"unnamed-{self._refusals}"

    def adopt(self, instance: str) -> bool:
        """Take ``instance`` as the server's process; True when it is another than the one known."""
        with self._lock:
            changed = self._instance is not None and instance != self._instance
            self._instance = instance
            return changed


class RestartWatch:
    """A remote engine's view of its server's restarts: ``weights`` (a :class:`RemoteWeightSync`) is forgotten
    when the server that held them is gone, and generation is refused until a push commits again."""

    def __init__(self, base_url: str, weights: Any) -> None:
        self.base_url = base_url
        self.weights = weights
        self.identity = ServerIdentity()
        #: the weight version a restarted server lost (None: nothing lost)
        self.lost: int | None = None

    def generation_starts(self) -> None:
        """Before a generation's first request: refuse while the weights are lost, note the process it meets."""
        if self.lost is not None:
            raise EngineRestarted(f"the rollout server at {self.base_url} restarted and lost the weights of "
                                  f"version {self.lost}: they must be pushed again", version=self.lost)
        _STARTED_WITH.set(self.identity.instance)

    def generation_answered(self, headers: Mapping[str, str]) -> None:
        """A generation's answer must come from the process it started with while pushed weights are in use."""
        instance = self.identity.answered(headers)
        started = _STARTED_WITH.get()
        if self.identity.instance is None:
            self.identity.adopt(instance)
            return
        if started is None or instance == started:
            return
        if self.lost is None and self.weights.version is None:  # never pushed: the server's own weights either way
            self.identity.adopt(instance)
            return
        if self.lost is None and self.identity.instance == started:  # the first to notice
            self.identity.adopt(instance)
            self._changed(instance)
        raise EngineRestarted(f"the rollout server at {self.base_url} restarted during a generation (process "
                              f"{instance}, not {started}); its answer is refused", version=self.lost)

    def push_answered(self, headers: Mapping[str, str]) -> None:
        """A weight-sync request reached the process in ``headers``: a push restores a restarted server."""
        instance = self.identity.answered(headers)
        if self.identity.adopt(instance):
            self._changed(instance)

    def committed(self) -> None:
        """A push committed: the server holds the trainer's weights again."""
        self.lost = None

    def _changed(self, instance: str) -> None:
        lost = self.weights.version
        self.weights.forget()
        if lost is not None:
            self.lost = lost
        log.warning("the rollout server restarted", server=self.base_url, instance=instance, lost_version=lost)
