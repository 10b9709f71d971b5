"""Blocking work (a train step, a weight push) run off the event loop, safely under cancellation."""

from __future__ import annotations

import asyncio
from typing import Any


async def in_thread(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a worker thread; a cancellation waits for it to end (a thread cannot be stopped, and
    nothing may close the trainer or the engine under it), then propagates."""
    job = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        await asyncio.wait({job})
        raise
