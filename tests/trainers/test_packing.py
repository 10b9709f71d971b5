"""Packed micro-batches: several segments back to back in one row give exactly what padded rows give.

Real tiny Qwen-VL models (random weights from a config) on CPU, sdpa attention: transformers builds the
block-diagonal causal mask from the per-segment positions, as it builds varlen kernels under flash attention.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.config import AlgorithmSection
from core.interfaces import PolicyModel
from core.types import Segment
from tests.trainers.test_vision_cache import _segments
from trainers.batching import plan_packed_micro_batches
from trainers.torch_backend import TorchTrainer, TorchTrainerOptions


def _seg(n: int, i: int) -> Segment:
    return Segment(f"t/{i}", "t", 0, [1] * n, [0] * n, [0.0] * n)


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 50), min_size=0, max_size=30), budget=st.integers(1, 120),
       max_items=st.one_of(st.none(), st.integers(1, 5)))
def test_packing_places_every_segment_once_within_the_budget(lengths: list[int], budget: int,
                                                             max_items: int | None) -> None:
    segments = [_seg(n, i) for i, n in enumerate(lengths)]
    rows = plan_packed_micro_batches(segments, budget, max_items=max_items)
    assert sorted(i for row in rows for i in row.indices) == list(range(len(segments)))
    for row in rows:
        assert row.packed and row.padded_tokens == row.max_len == sum(lengths[i] for i in row.indices)
        assert row.padded_tokens <= budget or len(row.indices) == 1
        assert max_items is None or len(row.indices) <= max_items
    # first-fit decreasing: no two rows could be merged into one
    if max_items is None:
        sizes = sorted(row.max_len for row in rows)
        assert len(sizes) < 2 or sizes[0] + sizes[1] > budget


def test_packing_fills_rows_that_padding_would_leave_half_empty() -> None:
    segments = [_seg(n, i) for i, n in enumerate([10, 40, 11, 39, 12])]
    assert [r.indices for r in plan_packed_micro_batches(segments, 80)] == [(1, 3), (4, 2, 0)]
    assert [r.indices for r in plan_packed_micro_batches(segments, 60)] == [(1, 4), (3, 2, 0)]
    with pytest.raises(ValueError, match="budget"):
        plan_packed_micro_batches(segments, 0)


@pytest.fixture(scope="module", params=["qwen3_vl", "qwen2_5_vl"])
def family_model(request: Any) -> Any:
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    return QwenVLModel(QwenVLOptions(tiny={"family": request.param}, seed=0))


def test_a_packed_row_scores_each_segment_as_its_own_padded_row(family_model: Any) -> None:
    """Multi-image segments of different lengths (M-RoPE positions restart per segment; a token never sees the
    segment before it): logprobs equal to float tolerance, and each segment's first token is not predicted."""
    segments = _segments(family_model)
    module = family_model.load()
    module.eval()
    ids, images = [s.input_ids for s in segments], [list(s.images) for s in segments]
    with torch.no_grad():
        padded = family_model.token_logprobs(module, family_model.model_inputs(ids, images), temperature=0.8)
        packed_inputs = family_model.packed_model_inputs(ids, images)
        packed = family_model.token_logprobs(module, packed_inputs, temperature=0.8)
    assert "attention_mask" not in packed_inputs and packed.shape == (1, sum(len(i) for i in ids))
    start = 0
    for row, seg in enumerate(segments):
        n = seg.num_tokens
        assert packed[0, start] == 0.0
        torch.testing.assert_close(packed[0, start : start + n], padded[row, :n], atol=2e-5, rtol=1e-4)
        start += n
    # the control: the same row *without* the per-segment positions lets later segments attend to earlier ones
    leaky = dict(packed_inputs)
    leaky.pop("packed_lengths")
    leaky["attention_mask"] = torch.ones_like(leaky["input_ids"])
    with torch.no_grad():
        crossed = family_model.token_logprobs(module, leaky, temperature=0.8)
    second = segments[0].num_tokens
    assert not torch.allclose(crossed[0, second + 1 : second + segments[1].num_tokens],
                              padded[1, 1 : segments[1].num_tokens], atol=1e-3)


def _final_grads(trainer: TorchTrainer) -> dict[str, torch.Tensor]:
    """Each trainable parameter's gradient as the optimizer step sees it (after the last micro-batch)."""
    out: dict[str, torch.Tensor] = {}
    for name, param in trainer.model.named_parameters():
        if param.requires_grad:
            param.register_post_accumulate_grad_hook(lambda p, name=name: out.__setitem__(name, p.grad.clone()))
    return out


def _trainer(policy_model: Any, **options: Any) -> TorchTrainer:
    return TorchTrainer(TorchTrainerOptions(device="cpu", lr=1e-3, **options), model=policy_model,
                        algorithm=AlgorithmSection(kl_coef=0.1))


@pytest.mark.parametrize("vision_cache_mib", [4096, 0])
def test_a_packed_step_equals_the_padded_step(policy_model: Any, vision_cache_mib: float) -> None:
    """Loss, its normalization (all trainable tokens of the step), the KL to the reference, the gradient and the
    updated weights: the same whether the segments are padded into rows or packed into one."""
    packed, padded = (_trainer(policy_model, packing=p, vision_cache_mib=vision_cache_mib) for p in ("on", "off"))
    segments = _segments(policy_model)
    for seg, lp in zip(segments, padded.recompute_logprobs(segments)):
        seg.rollout_logprobs = [v - 0.05 * (i % 3) for i, v in enumerate(lp)]  # off-policy: ratios differ from 1
    for a, b in zip(packed.recompute_logprobs(segments), padded.recompute_logprobs(segments)):
        assert a == pytest.approx(b, abs=2e-5)
    grads = {id(t): _final_grads(t) for t in (packed, padded)}
    m_packed, m_padded = packed.train_step(segments), padded.train_step(segments)
    assert m_packed["batch/micro_batches"] == 1 and m_packed["batch/padded_tokens"] == m_packed["batch/tokens"]
    assert m_padded["batch/padded_tokens"] > m_padded["batch/tokens"]
    for key in ("loss/tokens", "loss/pg", "loss/kl", "actor/ratio_mean"):
        if key in m_padded:
            assert m_packed[key] == pytest.approx(m_padded[key], abs=1e-5), key
    assert m_packed["actor/grad_norm"] == pytest.approx(m_padded["actor/grad_norm"], rel=1e-4)
    # the accumulated gradients themselves (a first AdamW step moves a weight by about lr whatever the size of
    # its gradient, so float noise in a near-zero gradient would show in the weights as a sign)
    g_packed, g_padded = grads[id(packed)], grads[id(padded)]
    assert g_packed.keys() == g_padded.keys() and len(g_packed) > 10
    for name in g_packed:
        torch.testing.assert_close(g_packed[name], g_padded[name], atol=1e-7, rtol=1e-4, msg=name)
    assert packed.eval_step(segments)["loss/pg"] == pytest.approx(padded.eval_step(segments)["loss/pg"], abs=1e-5)


def test_packing_needs_a_family_that_packs(policy_model: Any) -> None:
    class Unpacked(type(policy_model)):  # type: ignore[misc]
        packed_model_inputs = PolicyModel.packed_model_inputs

    unpacked = Unpacked(policy_model.options)
    with pytest.raises(TypeError, match="packed_model_inputs.*packing: auto or off"):
        _trainer(unpacked, packing="on")
    assert not _trainer(unpacked).packing and _trainer(policy_model).packing  # auto: pack where the family can


def test_varlen_sdpa_attends_within_each_packed_sequence_and_is_sdpa_otherwise() -> None:
    """Against sdpa under the explicit block-diagonal causal mask transformers would build (GQA: 4 query heads
    on 2 key/value heads), and plain sdpa for everything that is not one packed row."""
    from types import SimpleNamespace

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from plugins.qwen_vl.packed_attention import varlen_sdpa_attention

    torch.manual_seed(0)
    lengths = [5, 1, 9, 3]
    total = sum(lengths)
    query, key, value = torch.randn(1, 4, total, 8), torch.randn(1, 2, total, 8), torch.randn(1, 2, total, 8)
    module = SimpleNamespace(num_key_value_groups=2, is_causal=True, training=False)
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    owner = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    allowed = (owner[:, None] == owner[None, :]) & torch.ones(total, total, dtype=torch.bool).tril()
    expected, _ = sdpa_attention_forward(module, query, key, value, allowed[None, None], scaling=0.3)
    got, _ = varlen_sdpa_attention(module, query, key, value, allowed[None, None], position_ids=positions,
                                   scaling=0.3)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    # one sequence, or a padded batch: sdpa exactly
    plain = torch.arange(total)[None]
    torch.testing.assert_close(varlen_sdpa_attention(module, query, key, value, None, position_ids=plain)[0],
                               sdpa_attention_forward(module, query, key, value, None)[0])
    two = torch.randn(2, 4, total, 8), torch.randn(2, 2, total, 8), torch.randn(2, 2, total, 8)
    torch.testing.assert_close(varlen_sdpa_attention(module, *two, None, position_ids=positions.expand(2, -1))[0],
                               sdpa_attention_forward(module, *two, None)[0])


def test_loaded_models_use_varlen_sdpa_for_their_language_model_only(policy_model: Any) -> None:
    from plugins.qwen_vl.packed_attention import NAME

    module = policy_model.load()
    assert module.config.text_config._attn_implementation == NAME
    assert module.config.vision_config._attn_implementation == "sdpa"


def test_varlen_mask_is_skipped_only_for_one_unpadded_row_without_a_cache() -> None:
    from plugins.qwen_vl.packed_attention import varlen_sdpa_mask

    assert varlen_sdpa_mask(1, 6, 6) is None  # the attention is causal per packed sequence by itself
    padded = varlen_sdpa_mask(2, 6, 6, attention_mask=torch.tensor([[1] * 6, [1] * 4 + [0] * 2]).bool())
    assert padded is not None and padded.shape == (2, 1, 6, 6) and not bool(padded[1, 0, 5, 5])
    assert varlen_sdpa_mask(1, 2, 6, q_offset=4, kv_offset=0, allow_is_causal_skip=False) is not None  # a cache
