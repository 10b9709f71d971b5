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

import threading
from typing import Mapping

from plugins.serving.protocol import INSTANCE_HEADER


class ServerIdentity:
    """The process behind ``base_url`` as this engine last knew it (thread-safe: pushes run off the loop)."""

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
