"""The compute model of ``bench/flops.py`` (FLOPs at Qwen3-VL-8B's shapes): its counts, and what the cache saves."""

from __future__ import annotations

import pytest

from bench import flops

SHAPE = flops.QWEN3_VL_8B


def test_the_shapes_give_qwen3_vl_8b_parameter_counts() -> None:
    # Qwen3-8B: ~6.95 B parameters in its 36 decoder layers (8.2 B with embeddings and head)
    assert SHAPE.lm_params_per_token == pytest.approx(6.95e9, rel=0.01)
    # the 27-layer vision tower: ~0.41 B parameters in its blocks
    assert SHAPE.vit_params_per_patch == pytest.approx(0.41e9, rel=0.02)


def test_forward_flops_grow_linearly_plus_the_attention_square() -> None:
    one, two = flops.lm_forward(SHAPE, 1000, 0), flops.lm_forward(SHAPE, 2000, 0)
    assert two > 2 * one  # the causal-attention square
    assert flops.lm_forward(SHAPE, 1000, 10) - one == pytest.approx(2 * 4096 * 151936 * 10)
    assert flops.vit_forward(SHAPE, 1000) > 0


def test_the_vision_cache_counts_each_distinct_screenshot_once() -> None:
    a, b = (b"a", 1000), (b"b", 1000)
    items = [flops.Item(3000, 200, (a, b)), flops.Item(3000, 200, (b,))]
    cached = flops.step_flops(items, vision_cache=True)
    uncached = flops.step_flops(items, vision_cache=False)
    assert cached["vision"] == pytest.approx(2 * flops.vit_forward(SHAPE, 1000))
    assert uncached["vision"] == pytest.approx(3 * flops.vit_forward(SHAPE, 1000))
    assert cached["actor"] == uncached["actor"] == pytest.approx(3 * cached["reference"])
    assert cached["total"] == pytest.approx(cached["actor"] + cached["reference"] + cached["vision"])
