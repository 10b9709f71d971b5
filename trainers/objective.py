"""The RL objective of the paper's appendix D, independent of any trainer backend.

Pure functions on tensors and on the typed objects of :mod:`core.types`:

* rewards from episode outcomes (judge score, plus the incomplete-episode penalty),
* GRPO group-relative advantages over the n rollouts of a task, shared by every
  segment of a rollout,
* the token-level policy loss: importance ratio against the rollout logprobs (or, decoupled, against
  the recomputed proximal logprobs with a capped behaviour weight, as AReaL),
  DAPO asymmetric clipping, dual clip for negative advantages (as verl's
  ``compute_policy_loss_vanilla``), k3 KL to the reference policy, entropy bonus
  (per-token entropies from :func:`trainers.policy.policy_entropy`),
* token-mean aggregation whose normalizer is fixed for the whole optimizer step,
  so micro-batching never changes the gradient,
* the warm start's cross-entropy objective on demonstrations
  (:func:`cross_entropy_token_loss`), behind the same call (:func:`token_loss`) so
  every trainer backend offers both (``objective``: see :data:`core.interfaces.OBJECTIVES`).

Every hyperparameter comes from :class:`core.config.AlgorithmSection`. Rewards and
advantages themselves are computed by :mod:`core.runtime.advantages` (the loop needs them
without torch); this module re-exports them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import torch

from core.runtime import advantages as core_advantages
from core.runtime.advantages import episode_reward, group_advantages
from core.config import AlgorithmSection
from core.types import RolloutGroup, Segment

__all__ = [
    "ClippedSurrogate", "StepStats", "assign_advantages", "assign_segment_advantages", "check_objective",
    "clipped_surrogate", "count_trainable_tokens", "cross_entropy_token_loss", "episode_reward",
    "group_advantages", "grpo_token_loss", "importance_ratio", "k3_kl", "token_loss",
]

#: log-ratio bounds before exp(): beyond them the ratio is numerically meaningless anyway
_LOG_RATIO_BOUND = 20.0
#: k3 is clamped to this magnitude per token (a single wild token must not dominate the KL term)
_K3_BOUND = 10.0


# ---------------------------------------------------------------------------
# Rewards and advantages (per trajectory): the loop needs them without torch, so they
# live in core.runtime.advantages; this wrapper takes the hyperparameters from the config section.
# ---------------------------------------------------------------------------


def assign_advantages(groups: Iterable[RolloutGroup], algorithm: AlgorithmSection) -> dict[str, float]:
    """Set each trajectory's reward and advantage and copy both onto all of its segments.

    Rewards add ``algorithm.incomplete_penalty`` to unfinished episodes; the
    GRPO advantage is computed over the n rollouts of each task and shared by
    every segment of a rollout. Returns trajectory id -> advantage.
    """
    return core_advantages.assign_with(groups, algorithm)


def assign_segment_advantages(
    segments: Iterable[Segment], advantages: Mapping[str, float], rewards: Mapping[str, float] | None = None
) -> None:
    """Copy per-trajectory advantages (and rewards) onto segments built separately from their trajectories."""
    for segment in segments:
        try:
            segment.advantage = float(advantages[segment.trajectory_id])
        except KeyError:
            raise ValueError(
                f"segment {segment.trajectory_id}#{segment.index} has no advantage: its trajectory is not in "
                "the batch's groups"
            ) from None
        if rewards is not None:
            segment.reward = float(rewards[segment.trajectory_id])


# ---------------------------------------------------------------------------
# Token-level terms
# ---------------------------------------------------------------------------


def importance_ratio(logprobs: torch.Tensor, rollout_logprobs: torch.Tensor) -> torch.Tensor:
    """rho_t = pi_theta(a_t|x_<t) / pi_rollout(a_t|x_<t), computed in log space and bounded."""
    log_ratio = torch.clamp(logprobs - rollout_logprobs, -_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)
    return torch.exp(log_ratio)


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token low-variance KL(pi_theta || pi_ref) estimate: ``exp(d) - d - 1`` with ``d = ref - logp``.

    Non-negative, unbiased for the sampled tokens, and with far lower variance
    than ``logp - ref`` (Schulman's k3).
    """
    d = torch.clamp(ref_logprobs - logprobs, -_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)
    return torch.clamp(torch.exp(d) - d - 1.0, -_K3_BOUND, _K3_BOUND)


@dataclass
class ClippedSurrogate:
    """Per-token policy loss and which clipping region each token fell into."""

    loss: torch.Tensor  # -objective per token (minimised)
    ratio: torch.Tensor
    clipped_high: torch.Tensor  # bool: A > 0 and ratio > 1 + eps_high (no gradient)
    clipped_low: torch.Tensor  # bool: A < 0 and ratio < 1 - eps_low (no gradient)
    dual_clipped: torch.Tensor  # bool: A < 0 and ratio > c (loss capped at -c*A, no gradient)


def clipped_surrogate(
    logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    clip_c: float,
) -> ClippedSurrogate:
    """DAPO asymmetric clipping plus dual clip for negative advantages.

    Per token: ``l1 = -A*rho``, ``l2 = -A*clip(rho, 1-eps_low, 1+eps_high)``,
    ``l = max(l1, l2)``; when ``A < 0`` the loss is further capped at
    ``-A*c`` so a very unlikely-under-rollout token with a negative advantage
    cannot blow up the update (dual-clip PPO).
    """
    if clip_c <= 1.0:
        raise ValueError(f"clip_c (the dual-clip cap) must be > 1, got {clip_c}")
    advantages = advantages.to(logprobs.dtype)
    ratio = importance_ratio(logprobs, rollout_logprobs)
    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(loss_unclipped, loss_clipped)
    cap = -advantages * clip_c
    negative = advantages < 0
    dual = negative & (loss > cap)
    loss = torch.where(negative, torch.minimum(loss, cap), loss)
    with torch.no_grad():
        clipped_bound = loss_clipped > loss_unclipped
        clipped_high = clipped_bound & (advantages > 0)
        clipped_low = clipped_bound & negative
    return ClippedSurrogate(loss, ratio, clipped_high, clipped_low, dual)


# ---------------------------------------------------------------------------
# The loss of one micro-batch, and metrics summed over a step
# ---------------------------------------------------------------------------


@dataclass
class StepStats:
    """Sums over the mask-1 tokens of a whole optimizer step; :meth:`summary` turns them into means."""

    tokens: float = 0.0
    pg_loss: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0
    #: KL(pi_rollout || pi_theta) per token, k3 estimate: (r - 1) - log r with r = pi_theta / pi_rollout (never
    #: negative, low variance; Schulman's and stable-baselines' approx_kl): what the KL stop compares with target_kl
    approx_kl: float = 0.0
    ratio: float = 0.0
    clipped_high: float = 0.0
    clipped_low: float = 0.0
    dual_clipped: float = 0.0
    ratio_max: float = -math.inf
    ratio_min: float = math.inf
    nll: float = 0.0  # -log pi of the trained tokens (the cross-entropy objective's loss)
    #: the decoupled objective only: sums of the behaviour weight pi_proximal / pi_rollout (after the cap), of
    #: k3 KL(pi_rollout || pi_proximal) (how far the weights moved since the tokens were sampled), and the tokens
    #: whose weight tis_cap truncated
    behaviour_weight: float = 0.0
    behaviour_kl: float = 0.0
    behaviour_capped: float = 0.0

    def summary(self) -> dict[str, float]:
        n = max(self.tokens, 1.0)
        out = {
            "loss/tokens": self.tokens,
            "loss/pg": self.pg_loss / n,
            "loss/kl": self.kl / n,
            "actor/approx_kl": self.approx_kl / n,
            "actor/ratio_mean": self.ratio / n,
            "actor/ratio_max": self.ratio_max if self.tokens else 0.0,
            "actor/ratio_min": self.ratio_min if self.tokens else 0.0,
            "actor/clipfrac_high": self.clipped_high / n,
            "actor/clipfrac_low": self.clipped_low / n,
            "actor/clipfrac_dual": self.dual_clipped / n,
            "loss/nll": self.nll / n,
        }
        out["actor/clipfrac"] = out["actor/clipfrac_high"] + out["actor/clipfrac_low"]
        if self.behaviour_weight > 0:  # the decoupled objective (a weight is exp(.), never exactly 0)
            out["actor/behaviour_weight_mean"] = self.behaviour_weight / n
            out["actor/behaviour_kl"] = self.behaviour_kl / n
            out["actor/behaviour_capfrac"] = self.behaviour_capped / n
        if self.entropy > 0:  # a backend that measured it (softmax entropy is never exactly 0)
            out["actor/entropy"] = self.entropy / n
        return out


def grpo_token_loss(
    logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    algorithm: AlgorithmSection,
    normalizer: float,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    stats: StepStats | None = None,
    proximal_logprobs: torch.Tensor | None = None,
) -> torch.Tensor:
    """The loss of one micro-batch, already divided by the step's token count.

    All tensors are aligned per token (any shape, e.g. ``[batch, seq]``);
    ``advantages`` is broadcast per token (a segment's advantage repeated).
    ``normalizer`` must be the number of mask-1 tokens in the *whole step*
    (all micro-batches): summing the returned losses (or their gradients) over
    the micro-batches then equals one token-mean over the step, whatever the
    micro-batch split. ``stats`` (optional) accumulates metric sums.

    ``proximal_logprobs`` (``algorithm.old_logprobs: recompute``): the ratio is clipped against them instead of
    the rollout logprobs, and each token's loss is weighted by ``pi_proximal / pi_rollout`` (capped at
    ``tis_cap``), AReaL's decoupled PPO objective; without them the ratio is against ``rollout_logprobs``.
    """
    if normalizer <= 0:
        raise ValueError(f"normalizer must be the step's positive count of trainable tokens, got {normalizer}")
    mask = loss_mask.to(logprobs.dtype)
    old, weight, capped = rollout_logprobs, None, None
    if proximal_logprobs is not None:
        # the decoupled objective: clip against the proximal policy, weight by pi_proximal / pi_behaviour (both
        # recorded, so the weight is a constant), truncated at tis_cap when set
        old = proximal_logprobs.to(logprobs.dtype)
        weight = importance_ratio(old, rollout_logprobs.to(logprobs.dtype))
        if algorithm.tis_cap is not None:
            capped = weight > algorithm.tis_cap
            weight = torch.clamp(weight, max=algorithm.tis_cap)
    elif algorithm.tis_cap is not None:
        raise ValueError("tis_cap needs the proximal policy's logprobs (algorithm.old_logprobs: recompute); none "
                         "were given")
    surrogate = clipped_surrogate(
        logprobs,
        old,
        advantages,
        clip_low=algorithm.clip_low,
        clip_high=algorithm.clip_high,
        clip_c=algorithm.clip_c,
    )
    per_token = surrogate.loss if weight is None else surrogate.loss * weight
    kl = None
    if algorithm.kl_coef != 0.0:
        if ref_logprobs is None:
            raise ValueError("kl_coef is non-zero but no reference logprobs were given")
        kl = k3_kl(logprobs, ref_logprobs)
        per_token = per_token + algorithm.kl_coef * kl
    if algorithm.entropy_coef != 0.0:
        if entropy is None:
            raise ValueError("entropy_coef is non-zero but no per-token entropy was given")
        per_token = per_token - algorithm.entropy_coef * entropy
    loss = (per_token * mask).sum() / normalizer

    if stats is not None:
        with torch.no_grad():
            on = mask > 0
            stats.tokens += float(mask.sum())
            stats.pg_loss += float((surrogate.loss * mask).sum())
            if kl is not None:
                stats.kl += float((kl * mask).sum())
            elif ref_logprobs is not None:
                stats.kl += float((k3_kl(logprobs, ref_logprobs) * mask).sum())
            if entropy is not None:
                stats.entropy += float((entropy * mask).sum())
            stats.approx_kl += float((k3_kl(old, logprobs) * mask).sum())
            if weight is not None:
                stats.behaviour_weight += float((weight * mask).sum())
                stats.behaviour_kl += float((k3_kl(rollout_logprobs.to(old.dtype), old) * mask).sum())
                if capped is not None:
                    stats.behaviour_capped += float((capped & on).sum())
            stats.nll -= float((logprobs * mask).sum())
            stats.ratio += float((surrogate.ratio * mask).sum())
            stats.clipped_high += float((surrogate.clipped_high & on).sum())
            stats.clipped_low += float((surrogate.clipped_low & on).sum())
            stats.dual_clipped += float((surrogate.dual_clipped & on).sum())
            if bool(on.any()):
                stats.ratio_max = max(stats.ratio_max, float(surrogate.ratio[on].max()))
                stats.ratio_min = min(stats.ratio_min, float(surrogate.ratio[on].min()))
    return loss


def cross_entropy_token_loss(
    logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    normalizer: float,
    entropy: torch.Tensor | None = None,
    stats: StepStats | None = None,
) -> torch.Tensor:
    """The warm start's loss: the demonstrations' token-mean negative log-likelihood under the policy.

    ``logprobs`` follow the policy convention (:mod:`trainers.policy`: logits / T with the suppressed ids
    removed), so supervised fine-tuning fits exactly the distribution the rollouts sample from. As in
    :func:`grpo_token_loss`, ``normalizer`` is the trainable-token count of the whole step.
    """
    if normalizer <= 0:
        raise ValueError(f"normalizer must be the step's positive count of trainable tokens, got {normalizer}")
    mask = loss_mask.to(logprobs.dtype)
    loss = -(logprobs * mask).sum() / normalizer
    if stats is not None:
        with torch.no_grad():
            stats.tokens += float(mask.sum())
            stats.nll -= float((logprobs * mask).sum())
            if entropy is not None:
                stats.entropy += float((entropy * mask).sum())
    return loss


def check_objective(objective: str) -> None:
    """A clear error for an objective no backend implements."""
    from core.interfaces import OBJECTIVES

    if objective not in OBJECTIVES:
        raise ValueError(f"unknown training objective {objective!r}; available: {', '.join(OBJECTIVES)}")


def token_loss(
    objective: str,
    logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    algorithm: AlgorithmSection,
    normalizer: float,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    stats: StepStats | None = None,
    proximal_logprobs: torch.Tensor | None = None,
) -> torch.Tensor:
    """One micro-batch's loss under ``objective`` (``grpo`` or ``cross_entropy``); every backend calls this.
    ``entropy`` (per token, optional) feeds the entropy bonus where configured and ``actor/entropy`` always."""
    if objective == "cross_entropy":
        return cross_entropy_token_loss(logprobs, loss_mask, normalizer=normalizer, entropy=entropy, stats=stats)
    if objective == "grpo":
        return grpo_token_loss(logprobs, rollout_logprobs, advantages, loss_mask, algorithm=algorithm,
                               normalizer=normalizer, ref_logprobs=ref_logprobs, entropy=entropy, stats=stats,
                               proximal_logprobs=proximal_logprobs)
    raise ValueError(f"unknown training objective {objective!r}")


def count_trainable_tokens(segments: Sequence[Segment]) -> int:
    """The step normalizer: mask-1 tokens over all segments, excluding position 0 (it has no prediction)."""
    return sum(sum(s.loss_mask[1:]) for s in segments)
