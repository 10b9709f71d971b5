"""The ``vllm`` rollout engine's CPU-checkable parts: missing-vLLM error, prompt/params/output mapping.

vLLM cannot be installed on CPU machines; generation and weight transfer run in
``bench/gpu_check.sh``. The output mapping is fed objects with the fields of
vLLM's ``CompletionOutput`` / ``Logprob`` (token_ids, logprobs[i][token].logprob,
finish_reason).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from core.errors import ScaleCUAError
from core.interfaces import GenerationRequest, Message
from plugins.rollout.vllm_engine import (
    SUPPRESS_BIAS,
    VLLMEngineOptions,
    build_prompt,
    create_vllm_engine,
    sampling_kwargs,
    to_generation,
)
from tests.scale import batch


@pytest.fixture(scope="module")
def model():
    return batch.policy_model()


def test_without_vllm_the_factory_names_the_extra(model) -> None:
    with pytest.raises(ScaleCUAError, match=r"pip install 'scalecua\[gpu\]'"):
        create_vllm_engine(VLLMEngineOptions(), model=model)


def test_registered_as_vllm(plugins) -> None:
    options = plugins.registry("rollout_engine").get("vllm").parse_options({"tensor_parallel_size": 2})
    assert options.tensor_parallel_size == 2 and options.weight_transfer == "ipc"


def test_prompt_has_one_placeholder_per_image(model) -> None:
    renderer = model.renderer()
    shots = [batch.screenshot((200, 10, 10)), batch.screenshot((10, 200, 10), (320, 192))]
    rendered = renderer.render([Message("user", ["first", shots[0], "second", shots[1]])], add_generation_prompt=True)
    request = GenerationRequest(rendered.ids, rendered.images, 16)
    prompt = build_prompt(renderer, request)
    ids = prompt["prompt_token_ids"]
    assert ids.count(renderer.image_pad_id) == 2
    assert len(ids) == len(rendered.ids) - sum(renderer.image_tokens(s) for s in shots) + 2
    assert [im.size for im in prompt["multi_modal_data"]["image"]] == [(256, 160), (320, 192)]
    # turn-after-turn prompts must not inflate: the collapsed prompt is stable under re-collapsing
    assert renderer.collapse_image_pads(ids) == ids
    with pytest.raises(ValueError, match="placeholder runs"):
        build_prompt(renderer, GenerationRequest(rendered.ids, shots[:1], 16))


def test_sampling_params_ask_for_the_sampled_logprob_and_our_stops(model) -> None:
    renderer = model.renderer()
    request = GenerationRequest([1, 2, 3], [], 32, temperature=0.8, stop_ids=renderer.stop_ids, seed=7)
    kwargs = sampling_kwargs(request, {renderer.image_pad_id: SUPPRESS_BIAS}, 7)
    assert kwargs["logprobs"] == 0 and kwargs["seed"] == 7 and kwargs["ignore_eos"] is True
    assert kwargs["stop_token_ids"] == list(renderer.stop_ids) and kwargs["max_tokens"] == 32
    assert kwargs["logit_bias"] == {renderer.image_pad_id: -100.0}
    with pytest.raises(ValueError, match="suppressed"):
        sampling_kwargs(request, {renderer.stop_ids[0]: SUPPRESS_BIAS}, 1)
    with pytest.raises(ValueError, match="temperature"):
        sampling_kwargs(GenerationRequest([1], [], 4, temperature=0.0, stop_ids=(5,)), {}, 1)


@dataclass
class _Logprob:  # vllm.logprobs.Logprob
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class _Completion:  # vllm.outputs.CompletionOutput
    token_ids: list[int]
    logprobs: list[dict[int, _Logprob]] | None
    finish_reason: str


@dataclass
class _Output:  # vllm.outputs.RequestOutput
    outputs: list[_Completion]


def test_output_keeps_the_stop_token_and_its_logprob(model) -> None:
    renderer = model.renderer()
    text_ids = renderer.encode_text("left_click(x=3, y=4)")
    stop = renderer.stop_ids[0]
    ids = text_ids + [stop]
    entries = [{t: _Logprob(-0.1 * (i + 1))} for i, t in enumerate(ids)]
    generation = to_generation(_Output([_Completion(ids, entries, "stop")]), renderer, renderer.stop_ids)
    assert generation.ids == ids and generation.finish_reason == "stop"
    assert generation.logprobs == pytest.approx([-0.1 * (i + 1) for i in range(len(ids))])
    assert generation.text == "left_click(x=3, y=4)"
    truncated = to_generation(_Output([_Completion(text_ids, entries[:-1], "length")]), renderer, renderer.stop_ids)
    assert truncated.finish_reason == "length" and truncated.text == "left_click(x=3, y=4)"
    with pytest.raises(RuntimeError, match="logprobs=0"):
        to_generation(_Output([_Completion(ids, None, "stop")]), renderer, renderer.stop_ids)
