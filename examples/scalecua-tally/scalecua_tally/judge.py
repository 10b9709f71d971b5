"""The tally's judge, as a getter and a metric registered by name (OSWorld's shape: the task's evaluator names
``result: {type: tally_value}`` and ``func: tally_equals``; ScaleCUA checks every name against the registries
before a run starts)."""

from __future__ import annotations

from typing import Any, Mapping


async def tally_value(env: Any, config: Mapping[str, Any]) -> int:
    """Getter: the value the tally ``env`` shows now."""
    return int(env.app.value)


def tally_equals(result: Any, expected: Any, *, value: int) -> float:
    """Metric: 1.0 when the tally shows ``value`` (the evaluator's ``options``), else 0.0."""
    return 1.0 if result == value else 0.0
