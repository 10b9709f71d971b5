"""``python -m core.export SOURCE [SOURCE ...] --out DIR``: trajectories as a Hugging Face dataset.

SOURCE is what ``warm_start.demonstrations.paths`` takes: a run directory (its rollout records, e.g. the
recipe's ``evaluate/after``), a JSONL trajectory file (a warm start's ``demonstrations/oracle.jsonl``) or a
directory of them. Records are validated as demonstrations are (every response parses into its recorded
actions, every screenshot the agent saw is there; a run's records with an unparsable turn are skipped) and
written as one row per trajectory (:mod:`core.runtime.dataset_format`): Parquet under ``DIR/data/``, the
screenshots as the ``Image`` feature, ``messages`` in the chat format TRL's SFT trainer reads, and a
dataset card. ``core.sft`` trains from ``DIR`` to the same loss as from the JSONL.

The system prompt and the task instructions come from a config: ``--config`` (default: the nearest
``config.yaml`` at or above the first SOURCE, which every run directory has).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import structlog

from core.runtime import logs
from core.commands.cli import main_guard
from core.config import ResolvedConfig, load_config
from core.runtime.dataset_format import SPLIT_FILE, features, write_card
from core.runtime.demonstrations import Demonstration, load_demonstrations
from core.errors import ConfigError, ScaleCUAError
from core.interfaces import Message
from core.pluginmanager import Plugins
from core.prompt import assistant_message, initial_messages, observation_message
from core.runtime.tasks import load_tasks
from core.types import Observation, Screenshot, Task

log = structlog.get_logger(__name__)


def conversation(demo: Demonstration, task: Task, system_prompt: str) -> list[Message]:
    """The whole episode as the agent's conversation (every screenshot kept: no window)."""
    messages = initial_messages(system_prompt, task.instruction, Observation(screenshot=demo.initial))
    for position, turn in enumerate(demo.turns):
        messages.append(assistant_message(turn.response_text))
        if position == len(demo.turns) - 1 or any(a.is_terminal for a in turn.actions):
            break
        messages.append(observation_message(Observation(screenshot=turn.screenshot, text=turn.env_text),
                                            turn.loop_feedback))
    return messages


def chat_format(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[Screenshot]]:
    """TRL's vision chat format: text parts and ``{"type": "image"}`` placeholders, and the images in order."""
    out, images = [], []
    for message in messages:
        content = []
        for part in message.content:
            if isinstance(part, Screenshot):
                images.append(part)
                content.append({"type": "image", "text": None})
            else:
                content.append({"type": "text", "text": part})
        out.append({"role": message.role, "content": content})
    return out, images


def row(demo: Demonstration, task: Task, system_prompt: str) -> dict[str, Any]:
    messages, images = chat_format(conversation(demo, task, system_prompt))
    turns = [{"response_text": t.response_text,
              "actions": json.dumps([a.model_dump(mode="json", exclude_none=True) for a in t.actions]),
              "feedback": t.env_text, "loop_feedback": t.loop_feedback, "screenshot": t.screenshot is not None}
             for t in demo.turns]
    return {"trajectory_id": demo.trajectory_id, "task_id": demo.task_id, "instruction": task.instruction,
            "success": demo.success, "reward": demo.reward, "source": demo.where,
            "initial_screenshot": demo.initial is not None, "turns": turns,
            "images": [{"bytes": s.png, "path": None} for s in images], "messages": messages}


def every_task(resolved: ResolvedConfig, backend: Any) -> dict[str, Task]:
    """The pool and every evaluation set's tasks (records of either can be exported)."""
    cfg = resolved.config
    base_dir = resolved.source.parent if resolved.source else None
    tasks = {t.id: t for t in load_tasks(cfg.tasks.paths, base_dir=base_dir, convert=backend.convert_task,
                                         include=cfg.tasks.include, domains=cfg.tasks.domains)}
    for spec in cfg.tasks.evaluation_sets().values():
        tasks.update({t.id: t for t in load_tasks(spec.paths, base_dir=base_dir, convert=backend.convert_task)})
    return tasks


def export(sources: Sequence[str | Path], out: Path, resolved: ResolvedConfig, plugins: Plugins, *,
           success_only: bool = False, min_reward: float | None = None, overwrite: bool = False,
           shard_rows: int = 1000) -> dict[str, Any]:
    """Write the dataset; returns a summary (rows, images, skipped records, files)."""
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError([f"--out {out}: exists and is not empty; choose another directory or pass --force"])
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory(prefix="scalecua-export-") as scratch:
        backend = resolved.create("environment", plugins, run_dir=Path(scratch))
        try:
            tasks = every_task(resolved, backend)
            demos, report = load_demonstrations(sources, tasks=tasks, parse=backend.parse_response,
                                                success_only=success_only, min_reward=min_reward)
            rows = [row(d, tasks[d.task_id], backend.system_prompt(tasks[d.task_id])) for d in demos]
        finally:
            asyncio.run(backend.close())
    if not rows:
        raise ScaleCUAError(f"nothing to export: {report.records} records read, skipped: {report.skipped}")
    import datasets as hf

    (out / "data").mkdir(parents=True)
    shards = [rows[i:i + shard_rows] for i in range(0, len(rows), shard_rows)]
    files = []
    for number, shard in enumerate(shards):
        name = SPLIT_FILE.replace("00000-of-00001", f"{number:05d}-of-{len(shards):05d}")
        hf.Dataset.from_list(shard, features=features()).to_parquet(str(out / name))
        files.append(name)
    write_card(out, rows=len(rows), sources=[str(s) for s in sources])
    summary = {"out": str(out), "rows": len(rows), "images": sum(len(r["images"]) for r in rows),
               "successes": sum(r["success"] for r in rows), "records": report.records, "skipped": report.skipped,
               "files": files}
    log.info("dataset exported", **summary)
    return summary


def nearest_config(source: Path) -> Path | None:
    for where in [source, *source.resolve().parents][:6]:
        if (where / "config.yaml").is_file():
            return where / "config.yaml"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.export", description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", metavar="SOURCE",
                        help="run directories, JSONL trajectory files or directories of them")
    parser.add_argument("--out", "-o", type=Path, required=True, help="the dataset directory to write")
    parser.add_argument("--config", "-c", help="the config whose tasks and system prompt the records used "
                        "(default: the nearest config.yaml at or above the first SOURCE)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override (repeatable), e.g. --set tasks.paths=[...]")
    parser.add_argument("--success-only", action="store_true", help="only judged successes (rejection sampling)")
    parser.add_argument("--min-reward", type=float, default=None, help="only records with at least this reward")
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    args = parser.parse_args(argv)
    logs.configure()
    config = args.config or nearest_config(Path(args.sources[0]))
    if config is None:
        raise ConfigError([f"{args.sources[0]}: no config.yaml at or above it; pass --config (the config the "
                           "records were made with: it names the tasks and the system prompt)"])
    resolved, plugins = load_config(config, args.overrides)
    summary = export(args.sources, args.out, resolved, plugins, success_only=args.success_only,
                     min_reward=args.min_reward, overwrite=args.force)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
