"""Helpers shared by the domain modules: actions, setup steps, evaluator blocks."""

from __future__ import annotations

from typing import Any

#: where a task's files live, relative to its JSON file (setup and cloud_file resolve it there)
ASSETS = "assets"
#: where web apps are copied on the desktop before they start
WEBAPP_DIR = "~/.webapp"
#: a screen of the paper's size; oracle clicks are grid points on it
SCREEN = (1280, 800)


def key(*keys: str) -> dict[str, Any]:
    """One chord: ``key("ctrl", "s")``."""
    return {"type": "key", "keys": list(keys)}


def keys(*chords: str) -> list[dict[str, Any]]:
    """Several chords in a row: ``keys("Down", "Down", "ctrl+b")``."""
    return [key(*chord.split("+")) if chord != "+" else key("+") for chord in chords]


def type_(text: str) -> dict[str, Any]:
    return {"type": "type", "text": text}


def lines(*texts: str) -> list[dict[str, Any]]:
    """Type each text followed by Enter."""
    out: list[dict[str, Any]] = []
    for text in texts:
        if text:
            out.append(type_(text))
        out.append(key("enter"))
    return out


def click(px: int, py: int, kind: str = "left_click") -> dict[str, Any]:
    """A click at screen pixel (px, py) of the 1280x800 screen, expressed on the 1000x1000 grid."""
    return {"type": kind, "x": round(px * 1000 / SCREEN[0]), "y": round(py * 1000 / SCREEN[1])}


def wait(seconds: float) -> dict[str, Any]:
    return {"type": "wait", "duration": seconds}


def done() -> dict[str, Any]:
    return {"type": "done"}


def fail() -> dict[str, Any]:
    return {"type": "fail"}


def download(*pairs: tuple[str, str]) -> dict[str, Any]:
    """Copy assets into the desktop: ``download(("sales.xlsx", "~/sales.xlsx"))``."""
    return {"type": "download", "parameters": {"files": [{"url": f"{ASSETS}/{a}", "path": p} for a, p in pairs]}}


def open_(path: str) -> dict[str, Any]:
    return {"type": "open", "parameters": {"path": path}}


def launch(command: list[str] | str, shell: bool = False) -> dict[str, Any]:
    return {"type": "launch", "parameters": {"command": command, "shell": shell}}


def execute(command: list[str] | str, shell: bool = False) -> dict[str, Any]:
    return {"type": "execute", "parameters": {"command": command, "shell": shell}}


def sleep(seconds: float) -> dict[str, Any]:
    return {"type": "sleep", "parameters": {"seconds": seconds}}


def vm_file(path: str, dest: str) -> dict[str, Any]:
    return {"type": "vm_file", "path": path, "dest": dest}


def gold(asset: str, dest: str | None = None) -> dict[str, Any]:
    return {"type": "cloud_file", "path": f"{ASSETS}/{asset}", "dest": dest or f"gold_{asset}"}


def command(cmd: str) -> dict[str, Any]:
    return {"type": "vm_command_line", "command": cmd, "shell": True}


def rule(**rules: Any) -> dict[str, Any]:
    return {"type": "rule", "rules": rules}


def task(
    task_id: str,
    domain: str,
    instruction: str,
    apps: list[str],
    config: list[dict[str, Any]],
    evaluator: dict[str, Any],
    oracle: list[dict[str, Any]],
    **metadata: Any,
) -> dict[str, Any]:
    """An OSWorld task object; the oracle ends with ``done`` unless it already ends terminally."""
    if not oracle or oracle[-1]["type"] not in ("done", "fail", "answer"):
        oracle = [*oracle, done()]
    return {
        "id": task_id,
        "snapshot": domain,
        "instruction": instruction,
        "source": "scalecua-bundled",
        "config": config,
        "related_apps": apps,
        "evaluator": evaluator,
        "metadata": {"domain": domain, "oracle": oracle, **metadata},
    }
