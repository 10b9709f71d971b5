"""Shared pieces of the ScienceBoard task modules: the task skeleton and oracle actions."""

from __future__ import annotations

from typing import Any

from environments.tasks.authoring.common import click, done, fail, key, keys, type_, wait  # noqa: F401 (re-exported)

#: upstream's home; the backend maps it to the desktop user's home
HOME = "/home/user"


def answer(text: str) -> dict[str, Any]:
    return {"type": "answer", "text": text}


def enter() -> dict[str, Any]:
    return key("Return")


def task(task_id: str, app: str, instruction: str, initialize: list[dict[str, Any]], evaluate: list[dict[str, Any]],
         oracle: list[dict[str, Any]], *, steps: int = 10, ans: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": task_id, "type": app, "sort": "VM", "steps": steps, "instruction": instruction, "version": "0.1",
        "snapshot": app, "initialize": initialize, "evaluate": evaluate,
    }
    if ans is not None:
        body["ans"] = ans
    body["oracle"] = oracle
    return body


def stop(value: str, *args: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "stop", "value": value}
    if value == "ANS":
        item["args"] = list(args)
    return item
