"""The step's vision-feature cache: each distinct screenshot through the frozen tower once, nothing else changes.

Real tiny Qwen3-VL (random weights from a config) on CPU; segments overlap in screenshots the way
sliding-window segments of one trajectory do.
"""

from __future__ import annotations

import pytest
import torch

from core.config import AlgorithmSection
from core.interfaces import Message
from core.types import Segment
from tests.trainers.conftest import screenshot
from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

COLORS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (30, 200, 200)]


def _window_segment(renderer, trajectory_id: str, index: int, shots, advantage: float) -> Segment:
    """A multi-turn segment: one user turn per screenshot, each answered by a short action."""
    messages = [Message("system", ["You operate a desktop."])]
    for i, shot in enumerate(shots):
        messages.append(Message("user", [f"step {i}", shot]))
        messages.append(Message("assistant", [f"left_click(x={10 * i}, y=20)"]))
    prompt = renderer.render(messages[:-1], add_generation_prompt=True)
    response = renderer.encode_text(messages[-1].content[0]) + [renderer.stop_ids[0]]
    ids = prompt.ids + response
    return Segment(trajectory_id=trajectory_id, task_id=trajectory_id.split("/")[0], index=index, input_ids=ids,
                   loss_mask=[0] * len(prompt.ids) + [1] * len(response), rollout_logprobs=[0.0] * len(ids),
                   images=list(prompt.images), advantage=advantage)


def _segments(policy_model) -> list[Segment]:
    renderer = policy_model.renderer()
    shots = [screenshot(c) for c in COLORS]
    return [
        _window_segment(renderer, "t1/0", 0, shots[0:3], 1.0),
        _window_segment(renderer, "t1/0", 1, shots[1:4], 1.0),  # shares two screenshots with segment 0
        _window_segment(renderer, "t1/1", 0, shots[2:5], -0.7),
        _window_segment(renderer, "t2/0", 0, [screenshot(COLORS[0])], 0.4),  # equal PNG bytes, another object
    ]


def _trainer(policy_model, **options) -> TorchTrainer:
    # micro-batches of one segment each, so screenshots are shared *across* micro-batches
    return TorchTrainer(TorchTrainerOptions(device="cpu", lr=1e-3, max_micro_batch_items=1, **options),
                        model=policy_model, algorithm=AlgorithmSection())


def test_cached_features_give_the_uncached_logprobs_and_update(policy_model) -> None:
    cached, plain = _trainer(policy_model), _trainer(policy_model, vision_cache_mib=0)
    segments = _segments(policy_model)
    for seg, lp in zip(segments, plain.recompute_logprobs(segments)):
        seg.rollout_logprobs = lp
    for a, b in zip(cached.recompute_logprobs(segments), plain.recompute_logprobs(segments)):
        assert a == pytest.approx(b, abs=1e-5)

    m_cached, m_plain = cached.train_step(segments), plain.train_step(segments)
    assert m_cached["batch/micro_batches"] == 4
    assert m_cached["vision/distinct_images"] == 5 and m_cached["vision/image_references"] == 10
    assert m_cached["vision/encodings"] == 5 and m_cached["vision/encodings_per_distinct"] == 1.0
    assert "vision/encodings" not in m_plain  # the plain path encodes per micro-batch: 10 screenshots
    assert m_cached["loss/pg"] == pytest.approx(m_plain["loss/pg"], abs=1e-6)
    assert m_cached["actor/grad_norm"] == pytest.approx(m_plain["actor/grad_norm"], rel=1e-4)
    for (name, a), (_, b) in zip(cached.model.named_parameters(), plain.model.named_parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_screenshots_over_the_budget_are_encoded_with_their_micro_batch(policy_model) -> None:
    segments = _segments(policy_model)
    reference = _trainer(policy_model, vision_cache_mib=0).recompute_logprobs(segments)
    for seg, lp in zip(segments, reference):
        seg.rollout_logprobs = lp
    one_image = _trainer(policy_model).train_step(segments)["vision/cache_mib"] / 5  # all screenshots: one size
    small = _trainer(policy_model, vision_cache_mib=one_image * 2.5)
    for a, b in zip(small.recompute_logprobs(segments), reference):
        assert a == pytest.approx(b, abs=1e-5)
    metrics = small.train_step(segments)
    assert 0 < metrics["vision/cached_images"] < 5
    assert metrics["vision/over_budget_images"] == 5 - metrics["vision/cached_images"]
    assert 5 < metrics["vision/encodings"] < 10
    assert metrics["vision/cache_mib"] <= one_image * 2.5
