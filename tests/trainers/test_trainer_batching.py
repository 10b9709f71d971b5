"""Micro-batch planning, bucketing and the shared policy distribution."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.types import Segment
from core.weight_sync import iter_buckets
from trainers.batching import plan_micro_batches
from trainers.policy import policy_entropy, policy_logits, policy_logprobs, suppression_mask


def _seg(n: int, i: int) -> Segment:
    return Segment(f"t/{i}", "t", 0, [1] * n, [0] * n, [0.0] * n)


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 50), min_size=0, max_size=30), budget=st.integers(1, 120),
       max_items=st.one_of(st.none(), st.integers(1, 5)), max_padding=st.sampled_from([0.0, 0.25, 0.9]))
def test_every_segment_lands_in_exactly_one_micro_batch_within_budget(lengths: list[int], budget: int,
                                                                       max_items: int | None,
                                                                       max_padding: float) -> None:
    segments = [_seg(n, i) for i, n in enumerate(lengths)]
    batches = plan_micro_batches(segments, budget, max_items=max_items, max_padding=max_padding)
    seen = sorted(i for b in batches for i in b.indices)
    assert seen == list(range(len(segments)))
    for batch in batches:
        assert batch.max_len == max(lengths[i] for i in batch.indices)
        assert batch.padded_tokens <= budget or len(batch.indices) == 1
        if max_items is not None:
            assert len(batch.indices) <= max_items
        real = sum(lengths[i] for i in batch.indices)
        assert batch.padded_tokens - real <= max_padding * batch.padded_tokens or len(batch.indices) == 1


def test_micro_batches_pack_similar_lengths() -> None:
    segments = [_seg(n, i) for i, n in enumerate([10, 40, 11, 39, 12])]
    batches = plan_micro_batches(segments, 80)
    assert [b.indices for b in batches] == [(1, 3), (4, 2, 0)]
    # with a huge budget, padding bounds the batches: 40+39+12 pads 29 of 120 (< 25%), adding 11 would pad 36%
    assert [b.indices for b in plan_micro_batches(segments, 10_000)] == [(1, 3, 4), (2, 0)]
    assert len(plan_micro_batches(segments, 10_000, max_padding=0.9)) == 1
    with pytest.raises(ValueError, match="budget"):
        plan_micro_batches(segments, 0)
    with pytest.raises(ValueError, match="max_padding"):
        plan_micro_batches(segments, 80, max_padding=1.0)


def test_buckets_respect_the_byte_limit() -> None:
    named = [(f"w{i}", torch.zeros(n)) for i, n in enumerate([4, 4, 10, 1, 1])]  # float32: 4 bytes each
    buckets = list(iter_buckets(named, 32))
    assert [[name for name, _ in b] for b in buckets] == [["w0", "w1"], ["w2"], ["w3", "w4"]]


def test_policy_distribution_tempers_and_suppresses() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0, 0.5]])
    mask = suppression_mask(4, [2, 99])
    assert mask.tolist() == [False, False, True, False]
    t = 0.8
    lp = policy_logprobs(logits, torch.tensor([1]), temperature=t, suppressed=mask)
    z = math.exp(1 / t) + math.exp(2 / t) + math.exp(0.5 / t)
    assert lp.item() == pytest.approx(2 / t - math.log(z), rel=1e-6)
    assert policy_logprobs(logits, torch.tensor([2]), temperature=t, suppressed=mask).item() == -math.inf
    probs = torch.softmax(policy_logits(logits, temperature=t, suppressed=mask), -1)[0]
    expected_entropy = -sum(p * math.log(p) for p in probs.tolist() if p > 0)
    assert policy_entropy(logits, temperature=t, suppressed=mask).item() == pytest.approx(expected_entropy, rel=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        policy_logits(logits, temperature=0.0)
    with pytest.raises(ValueError, match="suppression mask"):
        policy_logits(logits, temperature=1.0, suppressed=suppression_mask(3, []))
