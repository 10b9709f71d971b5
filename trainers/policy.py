"""The sampling distribution shared by rollout engines and trainers (one convention, two users).

The policy pi(a|x) that is sampled from, scored by the importance ratio and
regularized by the KL term is::

    softmax(logits / temperature) with suppressed token ids removed (logit -inf)

* Temperature: a rollout samples at temperature T (paper: 0.8), so the
  logprob it reports is under the tempered distribution; the trainer divides
  its logits by the same T (as verl does) so that, at equal weights, the
  importance ratio is exactly 1 and the clipping acts on real policy change.
* Suppression: rollouts never sample vision/special tokens (a random or young
  model would emit image pads). Those ids are removed from the support on both
  sides, so the rollout logprob and the trainer's recomputation agree.
* top-p truncation (off in the paper) is *not* part of the policy: a rollout
  with ``top_p < 1`` still reports the untruncated tempered logprob.
"""

from __future__ import annotations

from typing import Iterable

import torch


def suppression_mask(vocab_size: int, suppressed_ids: Iterable[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """Boolean ``[vocab_size]`` mask, True for ids the policy never emits."""
    mask = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    ids = [i for i in suppressed_ids if 0 <= i < vocab_size]
    if ids:
        mask[torch.tensor(ids, dtype=torch.long, device=device)] = True
    return mask


def policy_logits(logits: torch.Tensor, *, temperature: float, suppressed: torch.Tensor | None = None) -> torch.Tensor:
    """Float32 logits of the policy distribution (tempered, suppressed ids at -inf)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    out = logits.float() / temperature
    if suppressed is not None:
        if suppressed.shape[-1] != out.shape[-1]:
            raise ValueError(f"suppression mask covers {suppressed.shape[-1]} ids but the logits have "
                             f"{out.shape[-1]}")
        out = out.masked_fill(suppressed.to(out.device), float("-inf"))
    return out


def policy_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, *, temperature: float, suppressed: torch.Tensor | None = None
) -> torch.Tensor:
    """log pi(target) for each position: ``logits`` is ``[..., vocab]``, ``targets`` is ``[...]``."""
    logp = torch.log_softmax(policy_logits(logits, temperature=temperature, suppressed=suppressed), dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1).to(torch.long)).squeeze(-1)


def policy_entropy(logits: torch.Tensor, *, temperature: float, suppressed: torch.Tensor | None = None) -> torch.Tensor:
    """Entropy of the policy distribution at each position (suppressed ids contribute 0)."""
    logp = torch.log_softmax(policy_logits(logits, temperature=temperature, suppressed=suppressed), dim=-1)
    p = logp.exp()
    return -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(dim=-1)
