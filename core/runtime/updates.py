"""Optimizer steps per iteration: an iteration's groups dealt into PPO mini-batches, over several epochs.

With ``algorithm.ppo_mini_batches = m`` and ``algorithm.ppo_epochs = e`` one
iteration takes ``m * e`` optimizer steps (verl's ``ppo_mini_batch_size`` /
``ppo_epochs``; 1 and 1 are the paper's one step per iteration). Groups stay
whole, so every step sees each of its tasks' rollouts side by side, and the
order is reshuffled every epoch from ``(seed, iteration, epoch)`` — the same on
a resumed run. Advantages are computed once per iteration and importance ratios
stay against one old policy for the whole iteration — the rollout logprobs, or with
``algorithm.old_logprobs: recompute`` the proximal logprobs the trainer recomputes
before the first step (:func:`set_proximal`) — so the later steps of an iteration
are clipped exactly as PPO clips them.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from core.types import RolloutGroup, Segment

#: how each step's metric is combined into the iteration's (anything else: the mean over steps)
_SUMMED_PREFIXES = ("time/", "batch/")
_SUMMED = {"loss/tokens"}


def mini_batches(groups: Sequence[RolloutGroup], *, count: int, epochs: int, seed: int,
                 iteration: int) -> list[list[Segment]]:
    """The segments of each optimizer step, in order: ``epochs`` passes of ``min(count, len(groups))`` steps."""
    if count < 1 or epochs < 1:
        raise ValueError(f"ppo_mini_batches ({count}) and ppo_epochs ({epochs}) must be at least 1")
    if not groups:
        return []
    steps: list[list[Segment]] = []
    parts = min(count, len(groups))
    for epoch in range(epochs):
        order = (np.arange(len(groups)) if parts == 1 and epochs == 1
                 else np.random.default_rng([seed, iteration, epoch]).permutation(len(groups)))
        for chunk in np.array_split(order, parts):
            segments = [s for i in chunk for t in groups[int(i)].trajectories for s in t.segments]
            if segments:
                steps.append(segments)
    return steps


def set_proximal(segments: Sequence[Segment], proximal: Sequence[Sequence[float]]) -> None:
    """Give each segment its proximal logprobs (the trainer's ``recompute_logprobs``, in the same order)."""
    if len(proximal) != len(segments):
        raise ValueError(f"the trainer recomputed logprobs for {len(proximal)} segments of {len(segments)}")
    for segment, logprobs in zip(segments, proximal):
        if len(logprobs) != segment.num_tokens:
            raise ValueError(f"segment {segment.trajectory_id}#{segment.index}: the trainer recomputed "
                             f"{len(logprobs)} logprobs for {segment.num_tokens} tokens")
        segment.proximal_logprobs = [float(v) for v in logprobs]


def merge_step_metrics(steps: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """One iteration's trainer metrics from its steps' (times, batch sizes and token counts summed; extremes
    kept; everything else averaged) plus ``optimizer_steps``. One step: its metrics unchanged.

    A step the KL stop skipped (``actor/kl_stopped``) made no update: it adds only ``actor/kl_stopped: 1``, its
    time, and its KL to ``actor/approx_kl_max`` (the largest KL any step of the iteration started from)."""
    applied = [s for s in steps if not s.get("actor/kl_stopped")]
    stopped = [s for s in steps if s.get("actor/kl_stopped")]
    kl = [float(s["actor/approx_kl"]) for s in steps if "actor/approx_kl" in s]
    merged = _merge(applied) if applied else {"optimizer_steps": 0.0}
    if kl:
        merged["actor/approx_kl_max"] = max(kl)
    if stopped:
        merged["actor/kl_stopped"] = 1.0
        merged["time/step"] = merged.get("time/step", 0.0) + sum(float(s.get("time/step", 0.0)) for s in stopped)
    return merged


def _merge(steps: Sequence[Mapping[str, float]]) -> dict[str, float]:
    if len(steps) == 1:
        return {**steps[0], "optimizer_steps": 1.0}
    merged: dict[str, float] = {}
    keys = dict.fromkeys(k for step in steps for k in step)
    for key in keys:
        values = [float(step[key]) for step in steps if key in step]
        if key.startswith(_SUMMED_PREFIXES) or key in _SUMMED:
            merged[key] = sum(values)
        elif key.endswith("_max"):
            merged[key] = max(values)
        elif key.endswith("_min"):
            merged[key] = min(values)
        else:
            merged[key] = sum(values) / len(values)
    merged["optimizer_steps"] = float(len(steps))
    return merged
