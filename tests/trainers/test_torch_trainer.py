"""The ``torch`` trainer backend on a tiny real Qwen3-VL (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from core.config import AlgorithmSection
from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

ALGO = AlgorithmSection()


def _trainer(policy_model, algorithm: AlgorithmSection = ALGO, **options) -> TorchTrainer:
    return TorchTrainer(TorchTrainerOptions(device="cpu", **options), model=policy_model, algorithm=algorithm)


def _on_policy(trainer: TorchTrainer, segments) -> None:
    """Rollout logprobs as the rollout engine would report them for the trainer's current weights."""
    for seg, lp in zip(segments, trainer.recompute_logprobs(segments)):
        seg.rollout_logprobs = lp


def _segments(make_segment):
    return [
        make_segment("t1/0", "Open the file menu", "left_click(x=12, y=40)", (200, 30, 30), 1.2),
        make_segment("t1/1", "Open the file menu", "key(keys=['ctrl', 'o'])\nthen wait", (30, 200, 30), -0.8),
        make_segment("t2/0", "Type hello into the cell A1 and press enter", "type(text='hello')", (30, 30, 200),
                     0.5),
    ]


def _response_logprob(trainer: TorchTrainer, seg) -> float:
    return sum(trainer.recompute_logprobs([seg])[0])


def test_only_language_model_parameters_train(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, lr=1e-3)
    prefixes = policy_model.vision_parameter_prefixes()
    in_optimizer = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    vision = {n: p for n, p in trainer.model.named_parameters() if n.startswith(prefixes)}
    language = {n: p for n, p in trainer.model.named_parameters() if not n.startswith(prefixes)}
    assert vision and language
    assert in_optimizer == {id(p) for p in language.values()}
    assert not any(p.requires_grad for p in vision.values())
    group = trainer.optimizer.param_groups[0]
    assert group["weight_decay"] == 0.0
    assert TorchTrainerOptions().lr == 3e-6

    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    segments = _segments(make_segment)
    _on_policy(trainer, segments)
    metrics = trainer.train_step(segments)
    for name, param in trainer.model.named_parameters():
        if name in vision:
            assert torch.equal(param, before[name]), f"vision parameter {name} changed"
    changed = [n for n in language if not torch.equal(trainer.model.get_parameter(n), before[n])]
    assert len(changed) > len(language) // 2
    # on-policy: the ratio is 1 and nothing is clipped
    assert metrics["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["actor/clipfrac"] == 0.0
    assert metrics["loss/tokens"] == sum(sum(s.loss_mask[1:]) for s in segments)
    assert metrics["time/actor_update"] > 0 and metrics["time/reference_logprobs"] > 0


def test_positive_advantage_raises_and_negative_lowers_the_response_probability(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, algorithm=AlgorithmSection(kl_coef=0.0), lr=2e-3)
    good, bad, _ = _segments(make_segment)
    _on_policy(trainer, [good, bad])
    before = (_response_logprob(trainer, good), _response_logprob(trainer, bad))
    trainer.train_step([good, bad])
    after = (_response_logprob(trainer, good), _response_logprob(trainer, bad))
    assert after[0] > before[0] + 0.05
    assert after[1] < before[1] - 0.05


def _capture_gradients(trainer: TorchTrainer) -> dict[str, torch.Tensor]:
    """Record the accumulated gradients the optimizer is about to apply (the real step still runs)."""
    captured: dict[str, torch.Tensor] = {}
    step = trainer.optimizer.step

    def recording_step(*args, **kwargs):
        for name, param in trainer.model.named_parameters():
            if param.grad is not None:
                captured[name] = param.grad.detach().clone()
        return step(*args, **kwargs)

    trainer.optimizer.step = recording_step  # type: ignore[method-assign]
    return captured


def test_micro_batch_split_gives_the_same_update(policy_model, make_segment) -> None:
    segments = _segments(make_segment)
    whole = _trainer(policy_model, lr=1e-3, micro_batch_tokens=100_000)
    split = _trainer(policy_model, lr=1e-3, micro_batch_tokens=1, max_micro_batch_items=1)
    grads_whole, grads_split = _capture_gradients(whole), _capture_gradients(split)
    _on_policy(whole, segments)
    m_whole = whole.train_step(segments)
    m_split = split.train_step(segments)
    assert m_whole["batch/micro_batches"] == 1 and m_split["batch/micro_batches"] == 3
    assert m_split["loss/pg"] == pytest.approx(m_whole["loss/pg"], rel=1e-5)
    assert m_split["actor/grad_norm"] == pytest.approx(m_whole["actor/grad_norm"], rel=1e-4)
    assert grads_whole.keys() == grads_split.keys() and len(grads_whole) == len(whole.trainable_names)
    for name, grad in grads_whole.items():
        torch.testing.assert_close(grads_split[name], grad, rtol=1e-4, atol=1e-7, msg=name)


def test_reference_model_is_skipped_without_kl(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, algorithm=AlgorithmSection(kl_coef=0.0))
    assert trainer.reference is None
    segments = _segments(make_segment)[:1]
    _on_policy(trainer, segments)
    metrics = trainer.train_step(segments)
    assert metrics["time/reference_logprobs"] == 0.0
    with pytest.raises(ValueError, match="no reference"):
        trainer.recompute_logprobs(segments, reference=True)


def test_kl_to_the_reference_grows_as_the_actor_moves(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, lr=5e-3)
    segments = _segments(make_segment)
    _on_policy(trainer, segments)
    first = trainer.train_step(segments)
    assert first["loss/kl"] == pytest.approx(0.0, abs=1e-10)  # actor == reference before the first update
    _on_policy(trainer, segments)
    second = trainer.train_step(segments)
    assert second["loss/kl"] > 1e-6
    ref = trainer.recompute_logprobs(segments, reference=True)
    actor = trainer.recompute_logprobs(segments)
    assert ref != actor


def test_export_weights_yields_language_model_buckets(policy_model) -> None:
    trainer = _trainer(policy_model)
    buckets = list(trainer.export_weights(bucket_bytes=64 << 10))
    assert len(buckets) > 1
    names = [name for bucket in buckets for name, _ in bucket]
    assert names == trainer.trainable_names
    assert not any(n.startswith(policy_model.vision_parameter_prefixes()) for n in names)
    for bucket in buckets:
        if len(bucket) > 1:
            assert sum(t.numel() * t.element_size() for _, t in bucket) <= 64 << 10


def test_save_and_load_continue_identically(policy_model, make_segment, tmp_path: Path) -> None:
    segments = _segments(make_segment)
    a = _trainer(policy_model, lr=1e-3)
    _on_policy(a, segments)
    a.train_step(segments)
    a.save(tmp_path / "trainer")
    b = _trainer(policy_model, lr=1e-3)
    b.load(tmp_path / "trainer")
    assert b.steps == 1
    for (name, pa), (_, pb) in zip(a.model.named_parameters(), b.model.named_parameters()):
        assert torch.equal(pa, pb), name
    # identical optimizer state: the next step is identical too (Adam moments matter at step 2)
    a.train_step(segments)
    b.train_step(segments)
    for (name, pa), (_, pb) in zip(a.model.named_parameters(), b.model.named_parameters()):
        assert torch.equal(pa, pb), name


def test_load_rejects_a_mismatched_checkpoint(policy_model, tmp_path: Path) -> None:
    from core.errors import CheckpointError

    trainer = _trainer(policy_model)
    with pytest.raises(CheckpointError, match="lacks"):
        trainer.load(tmp_path)


def test_bfloat16_autocast_step(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model, dtype="bfloat16")
    assert next(trainer.model.parameters()).dtype == torch.float32  # fp32 master weights
    assert next(trainer.reference.parameters()).dtype == torch.bfloat16
    segments = _segments(make_segment)
    _on_policy(trainer, segments)
    metrics = trainer.train_step(segments)
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert metrics["actor/ratio_mean"] == pytest.approx(1.0, abs=0.05)


def test_bad_inputs_are_explained(policy_model, make_segment) -> None:
    with pytest.raises(ValueError, match="entropy_coef"):
        _trainer(policy_model, algorithm=AlgorithmSection(entropy_coef=0.01))
    trainer = _trainer(policy_model, algorithm=AlgorithmSection(kl_coef=0.0))
    with pytest.raises(ValueError, match="at least one segment"):
        trainer.train_step([])
    seg = make_segment("t1/0", "x", "y", (0, 0, 0), 1.0)
    seg.input_ids[-2] = policy_model.renderer().image_pad_id  # a response token the policy can never sample
    with pytest.raises(ValueError, match="suppresses"):
        trainer.train_step([seg])
    with pytest.raises(ValueError, match="no CUDA GPU"):
        if not torch.cuda.is_available():
            TorchTrainer(TorchTrainerOptions(device="cuda"), model=policy_model, algorithm=ALGO)
        else:
            raise ValueError("no CUDA GPU (skipped: a GPU is present)")


def test_registered_as_torch(plugins, policy_model) -> None:
    registry = plugins.registry("trainer")
    assert "torch" in registry
    trainer = registry.create("torch", {"device": "cpu", "micro_batch_tokens": 4096}, model=policy_model,
                              algorithm=ALGO, seed=3)
    assert isinstance(trainer, TorchTrainer) and trainer.options.micro_batch_tokens == 4096


def test_encoding_images_once_for_reference_and_actor_changes_nothing(policy_model, make_segment) -> None:
    trainer = _trainer(policy_model)
    segments = _segments(make_segment)
    assert trainer._accepts_encoder_outputs
    shared = trainer.recompute_logprobs(segments) + trainer.recompute_logprobs(segments, reference=True)
    trainer._accepts_encoder_outputs = False  # the plain path: each model runs its own vision tower
    separate = trainer.recompute_logprobs(segments) + trainer.recompute_logprobs(segments, reference=True)
    for a, b in zip(shared, separate):
        assert a == pytest.approx(b, abs=1e-6)
    _on_policy(trainer, segments)
    assert trainer.train_step(segments)["time/vision_encoder"] == 0.0
