"""Candidate tasks in the paper's Table 5 schema, and turning LLM replies into them.

A synthesized task is an OSWorld task JSON plus the Table 5 fields::

    {
      "id": "verigen-<uuid>",                 # stable across repairs
      "new_id": "verigen-<uuid>_<augmentation>",
      "snapshot": "<app>", "instruction": "...", "source": "...",
      "config": [setup steps], "related_apps": ["<app>"],
      "evaluator": {"postconfig": [...], "func": "check_...", "result": {"type": "get_...", ...},
                    "expected": {...}, "options": {...}, "conj": "and", "code": "<getter + metric source>"},
      "metadata": {"explanation", "difficulty", "estimated_steps", "augmentation", "app", "parents",
                   "getters", "metrics", "repairs"},
      "validation": {"rule_pass", "llm_judge_pass", "llm_judge_score", "execution_pass", "executable",
                     "initial_score", "final_score", "repairs", "suggestions"}
    }

The LLM writes the task fields plus ``explanation``, ``difficulty`` and
``estimated_steps`` at the top level; :func:`task_from_reply` moves them into
``metadata`` and assigns identity.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Iterable, Mapping

from pydantic import ValidationError

from core.types import Task

from plugins.synthesis.llm import ReplyFormatError

DIFFICULTIES = ("easy", "medium", "hard")
#: keys the LLM writes; anything else it adds is dropped (identity and validation are ours)
REPLY_KEYS = ("instruction", "snapshot", "source", "config", "related_apps", "evaluator", "explanation",
              "difficulty", "estimated_steps")
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The JSON value in a reply: a fenced ```json block, else the outermost ``{...}``."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start:end + 1])
    if not candidates:
        raise ReplyFormatError("the reply holds no JSON object; answer with one ```json fenced object")
    error = None
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            error = exc
    raise ReplyFormatError(f"the JSON in the reply does not parse: {error}")


def extract_object(text: str, required: Iterable[str] = ()) -> dict[str, Any]:
    value = extract_json(text)
    if not isinstance(value, dict):
        raise ReplyFormatError(f"expected a JSON object, got {type(value).__name__}")
    missing = [key for key in required if key not in value]
    if missing:
        raise ReplyFormatError(f"the JSON object lacks {', '.join(missing)}")
    return value


def new_task_id() -> str:
    return f"verigen-{uuid.uuid4().hex[:16]}"


def _problems(data: Mapping[str, Any]) -> list[str]:
    problems = []
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        problems.append("'instruction' must be a non-empty string")
    evaluator = data.get("evaluator")
    if not isinstance(evaluator, Mapping) or "func" not in evaluator:
        problems.append("'evaluator' must be an object with at least 'func'")
    if data.get("difficulty") not in DIFFICULTIES:
        problems.append(f"'difficulty' must be one of {', '.join(DIFFICULTIES)}")
    steps = data.get("estimated_steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        problems.append("'estimated_steps' must be a positive integer")
    if not isinstance(data.get("config", []), list):
        problems.append("'config' must be a list of setup steps {type, parameters}")
    return problems


def task_from_reply(
    data: Mapping[str, Any],
    *,
    app: str,
    origin: str,
    parents: Iterable[str] = (),
    task_id: str | None = None,
    previous: Task | None = None,
) -> Task:
    """Validate a proposer/fixer reply and build the Table 5 task; raises :class:`ReplyFormatError`.

    ``previous`` (for repairs) supplies identity and metadata that the reply
    cannot change.
    """
    problems = _problems(data)
    if problems:
        raise ReplyFormatError("; ".join(problems))
    task_id = previous.id if previous is not None else (task_id or new_task_id())
    metadata = dict(previous.metadata) if previous is not None else {"augmentation": origin, "app": app,
                                                                      "parents": list(parents), "repairs": 0}
    metadata.update(explanation=str(data.get("explanation", "")), difficulty=data["difficulty"],
                    estimated_steps=data["estimated_steps"])
    raw: dict[str, Any] = {key: data[key] for key in REPLY_KEYS[:6] if key in data}
    raw.setdefault("snapshot", app)
    raw.setdefault("related_apps", [app])
    raw.setdefault("source", "verigen")
    raw.update(id=task_id, new_id=f"{task_id}_{metadata['augmentation']}", metadata=metadata)
    try:
        task = Task.model_validate(raw)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ReplyFormatError(f"the task does not fit the schema: {details}") from None
    task.metadata["getters"] = sorted(getter_types(task))
    task.metadata["metrics"] = list(task.evaluator.funcs)
    return task


def getter_types(task: Task) -> set[str]:
    configs: list[Any] = []
    for value in (task.evaluator.result, task.evaluator.expected):
        configs.extend(value if isinstance(value, list) else [value])
    return {str(c["type"]) for c in configs if isinstance(c, Mapping) and "type" in c}


def reply_view(task: Task) -> dict[str, Any]:
    """The fields an LLM sees and edits (no identity, no validation record)."""
    data = task.to_json()
    view = {key: data[key] for key in REPLY_KEYS[:6] if key in data}
    for key in ("explanation", "difficulty", "estimated_steps"):
        if key in task.metadata:
            view[key] = task.metadata[key]
    return view


def task_json(task: Task) -> dict[str, Any]:
    return task.to_json()
