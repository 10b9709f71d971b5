"""Per-iteration metrics (JSON lines in the run directory) and rollout records.

``metrics.jsonl`` holds one object per completed iteration; on resume the
lines of iterations after the restored checkpoint are dropped, so the file
never holds a lost or duplicated iteration. ``rollouts/iter_NNNNNN.jsonl``
records every trajectory (text, actions, status, judgement, reward) for
reports and for trajectory-guided task synthesis.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import structlog

from core.errors import DiskFull
from core.runtime.shots import ScreenshotPolicy, ShotWriter
from core.types import EpisodeStatus, RolloutGroup, Trajectory

log = structlog.get_logger(__name__)


class PhaseTimer:
    """Wall time per named phase (rollout, judge, train, weight_sync, checkpoint)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def as_metrics(self) -> dict[str, float]:
        return {f"time/{k}": round(v, 4) for k, v in self.seconds.items()}


def truncate_jsonl(path: Path, keep: Callable[[Mapping[str, Any]], bool]) -> int:
    """Rewrite a JSON Lines file with the records ``keep`` accepts (and without lines a kill tore), atomically;
    returns how many lines were dropped."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            dropped += 1  # a line torn by a kill
            continue
        if isinstance(record, dict) and keep(record):
            kept.append(line)
        else:
            dropped += 1
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    os.replace(tmp, path)
    return dropped


#: ``rollouts/<tag>_NNNNNN.jsonl``: the training rollouts (iter), periodic evaluations (eval) and initial pass (init)
_ROLLOUT_FILE = re.compile(r"^(?P<tag>iter|eval|init)_(?P<iteration>\d{6})\.jsonl$")


def discard_attempt(run_dir: Path, iteration: int) -> dict[str, int]:
    """Forget what an interrupted attempt wrote for iterations >= ``iteration`` (the resume point: the newest
    complete checkpoint's, 0 without one): metrics lines, the sampler's weight snapshots after that checkpoint,
    rollout files (the initial pass's too when starting over). A resumed run then records each iteration once."""
    dropped = {"metrics": MetricsLog(run_dir).truncate_from(iteration),
               "sampler_weights": truncate_jsonl(run_dir / "sampler_weights.jsonl",
                                                 lambda r: 0 < iteration and r.get("iteration", -1) <= iteration),
               "rollout_files": 0}
    for file in sorted((run_dir / "rollouts").glob("*.jsonl")) if (run_dir / "rollouts").is_dir() else []:
        match = _ROLLOUT_FILE.match(file.name)
        if match and int(match["iteration"]) >= iteration:
            file.unlink()
            dropped["rollout_files"] += 1
    return dropped


class MetricsLog:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "metrics.jsonl"

    def truncate_from(self, iteration: int) -> int:
        """Drop lines of iterations >= ``iteration`` (after a resume); returns how many were dropped."""
        return truncate_jsonl(self.path, lambda record: record.get("iteration", -1) < iteration)

    def append(self, record: Mapping[str, Any]) -> None:
        """One line, synced; a line a full disk tore is dropped on resume (:func:`truncate_jsonl`)."""
        try:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record, sort_keys=True, default=float) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            DiskFull.check(exc, self.path)
            raise

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]


def rollout_metrics(groups: Sequence[RolloutGroup]) -> dict[str, float]:
    """Reward, success and shape statistics of one iteration's groups."""
    trajectories = [t for g in groups for t in g.trajectories]
    if not trajectories:
        return {"rollout/episodes": 0.0}
    rewards = [t.reward for t in trajectories]
    lengths = [len(t.turns) for t in trajectories]
    segments = [s for t in trajectories for s in t.segments]
    statuses = [t.status for t in trajectories]
    return {
        "rollout/episodes": float(len(trajectories)),
        "reward/mean": statistics.fmean(rewards),
        "reward/std": statistics.pstdev(rewards),
        "success/rate": statistics.fmean(1.0 if t.success else 0.0 for t in trajectories),
        "groups/informative_share": statistics.fmean(1.0 if g.informative else 0.0 for g in groups),
        "episode/turns_mean": statistics.fmean(lengths),
        "episode/turns_max": float(max(lengths)),
        "episode/incomplete_share": statistics.fmean(1.0 if s == EpisodeStatus.INCOMPLETE else 0.0 for s in statuses),
        "segments/count": float(len(segments)),
        "segments/per_episode": len(segments) / len(trajectories),
        "tokens/total": float(sum(s.num_tokens for s in segments)),
        "tokens/trainable": float(sum(s.num_trainable for s in segments)),
        "tokens/max_segment": float(max((s.num_tokens for s in segments), default=0)),
        "judge/seconds_mean": statistics.fmean(float(t.metadata.get("judge_s", 0.0)) for t in trajectories),
        "judge/not_ok": float(sum(1 for t in trajectories if t.judgement and t.judgement.status.value != "ok")),
    }


#: the group pass-rate bins rollouts are counted in (``work/rollouts_at_pass/<bin>``): all failed (0), then
#: (0, 0.25], (0.25, 0.5], (0.5, 0.75], (0.75, 1), all succeeded (1). The two ends are the groups GRPO learns
#: nothing from. Labels use only characters every tracker accepts in a metric name (MLflow refuses brackets).
PASS_BINS: tuple[str, ...] = ("0", "0-0.25", "0.25-0.5", "0.5-0.75", "0.75-1", "1")


def pass_bin(rate: float) -> str:
    """The :data:`PASS_BINS` label of a group pass rate in [0, 1]."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"a pass rate is in [0, 1], got {rate}")
    if rate == 0.0:
        return PASS_BINS[0]
    if rate == 1.0:
        return PASS_BINS[-1]
    return PASS_BINS[min(4, 1 + int((rate - 1e-12) // 0.25))]


def rollouts_by_pass(groups: Iterable[RolloutGroup]) -> dict[str, float]:
    """Rollouts run per group pass-rate bin (every bin present, zeros included): where a sampler's work went."""
    counts = dict.fromkeys(PASS_BINS, 0.0)
    for group in groups:
        if group.trajectories:
            counts[pass_bin(sum(group.successes) / len(group.trajectories))] += len(group.trajectories)
    return {f"work/rollouts_at_pass/{label}": value for label, value in counts.items()}


def work_metrics(trained: Sequence[RolloutGroup], untrained: Sequence[RolloutGroup]) -> dict[str, float]:
    """What an iteration's training cost in environment work, and how much of it was thrown away.

    ``trained``: the groups this step trained; ``untrained``: groups run to the end that no step will train (a
    sampler's rejections, groups dropped as too stale). Environment time is each episode's wall time
    (``duration_s``: resets, actions, judging); steps are its turns. ``work/rollouts_at_pass/<bin>`` counts the
    rollouts of both by their group's pass rate (:data:`PASS_BINS`)."""
    def turns(groups: Sequence[RolloutGroup]) -> list[int]:
        return [len(t.turns) for g in groups for t in g.trajectories]

    def seconds(groups: Sequence[RolloutGroup]) -> float:
        return float(sum(float(t.metadata.get("duration_s", 0.0)) for g in groups for t in g.trajectories))

    run = turns(trained) + turns(untrained)
    return {
        "work/groups_trained": float(len(trained)),
        "work/groups_untrained": float(len(untrained)),
        "work/env_steps": float(sum(run)),
        "work/env_seconds": seconds(trained) + seconds(untrained),
        "work/env_seconds_untrained": seconds(untrained),
        "work/turns_mean_trained": statistics.fmean(turns(trained)) if turns(trained) else 0.0,
        "work/turns_mean_run": statistics.fmean(run) if run else 0.0,
        **rollouts_by_pass([*trained, *untrained]),
    }


def trajectory_record(traj: Trajectory, screenshot_paths: Mapping[int | str, str] | None = None) -> dict[str, Any]:
    """One JSON line per trajectory: the format trajectory-guided synthesis reads.

    ``screenshot_paths`` maps turn index -> PNG path relative to the JSONL file, and ``"initial"`` -> the
    first observation's (screenshots are only saved when the run asks for them). ``feedback`` is the
    environment's text after the turn, ``loop_feedback`` the loop's own (a parse error, the cursor
    position): with the screenshots they are exactly what the agent saw, so a record replays into the
    same context (:mod:`core.runtime.demonstrations`).
    """
    shots = screenshot_paths or {}
    return {
        "trajectory_id": traj.trajectory_id,
        "task_id": traj.task_id,
        "group_id": traj.group_id,
        "success": traj.success,
        "status": traj.status.value,
        "status_reason": traj.status_reason,
        "reward": traj.reward,
        "advantage": traj.metadata.get("advantage"),
        "judgement": traj.judgement.model_dump(mode="json") if traj.judgement else None,
        "answer": traj.metadata.get("answer"),
        "initial_screenshot": shots.get("initial"),
        "turns": [
            {
                "index": turn.index,
                "response_text": turn.response_text,
                "actions": [a.model_dump(mode="json", exclude_none=True) for a in turn.actions],
                "parse_error": turn.parse_error,
                "feedback": turn.observation.text if turn.observation else None,
                "loop_feedback": turn.feedback,
                "screenshot": shots.get(turn.index),
                "duration_s": round(turn.duration_s, 3),
                "weight_version": turn.weight_version,
            }
            for turn in traj.turns
        ],
        "segments": len(traj.segments),
        "duration_s": traj.metadata.get("duration_s"),
        "started_at": traj.metadata.get("started_at"),  # wall clock (epoch seconds)
        "acted_at": traj.metadata.get("acted_at"),  # when its last environment call (reset, step, observe) returned
        "judged_at": traj.metadata.get("judged_at"),
        "env_id": traj.metadata.get("env_id"),  # the environment it ran on (log lines carry the same id)
        "recording": traj.metadata.get("recording"),  # a screen recording of the episode, where the environment made one
    }


def write_rollouts(
    run_dir: Path, iteration: int, groups: Sequence[RolloutGroup], tag: str = "iter", *,
    screenshots: bool | ScreenshotPolicy | None = None,
) -> Path:
    """``rollouts/<tag>_NNNNNN.jsonl`` (+ ``rollouts/shots/<trajectory>-<turn>.png`` when ``screenshots``)."""
    path = run_dir / "rollouts" / f"{tag}_{iteration:06d}.jsonl"
    return write_trajectories(path, [t for g in groups for t in g.trajectories], screenshots=screenshots)


def write_trajectories(path: Path, trajectories: Iterable[Trajectory], *,
                       screenshots: bool | ScreenshotPolicy | None = None) -> Path:
    """Trajectory records as JSON Lines at ``path``, written atomically; with ``screenshots`` (True: every one
    at full size, or a :class:`~core.runtime.shots.ScreenshotPolicy`) the PNGs go to ``shots/`` beside it
    (``<trajectory>-init.png`` for the first observation, ``<trajectory>-<turn>.png``); a record whose
    screenshots the policy's budget dropped says how many in ``screenshots_dropped``."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    policy = ScreenshotPolicy() if screenshots is True else screenshots or None
    writer = ShotWriter(directory, policy) if policy is not None else None
    tmp = path.with_suffix(".tmp")
    try:
        _write_records(tmp, trajectories, writer)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        DiskFull.check(exc, path)
        raise
    os.replace(tmp, path)
    if writer is not None and writer.dropped:
        log.warning("screenshot budget reached: later screenshots were not kept", path=str(path),
                    dropped=writer.dropped, budget_mb=writer.policy.budget_mb)
    return path


def _write_records(tmp: Path, trajectories: Iterable[Trajectory], writer: ShotWriter | None) -> None:
    with tmp.open("w", encoding="utf-8") as fh:
        for traj in trajectories:
            paths: dict[int | str, str] = {}
            dropped = writer.dropped if writer else 0
            if writer is not None:
                first = traj.initial_observation
                if first is not None and first.screenshot is not None:
                    if (rel := writer.write(f"{traj.trajectory_id}-init", first.screenshot)) is not None:
                        paths["initial"] = rel
                for turn in traj.turns:
                    if turn.observation is not None and turn.observation.screenshot is not None:
                        rel = writer.write(f"{traj.trajectory_id}-{turn.index:02d}", turn.observation.screenshot)
                        if rel is not None:
                            paths[turn.index] = rel
            record = trajectory_record(traj, paths)
            recording = record.get("recording")
            if isinstance(recording, str) and os.path.isabs(recording):  # the viewer resolves it against rollouts/
                record["recording"] = os.path.relpath(recording, tmp.parent) if os.path.exists(recording) else None
            if writer is not None:
                record["screenshot_max_side"] = writer.policy.max_side
                if writer.dropped > dropped:
                    record["screenshots_dropped"] = writer.dropped - dropped
            fh.write(json.dumps(record, default=str) + "\n")
