"""The RL objective against hand-computed values (appendix D of the paper)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.config import AlgorithmSection
from core.types import EpisodeStatus, Judgement, JudgementStatus, RolloutGroup, Segment, Trajectory, Turn
from trainers.objective import (
    StepStats,
    assign_advantages,
    assign_segment_advantages,
    clipped_surrogate,
    count_trainable_tokens,
    episode_reward,
    group_advantages,
    grpo_token_loss,
    importance_ratio,
    k3_kl,
)

ALGO = AlgorithmSection()


def _traj(tid: str, task: str, score: float | None, status: EpisodeStatus = EpisodeStatus.COMPLETED) -> Trajectory:
    judgement = Judgement(score=score) if score is not None else None
    return Trajectory(trajectory_id=tid, task_id=task, group_id=task, status=status, judgement=judgement)


def _segment(tid: str, index: int, n: int = 4) -> Segment:
    return Segment(tid, tid.split("/")[0], index, list(range(n)), [0, 1, 1, 0][:n], [0.0] * n)


# --- rewards -----------------------------------------------------------------


def test_rewards_use_judge_score_and_incomplete_penalty() -> None:
    assert episode_reward(_traj("a", "t", 1.0), -0.2) == 1.0
    assert episode_reward(_traj("a", "t", 0.0, EpisodeStatus.INCOMPLETE), -0.2) == pytest.approx(-0.2)
    # the penalty is added to whatever the final state scored
    assert episode_reward(_traj("a", "t", 0.5, EpisodeStatus.INCOMPLETE), -0.2) == pytest.approx(0.3)
    assert episode_reward(_traj("a", "t", None), -0.2) == 0.0
    crashed = _traj("a", "t", None)
    crashed.judgement = Judgement(score=0.7, status=JudgementStatus.CRASHED)  # scores 0 unless ok
    assert episode_reward(crashed, -0.2) == 0.0


def test_env_error_episode_has_no_reward() -> None:
    with pytest.raises(ValueError, match="environment error"):
        episode_reward(_traj("a", "t", 1.0, EpisodeStatus.ENV_ERROR), -0.2)


# --- advantages --------------------------------------------------------------


def test_group_advantages_hand_computed() -> None:
    # mean 0.25, unbiased std sqrt((0.75^2 + 3*0.25^2)/3) = 0.5
    assert group_advantages([1.0, 0.0, 0.0, 0.0], eps=0.0) == pytest.approx([1.5, -0.5, -0.5, -0.5])
    assert group_advantages([1.0, 0.0, 0.0, 0.0], normalize_std=False) == pytest.approx([0.75, -0.25, -0.25, -0.25])
    assert group_advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]
    assert group_advantages([1.0]) == [0.0]


def test_negative_advantage_scale_weights_only_the_below_average_rollouts() -> None:
    assert group_advantages([1.0, 0.0, 0.0, 0.0], eps=0.0, negative_scale=0.2) == pytest.approx(
        [1.5, -0.1, -0.1, -0.1])
    assert group_advantages([1.0, 1.0, 0.0], normalize_std=False, negative_scale=0.0) == pytest.approx(
        [1 / 3, 1 / 3, 0.0])
    with pytest.raises(ValueError, match="negative_advantage_scale"):
        AlgorithmSection(negative_advantage_scale=1.5)


def test_assign_advantages_shares_one_value_across_a_rollouts_segments() -> None:
    trajs = [
        _traj("t1/0", "t1", 1.0),
        _traj("t1/1", "t1", 0.0),
        _traj("t1/2", "t1", 0.0, EpisodeStatus.INCOMPLETE),
        _traj("t1/3", "t1", 0.0),
    ]
    for i, traj in enumerate(trajs):
        traj.segments = [_segment(traj.trajectory_id, k) for k in range(i + 1)]
    result = assign_advantages([RolloutGroup("t1", trajs)], ALGO)
    rewards = [1.0, 0.0, -0.2, 0.0]
    mean = sum(rewards) / 4
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 3)
    expected = [(r - mean) / (std + ALGO.advantage_eps) for r in rewards]
    assert [t.reward for t in trajs] == pytest.approx(rewards)
    assert [result[t.trajectory_id] for t in trajs] == pytest.approx(expected)
    for traj, adv in zip(trajs, expected):
        assert [s.advantage for s in traj.segments] == pytest.approx([adv] * len(traj.segments))
        assert {s.reward for s in traj.segments} == {traj.reward}


def test_assign_advantages_rejects_mixed_groups_and_duplicates() -> None:
    with pytest.raises(ValueError, match="not to its group's task"):
        assign_advantages([RolloutGroup("t1", [_traj("x", "t2", 1.0)])], ALGO)
    a = _traj("same", "t1", 1.0)
    b = _traj("same", "t2", 1.0)
    with pytest.raises(ValueError, match="twice"):
        assign_advantages([RolloutGroup("t1", [a]), RolloutGroup("t2", [b])], ALGO)


def _episode(tid: str, score: float, bad_turns: set[int]) -> Trajectory:
    """Three turns of 2 response tokens each; the turns in ``bad_turns`` did not parse. Turns 0-1 sit in
    segment 0, turn 2 in segment 1 (a sliding window's cut)."""
    traj = _traj(tid, "t1", score)
    traj.turns = [Turn(i, "x", [7, 7], [-0.1, -0.1], parse_error="not JSON" if i in bad_turns else None)
                  for i in range(3)]
    traj.segments = [
        Segment(tid, "t1", 0, [1, 7, 7, 2, 7, 7], [0, 1, 1, 0, 1, 1], [0.0] * 6, responses=[(0, 1, 3), (1, 4, 6)]),
        Segment(tid, "t1", 1, [1, 2, 7, 7], [0, 0, 1, 1], [0.0] * 4, responses=[(2, 2, 4)]),
    ]
    return traj


def test_unparsable_responses_are_never_reinforced_but_still_pushed_down() -> None:
    lucky = _episode("t1/0", 1.0, bad_turns={1})  # succeeded after a malformed response
    failed = _episode("t1/1", 0.0, bad_turns={1, 2})
    clean = _episode("t1/2", 0.0, bad_turns=set())
    algo = AlgorithmSection(credit_unparsable_turns=False)
    assign_advantages([RolloutGroup("t1", [lucky, failed, clean])], algo)
    assert lucky.segments[0].advantage > 0 > failed.segments[0].advantage
    assert lucky.segments[0].loss_mask == [0, 1, 1, 0, 0, 0] and lucky.segments[1].loss_mask == [0, 0, 1, 1]
    assert lucky.metadata["withheld_tokens"] == 2
    assert failed.segments[0].loss_mask == [0, 1, 1, 0, 1, 1] and failed.metadata["withheld_tokens"] == 0
    # plain GRPO (the default) credits every response of the rollout
    plain = _episode("t1/0", 1.0, bad_turns={1})
    assign_advantages([RolloutGroup("t1", [plain, _episode("t1/1", 0.0, set())])], ALGO)
    assert plain.segments[0].loss_mask == [0, 1, 1, 0, 1, 1] and "withheld_tokens" not in plain.metadata


def test_withholding_credit_needs_segments_that_record_their_responses() -> None:
    lucky = _episode("t1/0", 1.0, bad_turns={0})
    lucky.segments = [Segment("t1/0", "t1", 0, [1, 7, 7], [0, 1, 1], [0.0] * 3)]  # no spans recorded
    with pytest.raises(ValueError, match="Segment.responses"):
        assign_advantages([RolloutGroup("t1", [lucky, _episode("t1/1", 0.0, set())])],
                          AlgorithmSection(credit_unparsable_turns=False))


def test_assign_segment_advantages_reports_orphans() -> None:
    segs = [_segment("t1/0", 0), _segment("t1/1", 0)]
    assign_segment_advantages(segs, {"t1/0": 0.5, "t1/1": -0.5}, {"t1/0": 1.0, "t1/1": 0.0})
    assert [s.advantage for s in segs] == [0.5, -0.5]
    assert [s.reward for s in segs] == [1.0, 0.0]
    with pytest.raises(ValueError, match="no advantage"):
        assign_segment_advantages([_segment("zz/0", 0)], {})


# --- token-level terms -------------------------------------------------------

# (log-ratio, advantage) -> (loss, d loss / d logp, region) computed by hand with eps_low 0.2, eps_high 0.28, c 3
CASES = [
    (0.1, 1.0, -math.exp(0.1), -math.exp(0.1), "none"),  # inside the trust region
    (0.5, 1.0, -1.28, 0.0, "high"),  # A>0, ratio 1.65 > 1.28: clipped, no gradient
    (-0.5, 1.0, -math.exp(-0.5), -math.exp(-0.5), "none"),  # A>0, ratio 0.61 < 0.8: min keeps the ratio
    (-0.5, -1.0, 0.8, 0.0, "low"),  # A<0, ratio 0.61 < 0.8: clipped at 0.8
    (0.5, -1.0, math.exp(0.5), math.exp(0.5), "none"),  # A<0, ratio 1.65 in (1.28, 3): unclipped
    (1.5, -1.0, 3.0, 0.0, "dual"),  # A<0, ratio 4.48 > c: capped at -c*A
    (2.0, -0.5, 1.5, 0.0, "dual"),  # A<0, ratio 7.39: cap 3 * 0.5
    (0.3, 0.0, 0.0, 0.0, "none"),  # A=0 contributes nothing
]


def test_clipped_surrogate_regions_values_and_gradients() -> None:
    rollout = torch.full((len(CASES),), -1.0, dtype=torch.float64)
    logp = (rollout + torch.tensor([c[0] for c in CASES], dtype=torch.float64)).requires_grad_(True)
    adv = torch.tensor([c[1] for c in CASES], dtype=torch.float64)
    out = clipped_surrogate(logp, rollout, adv, clip_low=0.2, clip_high=0.28, clip_c=3.0)
    assert out.loss.tolist() == pytest.approx([c[2] for c in CASES], abs=1e-12)
    out.loss.sum().backward()
    assert logp.grad.tolist() == pytest.approx([c[3] for c in CASES], abs=1e-12)
    regions = ["high" if h else "low" if lo else "dual" if d else "none"
               for h, lo, d in zip(out.clipped_high.tolist(), out.clipped_low.tolist(), out.dual_clipped.tolist())]
    assert regions == [c[4] for c in CASES]


def test_clipped_surrogate_rejects_bad_cap() -> None:
    with pytest.raises(ValueError, match="clip_c"):
        clipped_surrogate(torch.zeros(1), torch.zeros(1), torch.ones(1), clip_low=0.2, clip_high=0.28, clip_c=1.0)


def test_importance_ratio_and_k3_hand_values() -> None:
    assert importance_ratio(torch.tensor([-1.0]), torch.tensor([-1.5])).item() == pytest.approx(math.exp(0.5))
    # d = ref - logp = -0.5: exp(-0.5) + 0.5 - 1
    assert k3_kl(torch.tensor([-1.0]), torch.tensor([-1.5])).item() == pytest.approx(math.exp(-0.5) - 0.5)
    assert k3_kl(torch.tensor([-2.0]), torch.tensor([-2.0])).item() == 0.0
    # k3 is bounded per token, and the ratio does not overflow
    assert k3_kl(torch.tensor([-60.0]), torch.tensor([0.0])).item() == 10.0
    assert math.isfinite(importance_ratio(torch.tensor([0.0]), torch.tensor([-100.0])).item())


def test_grpo_token_loss_combines_terms_over_masked_tokens() -> None:
    algo = AlgorithmSection(kl_coef=0.1, entropy_coef=0.01)
    logp = torch.tensor([[-1.0, -1.0 + 0.5, -1.0, -3.0]], dtype=torch.float64)
    rollout = torch.tensor([[-1.0, -1.0, -1.0, 0.0]], dtype=torch.float64)
    ref = torch.tensor([[-1.5, -1.0, -1.0, 0.0]], dtype=torch.float64)
    adv = torch.full((1, 4), 1.0, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0]])
    entropy = torch.tensor([[2.0, 1.0, 0.5, 9.0]], dtype=torch.float64)
    stats = StepStats()
    loss = grpo_token_loss(logp, rollout, adv, mask, algorithm=algo, normalizer=6.0, ref_logprobs=ref,
                           entropy=entropy, stats=stats)
    pg = [-1.0, -1.28, -1.0]
    kl = [math.exp(-0.5) - 0.5, math.exp(-0.5) + 0.5 - 1, 0.0]
    ent = [2.0, 1.0, 0.5]
    expected = sum(p + 0.1 * k - 0.01 * e for p, k, e in zip(pg, kl, ent)) / 6.0
    assert loss.item() == pytest.approx(expected)
    summary = stats.summary()
    assert summary["loss/tokens"] == 3
    assert summary["loss/pg"] == pytest.approx(sum(pg) / 3)
    assert summary["loss/kl"] == pytest.approx(sum(kl) / 3)
    assert summary["actor/clipfrac_high"] == pytest.approx(1 / 3)
    assert summary["actor/clipfrac"] == pytest.approx(1 / 3)
    assert summary["actor/approx_kl"] == pytest.approx((math.exp(0.5) - 1.5) / 3)  # k3: (r - 1) - log r
    assert summary["actor/ratio_max"] == pytest.approx(math.exp(0.5))
    assert summary["actor/ratio_min"] == pytest.approx(1.0)


def test_grpo_token_loss_demands_inputs_its_coefficients_need() -> None:
    z = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="reference logprobs"):
        grpo_token_loss(z, z, z, z, algorithm=AlgorithmSection(kl_coef=1e-4), normalizer=1)
    with pytest.raises(ValueError, match="entropy"):
        grpo_token_loss(z, z, z, z, algorithm=AlgorithmSection(kl_coef=0, entropy_coef=0.1), normalizer=1)
    with pytest.raises(ValueError, match="normalizer"):
        grpo_token_loss(z, z, z, z, algorithm=AlgorithmSection(kl_coef=0), normalizer=0)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 7), min_size=1, max_size=6),
    split=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_micro_batch_split_never_changes_the_step_gradient(lengths: list[int], split: int, seed: int) -> None:
    """Token-mean over the step: any partition into micro-batches gives the same loss and gradient."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for n in lengths:
        mask = (torch.rand(n, generator=gen) > 0.3).to(torch.int64)
        rows.append((torch.randn(n, generator=gen, dtype=torch.float64) * 0.3 - 1,
                     torch.randn(n, generator=gen, dtype=torch.float64) * 0.3 - 1,
                     torch.randn(n, generator=gen, dtype=torch.float64) * 0.3 - 1, mask,
                     float(torch.randn(1, generator=gen))))
    total = sum(int(r[3].sum()) for r in rows)
    if total == 0:
        return
    params = [r[0].clone().requires_grad_(True) for r in rows]

    def loss_of(indices: list[int]) -> torch.Tensor:
        out = torch.zeros((), dtype=torch.float64)
        for i in indices:
            _, rollout, ref, mask, adv = rows[i]
            out = out + grpo_token_loss(params[i], rollout, torch.full_like(rollout, adv), mask, algorithm=ALGO,
                                        normalizer=total, ref_logprobs=ref)
        return out

    whole = loss_of(list(range(len(rows))))
    grads_whole = torch.autograd.grad(whole, params)
    pieces = [list(range(len(rows)))[i : i + split] for i in range(0, len(rows), split)]
    parts = [loss_of(p) for p in pieces]
    grads_parts = [torch.zeros_like(p) for p in params]
    for part in parts:
        for acc, g in zip(grads_parts, torch.autograd.grad(part, params, allow_unused=True)):
            if g is not None:
                acc += g
    assert float(sum(p.detach() for p in parts)) == pytest.approx(float(whole.detach()), abs=1e-12)
    for a, b in zip(grads_whole, grads_parts):
        torch.testing.assert_close(a, b)


def test_count_trainable_tokens_skips_the_unpredictable_first_position() -> None:
    segs = [Segment("a", "t", 0, [1, 2, 3], [1, 1, 0], [0.0] * 3), Segment("b", "t", 0, [1, 2], [0, 1], [0.0] * 2)]
    assert count_trainable_tokens(segs) == 2


def test_the_decoupled_objective_weights_stale_tokens_and_clips_against_the_proximal_policy() -> None:
    """A token the rollout policy sampled at p = 0.1 that the proximal policy (the weights at the iteration's
    start) gives 0.5: plain DAPO clipping against the rollout (ratio 5 > 1 + 0.28) zeroes its gradient for A > 0.
    Decoupled, the ratio is against the proximal policy (1 at the first step) and the token is weighted by
    pi_prox / pi_rollout = 5, truncated to tis_cap = 2: gradient -A * 2 * d log p; a fresh token (all three
    policies at 0.3) gets the plain -A * d log p. Normalizer 2."""
    rollout = torch.tensor([math.log(0.1), math.log(0.3)])
    proximal = torch.tensor([math.log(0.5), math.log(0.3)])
    adv, mask = torch.tensor([1.0, 1.0]), torch.tensor([1, 1])
    logp = proximal.clone().requires_grad_(True)
    plain = AlgorithmSection(kl_coef=0.0)
    grpo_token_loss(logp, rollout, adv, mask, algorithm=plain, normalizer=2.0).backward()
    assert logp.grad.tolist() == pytest.approx([0.0, -1.0 / 2])

    logp.grad = None
    tis = AlgorithmSection(kl_coef=0.0, tis_cap=2.0)
    assert tis.old_logprobs == "recompute"
    stats = StepStats()
    loss = grpo_token_loss(logp, rollout, adv, mask, algorithm=tis, normalizer=2.0, proximal_logprobs=proximal,
                           stats=stats)
    loss.backward()
    assert logp.grad.tolist() == pytest.approx([-2.0 / 2, -1.0 / 2])
    assert float(loss) == pytest.approx(-(2.0 + 1.0) / 2)
    summary = stats.summary()
    assert summary["actor/behaviour_weight_mean"] == pytest.approx((2.0 + 1.0) / 2)
    assert summary["actor/behaviour_capfrac"] == pytest.approx(0.5)
    # k3 KL(rollout || proximal) per token: r = 5 -> (5 - 1) - log 5; 0 for the fresh token
    assert summary["actor/behaviour_kl"] == pytest.approx((4.0 - math.log(5.0)) / 2)
    assert summary["actor/approx_kl"] == pytest.approx(0.0, abs=1e-7)  # the step starts at the proximal policy

    # uncapped: the full behaviour weight 5
    logp.grad = None
    uncapped = AlgorithmSection(kl_coef=0.0, old_logprobs="recompute")
    grpo_token_loss(logp, rollout, adv, mask, algorithm=uncapped, normalizer=2.0, proximal_logprobs=proximal).backward()
    assert logp.grad.tolist() == pytest.approx([-5.0 / 2, -1.0 / 2])


def test_a_later_step_is_clipped_against_the_proximal_policy_not_against_itself() -> None:
    """The second optimizer step of an iteration: the policy moved token 0 from the proximal 0.5 to 0.8 (ratio
    1.6 > 1 + 0.28), so with A > 0 PPO's clip zeroes its gradient; token 1 moved within the range (0.3 -> 0.33,
    ratio 1.1) keeps -A * w * ratio * d log p with w = 1. (Clipping against the step's own start, as tis_cap once
    did, would give every step a ratio of 1 and never clip.)"""
    rollout = torch.tensor([math.log(0.1), math.log(0.3)])
    proximal = torch.tensor([math.log(0.5), math.log(0.3)])
    logp = torch.tensor([math.log(0.8), math.log(0.33)], requires_grad=True)
    adv, mask = torch.tensor([1.0, 1.0]), torch.tensor([1, 1])
    stats = StepStats()
    grpo_token_loss(logp, rollout, adv, mask, algorithm=AlgorithmSection(kl_coef=0.0, tis_cap=2.0),
                    normalizer=2.0, proximal_logprobs=proximal, stats=stats).backward()
    assert logp.grad.tolist() == pytest.approx([0.0, -1.1 / 2])
    assert stats.summary()["actor/clipfrac_high"] == pytest.approx(0.5)


def test_tis_cap_needs_the_recomputed_proximal_policy() -> None:
    with pytest.raises(ValueError, match="tis_cap \\(2.0\\) caps the behaviour weight.*old_logprobs: recompute"):
        AlgorithmSection(tis_cap=2.0, old_logprobs="rollout")
    assert AlgorithmSection().old_logprobs == "rollout"
    logp = torch.tensor([0.0], requires_grad=True)
    with pytest.raises(ValueError, match="needs the proximal policy's logprobs"):
        grpo_token_loss(logp, torch.tensor([0.0]), torch.tensor([1.0]), torch.tensor([1]),
                        algorithm=AlgorithmSection(kl_coef=0.0, tis_cap=2.0), normalizer=1.0)
