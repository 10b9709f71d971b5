"""A live one-line progress display on a terminal (nothing when stderr is not a TTY)."""

from __future__ import annotations

import sys
import time
from typing import Any, Mapping, TextIO

from core.types import Trajectory


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.iteration = 0
        self.expected = 0
        self.done = 0
        self.successes = 0
        self.started = time.monotonic()
        self.last: Mapping[str, Any] = {}

    def _draw(self) -> None:
        if not self.enabled:
            return
        reward = self.last.get("reward/mean")
        tail = f" | last reward {reward:+.3f}" if isinstance(reward, float) else ""
        line = (f"iter {self.iteration + 1}/{self.total} | episodes {self.done}/{self.expected} "
                f"({self.successes} solved) | {time.monotonic() - self.started:6.0f}s{tail}")
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()

    def start_iteration(self, iteration: int, expected: int) -> None:
        self.iteration, self.expected, self.done, self.successes = iteration, expected, 0, 0
        self._draw()

    def episode_done(self, traj: Trajectory) -> None:
        self.done += 1
        self.successes += int(traj.success)
        self._draw()

    def end_iteration(self, metrics: Mapping[str, Any]) -> None:
        self.last = metrics
        self._draw()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
