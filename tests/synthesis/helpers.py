"""Scripted LLM replies for the VeriGen tests: candidate tasks, verdicts, checker actions."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from core.types import Action

from .scripted_llm import Reply

#: marker files that typed shell commands create when they have run (see ``typed_then``)
MARKERS = Path(tempfile.mkdtemp(prefix="scalecua-typed-"))
MARKERS.chmod(0o1777)  # the agent's terminal may run as the unprivileged desktop user (environments/desktop_user.py)
atexit.register(shutil.rmtree, MARKERS, True)

#: a sound generated judge: the file at config["path"] must hold exactly config["text"]
FILE_JUDGE = '''import os


def get_os_file_text__{s}(config):
    path = os.path.expanduser(config["path"])
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def check_os_file_text__{s}(result, expected=None, **options):
    if result is None:
        return 0.0
    return 1.0 if result.strip() == options["text"] else 0.0
'''

#: judge code that breaks the rules (subprocess, eval)
UNSAFE_JUDGE = '''import subprocess


def get_os_file_text__{s}(config):
    return subprocess.run(["cat", config["path"]], capture_output=True, text=True).stdout


def check_os_file_text__{s}(result, expected=None, **options):
    return eval("1.0")
'''

#: a judge that crashes when it runs (passes the static rules)
CRASHING_JUDGE = '''def get_os_file_text__{s}(config):
    return config["no_such_key"]


def check_os_file_text__{s}(result, expected=None, **options):
    return 1.0
'''

#: a judge that accepts any state, the untouched start included
LENIENT_JUDGE = '''import os


def get_os_file_text__{s}(config):
    return os.path.exists(os.path.expanduser("~"))


def check_os_file_text__{s}(result, expected=None, **options):
    return 1.0 if result else 0.0
'''


def file_task(instruction: str, *, path: str = "~/Documents/out.txt", text: str = "hello", code: str = FILE_JUDGE,
              suffix: str = "a1b2", config: list[dict[str, Any]] | None = None, app: str = "os") -> dict[str, Any]:
    """A candidate task in the proposer's reply format: the file ``path`` must contain ``text``."""
    return {
        "instruction": instruction,
        "snapshot": app,
        "related_apps": [app],
        "source": "knowledge document",
        "config": config if config is not None else [
            {"type": "execute", "parameters": {"command": "mkdir -p ~/Documents", "shell": True, "check": True}},
            {"type": "open", "parameters": {"path": "xterm"}},
        ],
        "evaluator": {
            "func": f"check_os_file_text__{suffix}",
            "result": {"type": f"get_os_file_text__{suffix}", "path": path},
            "options": {"text": text},
            "code": code.replace("{s}", suffix),
        },
        "explanation": f"reads {path} and compares it with the expected text",
        "difficulty": "easy",
        "estimated_steps": 3,
    }


def fenced(value: Any) -> str:
    return "Here is the task.\n```json\n" + json.dumps(value, indent=1) + "\n```"


def verdict(accept: bool, score: float = 0.9, reasons: tuple[str, ...] = ()) -> str:
    return fenced({"verdict": "accept" if accept else "reject", "score": score, "reasons": list(reasons),
                   "suggestions": [f"fix: {r}" for r in reasons]})


def act(*actions: dict[str, Any]) -> str:
    """A checker reply in the desktop's tool-call format."""
    from environments.actions import format_action

    return "I will act now.\n" + "\n".join(format_action(Action.model_validate(a)) for a in actions)


def llm_options(base_url: str, model: str, **extra: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": model, "api_key_env": None, "retry_backoff_s": 0.01,
            "timeout_s": 20.0, **extra}


def by_turn(*replies: str | Reply):
    """A ``Rule.respond`` that answers the n-th turn of a conversation with ``replies[n]`` (stateless, like an LLM:
    a dry run retried on another desktop starts over with the first reply)."""

    def respond(body: dict[str, Any]) -> str | Reply:
        turn = sum(m.get("role") == "assistant" for m in body.get("messages", []))
        return replies[min(turn, len(replies) - 1)]

    return respond


def typed_then(command: str, then: str):
    """A checker (``Rule.respond``) that types ``command`` into the focused terminal and presses Return, then
    answers ``then`` on its next turn, but only once the command has run: the typed line ends by creating a
    marker file, and the scripted server holds that answer until the marker appears (no fixed wait)."""
    marker = MARKERS / uuid.uuid4().hex[:8]
    typed = act({"type": "type", "text": f"{command}; touch {marker}"}, {"type": "key", "keys": ["Return"]})
    return by_turn(typed, Reply(text=then, wait_for=marker))
