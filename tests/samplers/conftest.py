"""Fixtures for sampler tests: real :class:`core.types.Task` pools."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest

from core.types import Task


def build_tasks(count: int, metadata: Sequence[dict[str, Any]] | None = None, prefix: str = "task") -> list[Task]:
    return [
        Task(id=f"{prefix}-{i:05d}", instruction=f"do thing {i}", evaluator={"func": "exact_match"},
             metadata=dict(metadata[i]) if metadata is not None else {})
        for i in range(count)
    ]


@pytest.fixture
def make_tasks() -> Callable[..., list[Task]]:
    """``make_tasks(n, metadata=None)``: n OSWorld-format tasks with ids ``task-00000``..."""
    return build_tasks
