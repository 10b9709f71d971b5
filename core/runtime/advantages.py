"""Episode rewards and GRPO group-relative advantages (backend-independent, pure Python).

The advantage of a rollout is computed over the n rollouts of its task and
shared by every segment of that rollout; the loss mask already makes each
response token count once, so a long episode cut into many segments is not
re-weighted.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Sequence

from core.types import EpisodeStatus, RolloutGroup, Trajectory

if TYPE_CHECKING:
    from core.config import AlgorithmSection


def episode_reward(trajectory: Trajectory, incomplete_penalty: float) -> float:
    """The judge's score (0 without an ``ok`` judgement) plus ``incomplete_penalty`` if unfinished.

    Episodes lost to an environment failure have no reward: they are retried,
    never trained on, so asking for one is an error.
    """
    if trajectory.status == EpisodeStatus.ENV_ERROR:
        raise ValueError(
            f"trajectory {trajectory.trajectory_id} (task {trajectory.task_id}) ended in an environment error; "
            "such episodes are retried, not scored — drop it from the group before computing rewards"
        )
    judgement = trajectory.judgement
    score = float(judgement.score) if judgement is not None else 0.0
    if trajectory.status == EpisodeStatus.INCOMPLETE:
        score += incomplete_penalty
    return score


def group_advantages(rewards: Sequence[float], *, eps: float = 1e-6, normalize_std: bool = True,
                     negative_scale: float = 1.0) -> list[float]:
    """``(r - mean) / (std + eps)`` with the unbiased std, or ``r - mean``; 0 for groups of one.

    ``negative_scale`` multiplies the below-average rollouts' advantages (1: GRPO as in the paper; < 1
    weights failures less than successes, an asymmetric REINFORCE)."""
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    mean = math.fsum(rewards) / n
    centered = [r - mean for r in rewards]
    if normalize_std:
        std = math.sqrt(math.fsum(c * c for c in centered) / (n - 1))
        centered = [c / (std + eps) for c in centered]
    return [c * negative_scale if c < 0 else c for c in centered]


def withhold_unparsable_credit(trajectory: Trajectory) -> int:
    """Take the responses that did not parse out of the loss of a rollout with a positive advantage.

    A malformed response changed nothing on the desktop, so an episode that recovered from it and succeeded
    owes it nothing; reinforcing it teaches the policy to emit it again. In rollouts with a negative
    advantage such responses stay in the loss and are pushed down. Returns the number of tokens withheld.
    """
    bad = {turn.index for turn in trajectory.turns if turn.parse_error}
    if not bad or not trajectory.segments or trajectory.segments[0].advantage <= 0:
        return 0
    withheld = 0
    for segment in trajectory.segments:
        if not segment.responses and any(segment.loss_mask):
            raise ValueError(
                f"segment {segment.trajectory_id}#{segment.index} does not record where its responses sit "
                "(Segment.responses), which algorithm.credit_unparsable_turns: false needs; use a segmenter that "
                "records them (the built-in ones do) or set the option back to true")
        for turn, start, end in segment.responses:
            if turn in bad:
                withheld += sum(segment.loss_mask[start:end])
                segment.loss_mask[start:end] = [0] * (end - start)
    return withheld


def assign_advantages(
    groups: Iterable[RolloutGroup], *, incomplete_penalty: float, eps: float = 1e-6, normalize_std: bool = True,
    negative_scale: float = 1.0, credit_unparsable: bool = True,
) -> dict[str, float]:
    """Set each trajectory's reward and advantage and copy both onto its segments; returns id -> advantage.

    ``credit_unparsable=False``: responses that did not parse are left out of the loss of rollouts with a
    positive advantage (:func:`withhold_unparsable_credit`)."""
    advantages: dict[str, float] = {}
    for group in groups:
        if not group.trajectories:
            raise ValueError(f"rollout group of task {group.task_id} has no trajectories")
        for traj in group.trajectories:
            if traj.task_id != group.task_id:
                raise ValueError(
                    f"trajectory {traj.trajectory_id} belongs to task {traj.task_id}, not to its group's task "
                    f"{group.task_id}"
                )
            traj.reward = episode_reward(traj, incomplete_penalty)
        values = group_advantages(group.rewards, eps=eps, normalize_std=normalize_std, negative_scale=negative_scale)
        for traj, value in zip(group.trajectories, values):
            if traj.trajectory_id in advantages:
                raise ValueError(f"trajectory id {traj.trajectory_id} occurs twice in the batch")
            advantages[traj.trajectory_id] = value
            traj.metadata["advantage"] = value
            for segment in traj.segments:
                if segment.trajectory_id != traj.trajectory_id:
                    raise ValueError(
                        f"segment {segment.trajectory_id}#{segment.index} is attached to trajectory "
                        f"{traj.trajectory_id}"
                    )
                segment.reward = traj.reward
                segment.advantage = value
            if not credit_unparsable:
                traj.metadata["withheld_tokens"] = withhold_unparsable_credit(traj)
    return advantages


def assign_with(groups: Iterable[RolloutGroup], algorithm: "AlgorithmSection") -> dict[str, float]:
    """:func:`assign_advantages` with every setting from the config's ``algorithm`` section."""
    return assign_advantages(groups, incomplete_penalty=algorithm.incomplete_penalty, eps=algorithm.advantage_eps,
                             normalize_std=algorithm.normalize_advantage_std,
                             negative_scale=algorithm.negative_advantage_scale,
                             credit_unparsable=algorithm.credit_unparsable_turns)
