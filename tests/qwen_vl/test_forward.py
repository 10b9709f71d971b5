"""Model inputs and teacher-forced logprobs, checked against the model's own sampling."""

from __future__ import annotations

import pytest
import torch

from core.interfaces import Message
from plugins.qwen_vl.forward import InputError, build_model_inputs, suppressed_token_ids, token_logprobs
from tests.qwen_vl.helpers import FAMILIES, screenshot, tiny_model


def conversation():
    shots = [screenshot(100, 80, 1), screenshot(64, 64, 2)]
    return [
        Message("system", ["You are a computer-use agent."]),
        Message("user", ["Open the file.", shots[0]]),
        Message("assistant", ["left_click(x=10, y=20)"]),
        Message("user", ["Action executed.", shots[1]]),
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_teacher_forced_logprobs_equal_sampling_logprobs(family):
    model = tiny_model(family, seed=11)
    hf, renderer = model.load(), model.renderer()
    prompt = renderer.render(conversation(), add_generation_prompt=True)
    inputs = build_model_inputs(renderer, prompt.ids, prompt.images)
    torch.manual_seed(0)
    out = hf.generate(
        **inputs, do_sample=True, temperature=0.8, max_new_tokens=24, output_scores=True, return_dict_in_generate=True
    )
    sampled = out.sequences[0, len(prompt.ids) :]
    assert not set(sampled.tolist()) & set(suppressed_token_ids(renderer))
    generated = hf.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
    stop = next((i + 1 for i, t in enumerate(sampled.tolist()) if t in renderer.stop_ids), len(sampled))
    full = out.sequences[0, : len(prompt.ids) + stop].tolist()
    with torch.no_grad():
        recomputed = token_logprobs(
            hf,
            build_model_inputs(renderer, full, prompt.images),
            temperature=0.8,
            suppress_ids=suppressed_token_ids(renderer),
            chunk_size=5,
        )[0]
    assert recomputed[0] == 0
    assert torch.allclose(recomputed[len(prompt.ids) :], generated[:stop], atol=1e-5, rtol=0)


def test_batch_with_right_padding_equals_single_sequences(qwen3):
    hf, renderer = qwen3.load(), qwen3.renderer()
    shot = screenshot(64, 64, 3)
    seqs = [
        renderer.render(conversation(), add_generation_prompt=True),
        renderer.render([Message("user", ["no image here"])], add_generation_prompt=True),
        renderer.render(
            [Message("user", ["one", shot]), Message("assistant", ["done()"])], add_generation_prompt=False
        ),
    ]
    batch_inputs = build_model_inputs(renderer, [s.ids for s in seqs], [s.images for s in seqs])
    assert batch_inputs["attention_mask"].sum(dim=1).tolist() == [len(s.ids) for s in seqs]
    assert batch_inputs["mm_token_type_ids"].sum().item() == sum(
        renderer.image_tokens(i) for s in seqs for i in s.images
    )
    with torch.no_grad():
        batch = token_logprobs(hf, batch_inputs)
        for row, s in enumerate(seqs):
            single = token_logprobs(hf, build_model_inputs(renderer, s.ids, s.images))[0]
            assert torch.allclose(batch[row, : len(s.ids)], single, atol=1e-5, rtol=0)
            assert not batch[row, len(s.ids) :].any()


def test_positions_limit_the_work_and_gradients_flow(qwen3):
    hf, renderer = qwen3.load(), qwen3.renderer()
    prompt = renderer.render(conversation(), add_generation_prompt=True)
    inputs = build_model_inputs(renderer, prompt.ids, prompt.images)
    positions = torch.zeros_like(inputs["input_ids"])
    positions[0, -6:] = 1
    hf.zero_grad()
    logprobs = token_logprobs(hf, inputs, positions=positions, chunk_size=4)
    assert (logprobs != 0).nonzero()[:, 1].tolist() == list(range(len(prompt.ids) - 6, len(prompt.ids)))
    with torch.no_grad():
        full = token_logprobs(hf, inputs)
    assert torch.allclose(logprobs[0, -6:], full[0, -6:], atol=1e-6)
    (-logprobs.sum()).backward()
    assert hf.model.language_model.layers[0].mlp.up_proj.weight.grad.abs().sum() > 0
    assert hf.model.visual.patch_embed.proj.weight.grad.abs().sum() > 0


def test_placeholder_mismatches_are_caught(qwen3):
    renderer = qwen3.renderer()
    prompt = renderer.render(conversation(), add_generation_prompt=True)
    with pytest.raises(InputError, match="do not match"):
        build_model_inputs(renderer, prompt.ids, list(reversed(prompt.images)))
    with pytest.raises(InputError, match="no images were given"):
        build_model_inputs(renderer, prompt.ids, [])
    with pytest.raises(InputError, match="one list per sequence"):
        build_model_inputs(renderer, [prompt.ids, prompt.ids], [prompt.images])
