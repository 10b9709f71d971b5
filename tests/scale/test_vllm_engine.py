"""The ``vllm`` rollout engine on CPU: missing-vLLM error, prompt/params/output mapping, and the engine class
against a test double of vLLM's AsyncLLM (``tests/scale/fake_vllm``: vLLM's request/response fields, generation
by the real ``hf`` engine on the tiny model, placeholders re-expanded as vLLM does).

vLLM cannot be installed on CPU machines; real vLLM generation and the CUDA-IPC/NCCL data planes run in
``bench/gpu_check.sh``. The output mapping is fed objects with the fields of
vLLM's ``CompletionOutput`` / ``Logprob`` (token_ids, logprobs[i][token].logprob,
finish_reason).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

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


def test_without_vllm_the_factory_names_the_extra(model, monkeypatch) -> None:
    # vllm made unimportable (None in sys.modules), so this checks the message on machines with vllm too
    monkeypatch.setitem(sys.modules, "vllm", None)
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


# -- the engine class against a test double of vLLM's AsyncLLM --------------------------------------------

FAKE_VLLM = Path(__file__).with_name("fake_vllm")


def _real_vllm() -> bool:
    """Real vLLM importable (not the stand-in) on a machine with a GPU: then the tests run against it."""
    import importlib.util

    import torch

    spec = importlib.util.find_spec("vllm")
    return spec is not None and "fake_vllm" not in str(spec.origin) and torch.cuda.is_available()


class _CPUTransport:
    """The weight transport for the stand-in on CPU: CUDA IPC handles need a GPU, so each tensor travels as a
    ``(rebuild, (tensor,))`` pair in the same pickled ``ipc_handles_pickled`` field vLLM's IPC engine reads."""

    drives_round = False

    def init_info(self, world_size: int) -> dict:
        return {}

    def join(self) -> None:
        return None

    def prepare(self, bucket):  # type: ignore[no-untyped-def]
        import base64
        import pickle

        from plugins.rollout.vllm_weights import Prepared, cast_bucket
        from vllm.v1.engine.async_llm import rebuild

        tensors = cast_bucket(bucket, "float32")
        handles = [(rebuild, (t.clone(),)) for _, t in tensors]
        info = {"names": [n for n, _ in tensors], "dtype_names": ["float32"] * len(tensors),
                "shapes": [list(t.shape) for _, t in tensors],
                "ipc_handles_pickled": base64.b64encode(pickle.dumps(handles)).decode()}
        return Prepared(info, tensors)

    def send(self, prepared) -> None:
        return None


@pytest.fixture
def stand_in(monkeypatch):
    """The stand-in (tests/scale/fake_vllm) as ``vllm``, whatever is installed."""
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    yield True
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


@pytest.fixture
def fake_vllm(request):
    """The stand-in on machines without vLLM and a GPU; the real vLLM where it runs."""
    return False if _real_vllm() else request.getfixturevalue("stand_in")


TEMPERATURE = 0.8


def _requests(model, n: int, **overrides) -> list[GenerationRequest]:
    renderer = model.renderer()
    out = []
    for i, seg in enumerate(batch.segments(renderer)[:n]):
        prompt_len = seg.loss_mask.index(1)
        out.append(GenerationRequest(seg.input_ids[:prompt_len], list(seg.images), 12, temperature=TEMPERATURE,
                                     stop_ids=renderer.stop_ids, seed=100 + i, **overrides))
    return out


def _engine(model, stand_in: bool):  # type: ignore[no-untyped-def]
    from plugins.rollout.vllm_engine import VLLMRolloutEngine

    engine = VLLMRolloutEngine(VLLMEngineOptions(dtype="float32"), model=model, seed=0)
    if stand_in:
        engine.transport = _CPUTransport()
    return engine


def _generate(engine, requests):  # type: ignore[no-untyped-def]
    import asyncio

    async def all_of() -> list:
        return await asyncio.gather(*(engine.generate(r) for r in requests))

    return asyncio.run(all_of())


def _trainer(model):  # type: ignore[no-untyped-def]
    from core.config import AlgorithmSection
    from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

    return TorchTrainer(TorchTrainerOptions(device="cpu", lr=5e-2), model=model,
                        algorithm=AlgorithmSection(temperature=TEMPERATURE))


def _recomputed(trainer, requests, generations) -> list[list[float]]:  # type: ignore[no-untyped-def]
    """The trainer's logprobs of each response token, teacher-forced on prompt + response."""
    from core.types import Segment

    segments = [Segment(f"t/{i}", "t", 0, list(r.prompt_ids) + list(g.ids),
                        [0] * len(r.prompt_ids) + [1] * len(g.ids), [0.0] * (len(r.prompt_ids) + len(g.ids)),
                        images=list(r.images)) for i, (r, g) in enumerate(zip(requests, generations))]
    return [lp[len(r.prompt_ids):] for r, lp in zip(requests, trainer.recompute_logprobs(segments))]


def _agree(generations, recomputed) -> bool:
    return all(g.logprobs == pytest.approx(lp, abs=1e-4) for g, lp in zip(generations, recomputed))


def test_engine_logprobs_are_the_trainers_and_weights_update_in_sessions(fake_vllm, model) -> None:
    """The engine's sampled-token logprobs equal the trainer's recomputation of the same tokens (the importance
    ratio at equal weights is 1), before and after a trained policy reaches the engine in one session."""
    import torch

    engine = _engine(model, fake_vllm)
    trainer = _trainer(model)
    served = engine.engine
    assert served.args.logprobs_mode == "processed_logprobs" and served.args.weight_transfer_config == {"backend": "ipc"}
    settings = model.renderer().image_processor.settings
    assert served.args.mm_processor_kwargs == {"min_pixels": settings.min_pixels, "max_pixels": settings.max_pixels}
    requests = _requests(model, 3)
    before = _generate(engine, requests)
    assert served.loop is not None and served.loop is engine._loop  # AsyncLLM lives on the engine's own loop
    assert all(g.ids and g.finish_reason in ("stop", "length") for g in before)
    assert _agree(before, _recomputed(trainer, requests, before))
    again = _generate(engine, requests)
    assert [g.ids for g in again] == [g.ids for g in before]  # seeded per request

    # a trained policy reaches the engine bucket by bucket, inside one weight-sync session
    trainer.train_step(batch.segments(model.renderer()))
    buckets = list(trainer.export_weights(1 << 18))
    assert len(buckets) > 1
    engine.begin_weight_update(1)
    for bucket in buckets:
        engine.update_weights(bucket)
    assert served.calls[-len(buckets) - 2:] == ["init", "start"] + ["update"] * len(buckets)
    assert engine.weight_version is None  # the session is still open
    engine.commit_weight_update()
    assert served.calls[-2:] == ["finish", "reset_prefix_cache"] and engine.weight_version == 1
    after = _generate(engine, requests)
    assert [g.ids for g in after] != [g.ids for g in before]
    assert all(g.weight_version == 1 for g in after)
    assert _agree(after, _recomputed(trainer, requests, after))
    if fake_vllm:
        name, tensor = buckets[0][0]
        torch.testing.assert_close(dict(served.module.named_parameters())[name], tensor)
    import asyncio

    asyncio.run(engine.close())
    assert served.calls[-1] == "shutdown" and not engine._thread.is_alive()


def test_the_comparison_catches_a_wrong_engine(stand_in, model, monkeypatch) -> None:
    """The same comparison fails when the engine is made wrong: suppressed ids no longer banned, or the
    logprob convention switched to vLLM's raw logprobs (always on the stand-in: it mutates what reaches it)."""
    import plugins.rollout.vllm_engine as vllm_engine

    trainer = _trainer(model)
    requests = _requests(model, 3)
    original = vllm_engine.sampling_kwargs
    monkeypatch.setattr(vllm_engine, "sampling_kwargs",
                        lambda request, logit_bias, seed: {**original(request, logit_bias, seed), "logit_bias": None})
    unsuppressed = _generate(_engine(model, True), requests)
    assert not _agree(unsuppressed, _recomputed(trainer, requests, unsuppressed))
    monkeypatch.setattr(vllm_engine, "sampling_kwargs", original)

    import vllm.engine.arg_utils as arg_utils

    real_args = arg_utils.AsyncEngineArgs

    def raw_mode(**fields):  # type: ignore[no-untyped-def]
        return real_args(**{**fields, "logprobs_mode": "raw_logprobs"})

    monkeypatch.setattr(arg_utils, "AsyncEngineArgs", raw_mode)
    raw = _generate(_engine(model, True), requests)
    assert not _agree(raw, _recomputed(trainer, requests, raw))


def test_no_cached_prefix_crosses_a_weight_version(stand_in, model, monkeypatch) -> None:
    """The stand-in caches every prefix it computed, as vLLM's prefix caching keeps KV blocks. After a weight
    update the same prompts must be computed afresh: with the engine's reset the logprobs are the new policy's;
    without it (the reset skipped) they still come from the old weights and disagree with the trainer."""
    def updated(skip_reset: bool) -> bool:
        engine = _engine(model, True)
        if skip_reset:
            async def kept(**_: object) -> bool:
                return True

            monkeypatch.setattr(engine.engine, "reset_prefix_cache", kept)
        trainer = _trainer(model)
        requests = _requests(model, 2)
        _generate(engine, requests)  # fills the cache under version 0
        trainer.train_step(batch.segments(model.renderer()))
        engine.begin_weight_update(1)
        for bucket in trainer.export_weights(1 << 18):
            engine.update_weights(bucket)
        engine.commit_weight_update()
        after = _generate(engine, requests)
        import asyncio

        asyncio.run(engine.close())
        return _agree(after, _recomputed(trainer, requests, after))

    assert updated(skip_reset=False)
    assert not updated(skip_reset=True)


def test_top_p_below_one_is_refused_because_vllm_reports_truncated_logprobs(model) -> None:
    """vLLM's processed logprobs are taken after top-p truncation; the trainer's policy has no truncation
    (trainers/policy.py), so every ratio would be off: the engine refuses instead."""
    (request,) = _requests(model, 1, top_p=0.9)
    with pytest.raises(ValueError, match="top_p"):
        sampling_kwargs(request, {}, 0)
