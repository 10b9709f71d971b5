"""Task synthesis: the VeriGen roles and the loop that drives them."""

from __future__ import annotations

import abc
from typing import Any, ClassVar


# ---------------------------------------------------------------------------
# Task synthesis
# ---------------------------------------------------------------------------


class SynthesizerRole(abc.ABC):
    """An LLM agent with one job in VeriGen (proposer, judger, checker or fixer)."""

    role: ClassVar[str]


class SynthesisPipeline(abc.ABC):
    """The task-synthesis loop (VeriGen's): drives the configured roles over desktops and a task store."""

    @abc.abstractmethod
    async def run(self, progress: Any = None) -> dict[str, Any]:
        """Synthesize until the budget is spent; return the run's summary (counts, exported paths, usage)."""

    async def close(self) -> None:
        return None
