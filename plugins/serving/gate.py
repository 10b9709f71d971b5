"""Admission of generations: a paused server, or one whose weights are changing, holds new requests."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class Gate:
    """Admission of generations: paused or updating servers hold new requests until resumed."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.paused = False
        self._exclusive = False
        self._in_flight = 0

    @contextmanager
    def generation(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self.paused and not self._exclusive)
            self._in_flight += 1
        try:
            yield
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """No generation runs inside (weights change here)."""
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._in_flight == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def pause(self) -> None:
        with self._cond:
            self.paused = True
            self._cond.wait_for(lambda: self._in_flight == 0)

    def resume(self) -> None:
        with self._cond:
            self.paused = False
            self._cond.notify_all()
