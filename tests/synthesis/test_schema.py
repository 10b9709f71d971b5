"""Turning LLM replies into Table 5 tasks and verdicts: what is accepted, and the messages for what is not."""

from __future__ import annotations

import pytest

from plugins.synthesis.llm import ReplyFormatError
from plugins.synthesis.review import parse_verdict
from plugins.synthesis.schema import extract_json, reply_view, task_from_reply

from .helpers import file_task


def test_json_is_found_fenced_or_bare():
    assert extract_json('Sure!\n```json\n{"a": 1}\n```\nbye') == {"a": 1}
    assert extract_json('prefix {"a": {"b": 2}} suffix') == {"a": {"b": 2}}
    with pytest.raises(ReplyFormatError, match="holds no JSON object"):
        extract_json("no json here")
    with pytest.raises(ReplyFormatError, match="does not parse"):
        extract_json('```json\n{"a": 1,}\n```')


def test_task_from_reply_builds_table5_fields_and_keeps_identity_on_repair():
    data = {**file_task("Create ~/x.txt containing x."), "id": "llm-chosen", "validation": {"forged": True}}
    task = task_from_reply(data, app="os", origin="explore", parents=["p1"])
    assert task.id.startswith("verigen-") and task.model_extra["new_id"] == f"{task.id}_explore"
    assert "validation" not in task.model_extra  # the validation record is ours, never the LLM's
    assert task.metadata["difficulty"] == "easy" and task.metadata["estimated_steps"] == 3
    assert task.metadata["parents"] == ["p1"] and task.metadata["getters"] == ["get_os_file_text__a1b2"]
    assert set(reply_view(task)) == {"instruction", "snapshot", "source", "config", "related_apps", "evaluator",
                                     "explanation", "difficulty", "estimated_steps"}
    repaired = task_from_reply({**reply_view(task), "instruction": "Create ~/y.txt containing y."}, app="os",
                               origin="explore", previous=task)
    assert repaired.id == task.id and repaired.metadata["parents"] == ["p1"]


def test_every_schema_problem_is_named_at_once():
    with pytest.raises(ReplyFormatError) as info:
        task_from_reply({"instruction": "", "evaluator": {}, "difficulty": "trivial", "estimated_steps": 0,
                         "config": "none"}, app="os", origin="explore")
    message = str(info.value)
    for part in ("'instruction'", "'evaluator'", "'difficulty'", "'estimated_steps'", "'config'"):
        assert part in message
    with pytest.raises(ReplyFormatError, match="does not fit the schema: evaluator.conj"):
        task_from_reply({**file_task("x"), "evaluator": {"func": "f", "conj": "xor"}}, app="os", origin="explore")


def test_verdicts():
    assert parse_verdict('```json\n{"verdict": "Accept", "score": 0.8}\n```').accept
    rejected = parse_verdict('{"verdict": "reject", "score": 0.1, "reasons": ["vague"], "suggestions": ["name it"]}')
    assert not rejected.accept and rejected.reasons == ["vague"] and rejected.suggestions == ["name it"]
    cases = (('{"verdict": "maybe", "score": 0.5}', "accept"), ('{"verdict": "accept", "score": 2}', r"in \[0, 1\]"),
             ('{"verdict": "reject", "score": 0.1}', "reasons"), ('{"score": 0.1}', "lacks verdict"))
    for bad, message in cases:
        with pytest.raises(ReplyFormatError, match=message):
            parse_verdict(bad)
