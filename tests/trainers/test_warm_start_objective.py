"""The warm start's cross-entropy objective and starting an RL trainer from its weights (tiny real Qwen3-VL, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from core.runtime.checkpoint import CheckpointManager
from core.config import AlgorithmSection
from trainers.objective import cross_entropy_token_loss, token_loss
from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

ALGO = AlgorithmSection()


def _trainer(policy_model, objective: str = "grpo", **options) -> TorchTrainer:
    return TorchTrainer(TorchTrainerOptions(device="cpu", **options), model=policy_model, algorithm=ALGO,
                        objective=objective)


def _demonstrations(make_segment):
    # advantages are irrelevant to the cross-entropy objective: give wild ones to show they are ignored
    return [
        make_segment("d1/0", "Count the lines of the log", '<tool_call>{"action": "type", "text": "wc -l"}',
                     (200, 30, 30), -5.0),
        make_segment("d2/0", "Make the script executable", '<tool_call>{"action": "type", "text": "chmod +x"}',
                     (30, 200, 30), 7.0),
    ]


def test_cross_entropy_is_the_token_mean_negative_log_likelihood() -> None:
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -4.0, -9.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    loss = cross_entropy_token_loss(logp, mask, normalizer=3.0)
    assert loss.item() == pytest.approx((2.0 + 3.0 + 4.0) / 3.0)
    # the dispatcher ignores advantages and rollout logprobs under cross_entropy
    same = token_loss("cross_entropy", logp, torch.full_like(logp, 9.0), torch.full_like(logp, -3.0), mask,
                      algorithm=ALGO, normalizer=3.0)
    assert same.item() == pytest.approx(loss.item())
    with pytest.raises(ValueError, match="unknown training objective"):
        token_loss("dpo", logp, logp, logp, mask, algorithm=ALGO, normalizer=3.0)


def test_unknown_objective_is_refused(policy_model) -> None:
    with pytest.raises(ValueError, match="available: grpo, cross_entropy"):
        _trainer(policy_model, objective="dpo")


def test_warm_start_lowers_the_loss_and_raises_the_demonstrations_likelihood(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, objective="cross_entropy", lr=2e-3)
    assert trainer.reference is None  # no KL term in supervised fine-tuning
    demos = _demonstrations(make_segment)
    before = trainer.eval_step(demos)["loss/nll"]
    likelihood_before = [sum(lp) for lp in trainer.recompute_logprobs(demos)]
    for _ in range(8):
        trained = trainer.train_step(demos)
    after = trainer.eval_step(demos)["loss/nll"]
    likelihood_after = [sum(lp) for lp in trainer.recompute_logprobs(demos)]
    assert trained["loss/nll"] < before and after < 0.5 * before, (before, trained["loss/nll"], after)
    assert all(a > b for a, b in zip(likelihood_after, likelihood_before)), (likelihood_before, likelihood_after)


def test_eval_step_changes_nothing(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, objective="cross_entropy", lr=1e-3)
    demos = _demonstrations(make_segment)
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    first, second = trainer.eval_step(demos), trainer.eval_step(demos)
    assert first == second and trainer.steps == 0
    assert all(torch.equal(weights[n], p) for n, p in trainer.model.named_parameters())


def test_learning_rate_warms_up_linearly(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, objective="cross_entropy", lr=1e-3, warmup_steps=4)
    demos = _demonstrations(make_segment)[:1]
    rates = [trainer.train_step(demos)["actor/lr"] for _ in range(6)]
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])


def test_an_rl_trainer_starts_from_exactly_the_warm_start_weights(policy_model, make_segment, tmp_path: Path) -> None:
    warm = _trainer(policy_model, objective="cross_entropy", lr=2e-3)
    for _ in range(3):
        warm.train_step(_demonstrations(make_segment))
    saved = CheckpointManager(tmp_path).save(3, trainer=warm)
    expected = {n: p.detach().clone() for n, p in warm.model.named_parameters()}

    rl = _trainer(policy_model, objective="grpo", lr=1e-4)  # kl_coef > 0: it has a reference model
    assert rl.reference is not None
    assert not all(torch.equal(expected[n], p) for n, p in rl.model.named_parameters())
    rl.load_weights(saved / "trainer")
    for name, param in rl.model.named_parameters():
        assert torch.equal(param, expected[name]), name
    for name, param in rl.reference.named_parameters():  # the KL term regularizes toward the warm start
        assert torch.equal(param, expected[name]), name
    assert rl.steps == 0 and not rl.optimizer.state  # a fresh optimizer
    exported = {n: t for bucket in rl.export_weights() for n, t in bucket}
    assert all(torch.equal(t, expected[n]) for n, t in exported.items())


def test_init_optimizer_carries_the_warm_start_second_moments_under_this_runs_settings(
        policy_model, make_segment, tmp_path: Path) -> None:
    from core.errors import CheckpointError

    warm = _trainer(policy_model, objective="cross_entropy", lr=2e-3, adam_eps=1e-6)
    demos = _demonstrations(make_segment)
    for _ in range(3):
        warm.train_step(demos)
    saved = CheckpointManager(tmp_path).save(3, trainer=warm)
    rl = _trainer(policy_model, objective="grpo", lr=1e-4, init_optimizer=True)
    rl.load_weights(saved / "trainer")
    assert len(rl.optimizer.state) == len(rl.trainable_names)
    for (_, warm_state), (_, rl_state) in zip(warm.optimizer.state.items(), rl.optimizer.state.items()):
        assert torch.equal(warm_state["exp_avg_sq"], rl_state["exp_avg_sq"])
        assert warm_state["exp_avg"].abs().sum() > 0 and not rl_state["exp_avg"].any()  # no borrowed direction
        assert float(rl_state["step"]) == 3.0  # bias correction continues: no sign-like first steps
    group = rl.optimizer.param_groups[0]
    assert group["eps"] == 1e-8 and group["lr"] == 1e-4  # this run's hyperparameters, not the warm start's
    assert rl.steps == 0

    # an RL step from carried moments moves the weights less than a fresh AdamW's sign-like first step
    for seg in demos:
        seg.advantage = 1.0
        seg.rollout_logprobs = rl.recompute_logprobs([seg])[0]
    fresh = _trainer(policy_model, objective="grpo", lr=1e-4)
    fresh.load_weights(saved / "trainer")
    start = {n: p.detach().clone() for n, p in rl.model.named_parameters()}

    def moved(trainer: TorchTrainer) -> float:
        trainer.train_step(demos)
        return sum(float((p.detach() - start[n]).abs().sum()) for n, p in trainer.model.named_parameters())

    assert moved(rl) < 0.75 * moved(fresh)
    (saved / "trainer" / "optimizer.pt").unlink()
    with pytest.raises(CheckpointError, match="holds no optimizer.pt"):
        _trainer(policy_model, init_optimizer=True).load_weights(saved / "trainer")


def test_load_weights_names_what_is_missing(policy_model, tmp_path: Path) -> None:
    from core.errors import CheckpointError

    with pytest.raises(CheckpointError, match="holds no model.safetensors"):
        _trainer(policy_model).load_weights(tmp_path)


def test_run_init_from_reaches_the_trainer_and_the_rollout_engine(make_segment, tmp_path: Path) -> None:
    """``run.init_from`` given a run directory: the loop resolves its newest checkpoint, loads it into the
    trainer (and reference) before anything else, and the first weight sync hands it to the rollout engine."""
    from core.config import load_config
    from core.runtime.components import build_components
    from core.runtime.loop import TrainingRun
    from core.weight_sync import sync_weights

    quickstart = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
    overrides = ["model.options.max_pixels=65536", f"run.output_dir={tmp_path / 'runs'}"]
    resolved, plugins = load_config(quickstart, overrides)
    warm_model = resolved.create("model", plugins, run_dir=tmp_path)
    warm = _trainer(warm_model, objective="cross_entropy", lr=2e-3)
    for _ in range(3):
        warm.train_step(_demonstrations(make_segment))
    CheckpointManager(tmp_path / "warm").save(3, trainer=warm)
    expected = {n: p.detach().clone() for n, p in warm.model.named_parameters()}

    resolved, plugins = load_config(quickstart, [*overrides, f"run.init_from={tmp_path / 'warm'}"])
    run_dir = tmp_path / "rl"
    c = build_components(resolved, plugins, run_dir)
    try:
        assert not all(torch.equal(expected[n], p) for n, p in c.trainer.model.named_parameters())
        TrainingRun(resolved, plugins, run_dir).initialize(c)
        sync_weights(c.trainer, c.engine, 0)
        for module in (c.trainer.model, c.trainer.reference, c.engine.model):
            for name, param in module.named_parameters():
                assert torch.equal(param.detach(), expected[name]), name
    finally:
        import asyncio

        asyncio.run(c.close())
