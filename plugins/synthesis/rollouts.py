"""Recorded rollouts, the input of trajectory-guided synthesis.

A rollout file is JSON Lines, one trajectory per line::

    {"trajectory_id": "it000003-t0001-r02", "task_id": "calc-sum-total-row",
     "success": false, "reward": 0.0, "status": "completed",
     "turns": [{"index": 0, "response_text": "...", "actions": [<core.types.Action JSON>, ...],
                "feedback": "text the agent saw next (may be null)", "parse_error": null,
                "screenshot": "shots/it000003-t0001-r02-00.png"}, ...]}

``screenshot`` (optional) is a PNG path relative to the file. The training
loop writes exactly this shape (``core.runtime.metrics.trajectory_record``, into
``<run_dir>/rollouts/iter_NNNNNN.jsonl``; screenshots with
``run.save_screenshots: true``); ``judgement.score`` stands in for ``success`` when that key is
missing. Per-task pass rates come from a JSON object ``{task_id: rate}``, or
are computed from the rollouts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from core.errors import ConfigError


@dataclass
class RecordedStep:
    index: int
    response: str
    actions: list[dict[str, Any]] = field(default_factory=list)
    feedback: str | None = None
    parse_error: str | None = None
    screenshot: Path | None = None

    def to_prompt(self) -> dict[str, Any]:
        return {"index": self.index, "response": self.response, "actions": self.actions,
                "feedback": self.parse_error and f"unparsable: {self.parse_error}" or self.feedback}


@dataclass
class RecordedRollout:
    trajectory_id: str
    task_id: str
    success: bool
    steps: list[RecordedStep]


def _success(line: Mapping[str, Any]) -> bool:
    if "success" in line:
        return bool(line["success"])
    judgement = line.get("judgement") or {}
    return float(judgement.get("score", 0.0)) >= 1.0 - 1e-9 and judgement.get("status", "ok") == "ok"


def load_rollouts(path: str | Path) -> list[RecordedRollout]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError([f"synthesis.proposer.options.rollouts: {path} does not exist"])
    rollouts = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            steps = []
            for turn in line.get("turns", []):
                observation = turn.get("observation") or {}
                shot = turn.get("screenshot")
                steps.append(RecordedStep(
                    index=int(turn.get("index", len(steps))),
                    response=str(turn.get("response_text", turn.get("response", ""))),
                    actions=list(turn.get("actions") or []),
                    feedback=turn.get("feedback", observation.get("text") if isinstance(observation, dict) else None),
                    parse_error=turn.get("parse_error"),
                    screenshot=(path.parent / shot) if shot else None,
                ))
            rollouts.append(RecordedRollout(str(line.get("trajectory_id", f"line{number}")), str(line["task_id"]),
                                            _success(line), steps))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError([f"{path}:{number}: not a recorded rollout ({type(exc).__name__}: {exc}); "
                               "see plugins/synthesis/rollouts.py for the format"]) from None
    return rollouts


def pass_rates(rollouts: Iterable[RecordedRollout], rates_file: str | Path | None = None) -> dict[str, float]:
    """``{task_id: pass rate}`` from ``rates_file`` when given, else from the rollouts."""
    if rates_file is not None:
        path = Path(rates_file).expanduser()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError([f"synthesis.proposer.options.pass_rates: {path}: {exc}"]) from None
        if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
            raise ConfigError([f"synthesis.proposer.options.pass_rates: {path} must be a JSON object "
                               "{task_id: rate in [0, 1]}"])
        return {str(k): float(v) for k, v in data.items()}
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for rollout in rollouts:
        outcomes[rollout.task_id].append(rollout.success)
    return {task_id: sum(v) / len(v) for task_id, v in outcomes.items()}
