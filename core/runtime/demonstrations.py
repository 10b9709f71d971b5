"""Demonstrations: trajectories to imitate, and the training segments they become.

A demonstration file is JSON Lines in exactly the format runs already write
(:func:`core.runtime.metrics.trajectory_record`, ``rollouts/iter_NNNNNN.jsonl``), with
the screenshots saved beside it::

    {"trajectory_id": "...", "task_id": "os-count-lines", "success": true, "reward": 1.0,
     "initial_screenshot": "shots/<id>-init.png",
     "turns": [{"index": 0, "response_text": "<tool_call>...</tool_call>", "actions": [<Action JSON>],
                "parse_error": null, "feedback": null, "loop_feedback": null,
                "screenshot": "shots/<id>-00.png"}, ...]}

The same trajectories also load from a Hugging Face dataset that
``python -m core.export`` wrote (:mod:`core.runtime.dataset_format`). Three sources write it: recorded oracle runs (:mod:`core.record`), any run's own
rollouts (``run.save_screenshots: true``; rejection sampling keeps the
successful ones) and VeriGen checker dry runs that reached a judge score of 1
(``<synthesis run>/demonstrations/<task id>.jsonl``, one per accepted task, the
checker's actions re-written in the policy's response format).

A demonstration replays through the configured segmenter exactly as the
episode loop built the agent's context at rollout time (system prompt,
instruction, screenshots, feedback; the same sliding window), so the warm
start trains on the prompts the agent will see. Only response tokens are
trained (loss mask 1), each exactly once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from pydantic import ValidationError

from core.runtime.dataset_format import DatasetSchemaError, is_dataset, read_rows, row_record
from core.errors import ActionParseError, ScaleCUAError
from core.interfaces import ChatRenderer, Segmenter
from core.types import Action, Observation, Screenshot, Segment, Task


class DemonstrationError(ScaleCUAError):
    """Every problem found in a demonstration set (file and line each); nothing is trained."""

    exit_code = 2

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        noun = "problem" if len(self.problems) == 1 else "problems"
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"demonstrations have {len(self.problems)} {noun}:\n{body}")


@dataclass
class DemoTurn:
    """One agent turn to imitate and what the agent saw after it."""

    response_text: str
    actions: list[Action]
    #: the screenshot after the turn (None after a terminal action)
    screenshot: Screenshot | None = None
    #: the environment's text after the turn (command output, a refused action)
    env_text: str | None = None
    #: the loop's own text after the turn (cursor position)
    loop_feedback: str | None = None


@dataclass
class Demonstration:
    trajectory_id: str
    task_id: str
    #: ``file:line`` it came from
    where: str
    initial: Screenshot | None
    turns: list[DemoTurn]
    reward: float = 0.0
    success: bool = False


@dataclass
class LoadReport:
    """How many records each rule kept or skipped."""

    records: int = 0
    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


#: ``demos:<split>`` in ``warm_start.demonstrations.paths``: the demonstrations the recipe's synthesize stage
#: kept of that split's accepted tasks (:mod:`core.commands.pipeline` resolves it)
DEMOS_PREFIX = "demos:"


def demonstration_files(paths: Iterable[str | Path], problems: list[str] | None = None) -> list[tuple[Path, str]]:
    """Sources behind ``paths``, each with its kind: ``"file"`` (a JSONL demonstration file), ``"run"`` (a
    run's own rollout record) or ``"dataset"`` (a Hugging Face dataset, :mod:`core.runtime.dataset_format`).

    A path is a ``.jsonl`` file, a run directory (its ``rollouts/*.jsonl``), a dataset (a ``.parquet`` file,
    a directory of Parquet files or a ``save_to_disk`` directory; ``python -m core.export`` writes one) or a
    directory of ``.jsonl`` files (searched recursively).
    """
    found: list[tuple[Path, str]] = []
    collect = problems is not None
    problems = problems if problems is not None else []
    for raw in paths:
        if str(raw).startswith(DEMOS_PREFIX):
            problems.append(f"{raw}: names the demonstrations the recipe's synthesize stage keeps; run the recipe "
                            "(python -m core.pipeline) or give the directory (<recipe dir>/synthesize/"
                            "demonstrations/<split>)")
            continue
        path = Path(raw).expanduser()
        if is_dataset(path):
            found.append((path, "dataset"))
        elif path.is_file():
            found.append((path, "file"))
        elif path.is_dir() and (path / "rollouts").is_dir() and (path / "config.yaml").is_file():
            found.extend((p, "run") for p in sorted((path / "rollouts").glob("*.jsonl")))
        elif path.is_dir():
            files = sorted(path.rglob("*.jsonl"))
            if not files:
                problems.append(f"{path}: a directory without .jsonl demonstration files or a dataset")
            found.extend((p, "file") for p in files)
        else:
            problems.append(f"{path}: does not exist (give a .jsonl file, a run directory, a dataset directory "
                            "or a directory of .jsonl)")
    if problems and not collect:
        raise DemonstrationError(problems)
    return found


class Fetch:
    """A record's screenshots by the name it gives them: files beside a JSONL file, or a dataset row's images."""

    def __init__(self, base: Path | None = None, images: Sequence[bytes] = ()) -> None:
        self.base, self.images = base, images

    def where(self, rel: str) -> str:
        return str(self.base / rel) if self.base is not None else rel

    def __call__(self, rel: str) -> bytes:
        if self.base is not None:
            return (self.base / rel).read_bytes()
        try:
            return self.images[int(rel.split(":", 1)[1])]
        except (ValueError, IndexError):
            raise FileNotFoundError(rel) from None


def _screenshot(fetch: Fetch, rel: Any, what: str, where: str, problems: list[str]) -> Screenshot | None:
    if not rel:
        problems.append(f"{where}: {what} has no screenshot: demonstrations need every screenshot the agent saw "
                        "(record runs with run.save_screenshots: true)")
        return None
    try:
        return Screenshot.from_png(fetch(str(rel)))
    except OSError:
        problems.append(f"{where}: {what}: screenshot {fetch.where(str(rel))} is missing")
    except Exception as exc:  # PIL's errors for a corrupt PNG are many
        problems.append(f"{where}: {what}: screenshot {fetch.where(str(rel))} is not a readable PNG "
                        f"({type(exc).__name__})")
    return None


def _parse_record(line: Mapping[str, Any], fetch: Fetch, where: str, parse: Callable[[str], list[Action]],
                  problems: list[str]) -> Demonstration | None:
    turns_raw = line.get("turns")
    if not isinstance(turns_raw, list) or not turns_raw:
        problems.append(f"{where}: no turns")
        return None
    known = len(problems)
    initial = _screenshot(fetch, line.get("initial_screenshot"), "the first observation", where, problems)
    turns: list[DemoTurn] = []
    for position, turn in enumerate(turns_raw):
        label = f"turn {position}"
        if not isinstance(turn, Mapping) or not isinstance(turn.get("response_text"), str):
            problems.append(f"{where}: {label}: needs a response_text string")
            continue
        text = turn["response_text"]
        try:
            actions = parse(text)
        except ActionParseError as exc:
            problems.append(f"{where}: {label}: the response does not parse into actions ({exc})")
            continue
        recorded = turn.get("actions")
        if recorded:
            try:
                expected = [Action.model_validate(a) for a in recorded]
            except ValidationError as exc:
                problems.append(f"{where}: {label}: recorded actions are invalid ({str(exc).splitlines()[0]})")
                continue
            if expected != actions:
                problems.append(f"{where}: {label}: the response parses into {[a.type.value for a in actions]}, "
                                f"not the recorded {[a.type.value for a in expected]}")
                continue
        terminal = any(a.is_terminal for a in actions)
        last = position == len(turns_raw) - 1
        shot = None
        if not (terminal or last):
            shot = _screenshot(fetch, turn.get("screenshot"), label, where, problems)
        turns.append(DemoTurn(text, actions, shot, turn.get("feedback"), turn.get("loop_feedback")))
        if terminal and not last:
            problems.append(f"{where}: {label} ends the episode ({actions[-1].type.value}) but more turns follow")
            break
    if len(problems) > known:
        return None
    judgement = line.get("judgement") or {}
    success = bool(line["success"]) if "success" in line else float(judgement.get("score", 0.0)) >= 1.0 - 1e-9
    return Demonstration(str(line.get("trajectory_id", where)), str(line["task_id"]), where, initial, turns,
                         reward=float(line.get("reward") or 0.0), success=success)


def load_demonstrations(
    paths: Iterable[str | Path],
    *,
    tasks: Mapping[str, Task],
    parse: Callable[[str], list[Action]],
    success_only: bool = True,
    min_reward: float | None = None,
    problems: list[str] | None = None,
) -> tuple[list[Demonstration], LoadReport]:
    """Every demonstration in ``paths`` that passes the filter, validated; raises with every problem at once
    (or, given a ``problems`` list, appends them to it and returns the valid demonstrations).

    Filter (rejection sampling): ``success_only`` keeps judged successes, ``min_reward`` keeps rewards at or
    above it. Records from a run's own rollouts that hold an unparsable turn are skipped (the agent's slip,
    counted in the report); in demonstration files every response must parse into its recorded actions.
    """
    report = LoadReport()
    collect = problems is not None
    problems = problems if problems is not None else []
    demos: list[Demonstration] = []
    for source, kind in demonstration_files(paths, problems):
        for where, line, fetch in _records(source, kind, problems):
            report.records += 1
            if line is None:
                continue
            if not isinstance(line, dict) or not isinstance(line.get("task_id"), str):
                problems.append(f"{where}: not a trajectory record (no task_id); see core/runtime/demonstrations.py")
                continue
            if line["task_id"] not in tasks:
                problems.append(f"{where}: unknown task id '{line['task_id']}' (not in the configured task pool)")
                continue
            if not _passes(line, success_only, min_reward):
                report.skip("filtered out (success / reward)")
                continue
            if kind == "run" and any(t.get("parse_error") for t in line.get("turns") or [] if isinstance(t, Mapping)):
                report.skip("holds an unparsable turn")
                continue
            demo = _parse_record(line, fetch, where, parse, problems)
            if demo is not None:
                demos.append(demo)
    if problems and not collect:
        raise DemonstrationError(problems)
    report.kept = len(demos)
    return demos, report


def _records(source: Path, kind: str, problems: list[str]) -> Iterator[tuple[str, Any, Fetch]]:
    """``(file:line or dataset[row], record or None when unreadable, screenshot fetcher)`` of one source."""
    if kind == "dataset":
        try:
            for where, row, images in read_rows(source):
                yield where, row_record(row, len(images)), Fetch(images=images)
        except DatasetSchemaError as exc:
            problems.append(str(exc))
        return
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{source}: cannot be read ({exc})")
        return
    fetch = Fetch(source.parent)
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON ({exc.msg} at char {exc.pos})")
            record = None
        yield where, record, fetch


def _passes(line: Mapping[str, Any], success_only: bool, min_reward: float | None) -> bool:
    judgement = line.get("judgement") or {}
    success = bool(line["success"]) if "success" in line else float(judgement.get("score", 0.0)) >= 1.0 - 1e-9
    if success_only and not success:
        return False
    return min_reward is None or float(line.get("reward") or 0.0) >= min_reward


def demonstration_segments(
    demo: Demonstration,
    *,
    task: Task,
    system_prompt: str,
    segmenter: Segmenter,
    renderer: ChatRenderer,
) -> list[Segment]:
    """Replay ``demo`` through ``segmenter`` as the episode loop would have built the agent's context.

    Responses are tokenized by the renderer and closed with its stop token (mask 1, rollout logprob 0:
    nothing was sampled); everything else is context (mask 0).
    """
    stop = renderer.stop_ids[0]
    context = segmenter.start(renderer=renderer, trajectory_id=demo.trajectory_id, task_id=demo.task_id,
                              system_prompt=system_prompt, instruction=task.instruction,
                              observation=Observation(screenshot=demo.initial))
    for position, turn in enumerate(demo.turns):
        ids = [*renderer.encode_text(turn.response_text), stop]
        context.add_response(ids, [0.0] * len(ids), turn.response_text)
        if position == len(demo.turns) - 1 or any(a.is_terminal for a in turn.actions):
            break
        context.add_observation(Observation(screenshot=turn.screenshot, text=turn.env_text), turn.loop_feedback)
    return context.finish()


def check_lengths(segments: Sequence[Segment], max_seq_len: int, where: Mapping[str, str]) -> list[str]:
    """A problem line for every segment longer than ``max_seq_len`` (``where``: trajectory id -> file:line)."""
    return [
        f"{where.get(s.trajectory_id, s.trajectory_id)}: segment {s.index} has {s.num_tokens} tokens, more than "
        f"algorithm.max_seq_len = {max_seq_len}; raise it, lower max_pixels, or use a smaller segmenter window"
        for s in segments if s.num_tokens > max_seq_len
    ]
