"""What keeps RL from collapsing, on the tiny real Qwen3-VL: the KL stop, gradient-norm clipping, the learning-rate
schedule and the entropy the trainer reports, each against values derived by hand."""

from __future__ import annotations

import math

import pytest
import torch

from core.config import AlgorithmSection
from trainers.options import TorchTrainerOptions, learning_rate
from trainers.policy import policy_logits
from trainers.torch_backend import TorchTrainer

from .test_torch_trainer import _capture_gradients, _on_policy, _segments

ALGO = AlgorithmSection(kl_coef=0.0)


def _trainer(policy_model, **options) -> TorchTrainer:
    return TorchTrainer(TorchTrainerOptions(device="cpu", **options), model=policy_model, algorithm=ALGO)


def _k3_by_hand(trainer: TorchTrainer, segments) -> float:
    """KL(rollout || current) over the trained tokens, k3 per token: (r - 1) - log r, r = p_now / p_rollout."""
    now = trainer.recompute_logprobs(segments)
    total, count = 0.0, 0
    for seg, lp in zip(segments, now):
        for t in range(1, len(seg.input_ids)):
            if seg.loss_mask[t]:
                log_r = lp[t] - seg.rollout_logprobs[t]
                total += math.exp(log_r) - 1.0 - log_r
                count += 1
    return total / count


def test_the_kl_stop_skips_a_step_whose_batch_has_moved_past_the_limit(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, lr=5e-3)
    segments = _segments(make_segment)
    _on_policy(trainer, segments)
    first = trainer.train_step(segments, kl_limit=1e-12)  # on-policy: KL 0, below any limit
    assert first["actor/kl_stopped"] == 0.0 and first["actor/approx_kl"] == pytest.approx(0.0, abs=1e-9)
    moved = _k3_by_hand(trainer, segments)
    assert moved > 1e-4
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    stopped = trainer.train_step(segments, kl_limit=moved * 0.99)
    assert stopped["actor/kl_stopped"] == 1.0
    assert stopped["actor/approx_kl"] == pytest.approx(moved, rel=1e-4)
    assert all(torch.equal(p, before[n]) for n, p in trainer.model.named_parameters()), "a stopped step updated"
    assert trainer.steps == 1 and all(p.grad is None for p in trainer.model.parameters())
    taken = trainer.train_step(segments, kl_limit=moved * 1.01)
    assert taken["actor/kl_stopped"] == 0.0 and taken["actor/approx_kl"] == pytest.approx(moved, rel=1e-4)
    assert trainer.steps == 2
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters())


def test_gradient_clipping_scales_the_applied_gradient_to_the_limit(policy_model, make_segment) -> None:
    segments = _segments(make_segment)
    free = _trainer(policy_model, lr=1e-3, max_grad_norm=None)
    clipped = _trainer(policy_model, lr=1e-3, max_grad_norm=1e-3)
    raw, applied = _capture_gradients(free), _capture_gradients(clipped)
    _on_policy(free, segments)
    norm = free.train_step(segments)["actor/grad_norm"]
    clipped_metrics = clipped.train_step(segments)
    by_hand = math.sqrt(sum(float((g.double() ** 2).sum()) for g in raw.values()))
    assert norm == pytest.approx(by_hand, rel=1e-5) and norm > 1e-3
    assert clipped_metrics["actor/grad_norm"] == pytest.approx(by_hand, rel=1e-5)  # reported before clipping
    scale = 1e-3 / (by_hand + 1e-6)  # torch's clip_grad_norm_ coefficient
    for name, grad in raw.items():
        torch.testing.assert_close(applied[name], grad * scale, rtol=1e-4, atol=1e-9, msg=name)


@pytest.mark.parametrize("schedule, expected", [
    # lr 1, warm-up 2, decay to 0.1 over steps 2..10: step index -> rate
    ("constant", {0: 0.5, 1: 1.0, 2: 1.0, 6: 1.0, 10: 1.0, 50: 1.0}),
    ("linear", {0: 0.5, 1: 1.0, 2: 1.0, 4: 0.775, 6: 0.55, 10: 0.1, 50: 0.1}),
    ("cosine", {0: 0.5, 1: 1.0, 2: 1.0, 4: 0.1 + 0.45 * (1 + math.cos(math.pi / 4)), 6: 0.55, 10: 0.1, 50: 0.1}),
])
def test_learning_rate_schedules(schedule: str, expected: dict[int, float]) -> None:
    options = TorchTrainerOptions(lr=1.0, warmup_steps=2, lr_schedule=schedule,
                                  decay_steps=None if schedule == "constant" else 10, min_lr_ratio=0.1)
    assert {step: learning_rate(options, step) for step in expected} == pytest.approx(expected)


def test_a_decaying_schedule_needs_its_length() -> None:
    with pytest.raises(ValueError, match="set decay_steps"):
        TorchTrainerOptions(lr_schedule="cosine")
    with pytest.raises(ValueError, match="must exceed warmup_steps"):
        TorchTrainerOptions(lr_schedule="linear", warmup_steps=5, decay_steps=5)


def test_the_trainer_steps_along_the_schedule(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, lr=1e-3, lr_schedule="linear", decay_steps=3, min_lr_ratio=0.5)
    segments = _segments(make_segment)
    rates = []
    for _ in range(4):
        _on_policy(trainer, segments)
        rates.append(trainer.train_step(segments)["actor/lr"])
    assert rates == pytest.approx([1e-3, 1e-3 * (1 - 0.5 / 3), 1e-3 * (1 - 1 / 3), 5e-4])


def test_the_reported_entropy_is_the_policy_distributions(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, lr=1e-3)
    segments = _segments(make_segment)
    _on_policy(trainer, segments)
    by_hand, count = 0.0, 0
    suppressed = torch.zeros(policy_model.vocab_size(), dtype=torch.bool)
    suppressed[trainer.suppress_ids] = True
    with torch.no_grad():
        for seg in segments:
            inputs = policy_model.model_inputs([seg.input_ids], [seg.images])
            logits = policy_logits(trainer.model(**inputs).logits[0], temperature=ALGO.temperature,
                                   suppressed=suppressed)
            p = torch.softmax(logits.double(), dim=-1)
            entropy = -(p * torch.log(torch.where(p > 0, p, torch.ones_like(p)))).sum(-1)
            for t in range(1, len(seg.input_ids)):
                if seg.loss_mask[t]:
                    by_hand += float(entropy[t - 1])
                    count += 1
    metrics = trainer.train_step(segments)
    assert metrics["actor/entropy"] == pytest.approx(by_hand / count, rel=1e-4)
    assert 0 < metrics["actor/entropy"] < math.log(policy_model.vocab_size())
