"""``python -m core.record --config FILE [--out FILE] [--repeats N] [KEY=VALUE ...]``: record oracle demonstrations.

Each task's ``metadata.oracle`` runs exactly as the agent acts: through the
episode loop (:func:`core.runtime.episode.run_episode`) on the configured environment,
with a scripted policy that answers every turn with the next oracle action
written in the backend's own action format (``format_response``, the text
its ``parse_response`` reads back). The context the loop builds, the
screenshots it sees and the judge's verdict are all real; only runs the judge
scores 1 are written, as trajectory records with their screenshots
(:mod:`core.runtime.demonstrations`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

import structlog

from core.runtime import logs, rundir
from core.commands.cli import config_parser, main_guard
from core.config import load_config
from core.commands.envcheck import oracle_of
from core.runtime.episode import EpisodeDeps, run_episode
from core.errors import ScaleCUAError
from core.interfaces import ChatRenderer, Generation, GenerationRequest, RolloutEngine
from core.runtime.metrics import write_trajectories
from core.types import EpisodeStatus, Task, Trajectory

log = structlog.get_logger(__name__)
REQUIRED_SLOTS = ("model", "environment", "segmenter", "rollout", "judge")


NO_WEIGHTS = "a scripted policy has no weights to update"


class ScriptedPolicy(RolloutEngine):
    """A policy that answers each turn with the next of a fixed list of responses (an oracle's actions)."""

    def __init__(self, renderer: ChatRenderer, responses: Sequence[str]) -> None:
        self.renderer = renderer
        self.responses = list(responses)
        self.turn = 0

    async def generate(self, request: GenerationRequest) -> Generation:
        if self.turn >= len(self.responses):
            raise ScaleCUAError(f"the scripted policy has only {len(self.responses)} responses; the episode asked "
                                "for more (the oracle does not end with done, fail or answer)")
        text = self.responses[self.turn]
        self.turn += 1
        ids = [*self.renderer.encode_text(text), self.renderer.stop_ids[0]]
        return Generation(ids=ids, logprobs=[0.0] * len(ids), text=text, finish_reason="stop")

    weight_version = None  # no weights: never synced

    def begin_weight_update(self, version: int) -> None:
        raise TypeError(NO_WEIGHTS)

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        raise TypeError(NO_WEIGHTS)

    def commit_weight_update(self) -> None:
        raise TypeError(NO_WEIGHTS)

    def abort_weight_update(self) -> None:
        return None  # nothing was begun


def oracle_responses(task: Task, backend: Any) -> list[str]:
    """One response per oracle action, in the backend's action format."""
    return [backend.format_response([action]) for action in oracle_of(task)]


@dataclasses.dataclass
class RecordResult:
    recorded: list[Trajectory]
    failed: dict[str, str]  # trajectory id -> why it was not recorded
    env_errors: int = 0


async def record_oracles(tasks: Sequence[Task], deps: EpisodeDeps, *, repeats: int = 1, concurrency: int = 2,
                         retries: int = 3, warn: bool = True) -> RecordResult:
    """Run every task's oracle ``repeats`` times; keep the runs its judge scores 1 (``warn``: log each that is
    not; off where failing is expected, e.g. :mod:`core.commands.floors`)."""
    limit = asyncio.Semaphore(concurrency)
    result = RecordResult([], {})
    max_turns = deps.settings.max_turns

    async def one(task: Task, repeat: int) -> None:
        tid = f"oracle-{task.id}-r{repeat:02d}"
        responses = oracle_responses(task, deps.backend)
        if len(responses) > max_turns:
            log.warning("the oracle is longer than algorithm.max_turns; the agent could not finish it in time",
                        task_id=task.id, oracle_turns=len(responses), max_turns=max_turns)
        settings = dataclasses.replace(deps.settings, max_turns=len(responses), max_parse_failures=1)
        for attempt in range(retries + 1):
            episode = dataclasses.replace(deps, engine=ScriptedPolicy(deps.renderer, responses), settings=settings)
            async with limit:
                traj = await run_episode(task, episode, trajectory_id=tid, group_id=f"oracle-{task.id}")
            if traj.status != EpisodeStatus.ENV_ERROR:
                break
            result.env_errors += 1
            log.warning("environment failed while recording an oracle; retrying", trajectory_id=tid,
                        attempt=attempt + 1, reason=traj.status_reason)
        else:
            result.failed[tid] = f"environment errors: {traj.status_reason}"
            return
        traj.reward = traj.judgement.score if traj.judgement else 0.0
        if traj.success:
            result.recorded.append(traj)
        else:
            j = traj.judgement
            result.failed[tid] = (f"the judge scored the oracle's final state {j.score:g} ({j.status.value}"
                                  f"{': ' + j.error if j.error else ''})" if j else f"not judged ({traj.status_reason})")
            if warn:
                log.warning("oracle run not recorded", trajectory_id=tid, why=result.failed[tid])

    await asyncio.gather(*(one(task, r) for task in tasks for r in range(repeats)))
    result.recorded.sort(key=lambda t: t.trajectory_id)
    return result


async def record(resolved: Any, plugins: Any, run_dir: Path, out: Path, *, repeats: int) -> dict[str, Any]:
    from core.runtime.components import build_components

    c = build_components(resolved, plugins, run_dir, train=False)
    try:
        tasks = [t for t in c.tasks.values() if t.metadata.get("oracle")]
        if not tasks:
            raise ScaleCUAError("no task in the pool has a metadata.oracle to record")
        loop_cfg = resolved.config.rollout_loop
        result = await record_oracles(tasks, c.deps, repeats=repeats, concurrency=loop_cfg.concurrency,
                                      retries=loop_cfg.env_retries)
    finally:
        await c.close()
    write_trajectories(out, result.recorded, screenshots=True)
    return {"out": str(out), "recorded": len(result.recorded), "failed": result.failed,
            "env_errors": result.env_errors, "tasks": len(tasks), "repeats": repeats}


def main(argv: Sequence[str] | None = None) -> int:
    parser = config_parser("python -m core.record", "record oracle demonstrations on real desktops")
    parser.add_argument("--out", type=Path, default=None, help="JSONL file (default <run_dir>/demonstrations.jsonl)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each oracle (default 1)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    logs.configure()
    resolved, plugins = load_config(args.config, [*args.overrides, "run.name=record"], required=REQUIRED_SLOTS)
    run_dir = rundir.prepare(resolved, plugins, command="core.record")
    logs.configure(resolved.config.run.log_level, run_dir / "log.jsonl")
    out = args.out or run_dir / "demonstrations.jsonl"
    summary = asyncio.run(record(resolved, plugins, run_dir, out, repeats=args.repeats))
    print(json.dumps(summary, indent=2))
    return 0 if summary["recorded"] else 1


if __name__ == "__main__":
    sys.exit(main_guard(main))
