"""The ``hf`` rollout engine on a tiny real Qwen3-VL: logprob convention, suppression, seeds, weight sync."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch

from core.config import AlgorithmSection
from core.interfaces import GenerationRequest
from core.weight_sync import WeightSyncError, sync_weights
from core.types import Segment
from plugins.rollout.hf import HFEngineOptions, HFRolloutEngine
from trainers.torch_backend import TorchTrainer, TorchTrainerOptions


def _engine(policy_model, **options) -> HFRolloutEngine:
    return HFRolloutEngine(HFEngineOptions(device="cpu", **options), model=policy_model, seed=0)


def _request(prompt, renderer, **kw) -> GenerationRequest:
    kw.setdefault("max_new_tokens", 12)
    kw.setdefault("stop_ids", renderer.stop_ids)
    return GenerationRequest(prompt_ids=prompt.ids, images=prompt.images, **kw)


async def _generate_all(engine, requests):
    return await asyncio.gather(*(engine.generate(r) for r in requests))


def _segments(prompts, generations, advantages):
    out = []
    for i, (prompt, gen, adv) in enumerate(zip(prompts, generations, advantages)):
        ids = prompt.ids + gen.ids
        out.append(Segment(f"t/{i}", "t", 0, ids, [0] * len(prompt.ids) + [1] * len(gen.ids),
                           [0.0] * len(prompt.ids) + gen.logprobs, images=prompt.images, advantage=adv))
    return out


def _max_gap(trainer, segments) -> float:
    gap = 0.0
    for seg, recomputed in zip(segments, trainer.recompute_logprobs(segments)):
        for m, a, b in zip(seg.loss_mask, seg.rollout_logprobs, recomputed):
            if m:
                gap = max(gap, abs(a - b))
    return gap


def test_rollout_logprobs_equal_the_trainers_recompute_before_and_after_a_weight_sync(policy_model, prompts) -> None:
    renderer = policy_model.renderer()
    algorithm = AlgorithmSection(temperature=0.8)
    engine = _engine(policy_model)
    trainer = TorchTrainer(TorchTrainerOptions(device="cpu", lr=5e-3), model=policy_model, algorithm=algorithm)
    requests = [_request(p, renderer, temperature=algorithm.temperature, seed=i) for i, p in enumerate(prompts)]
    generations = asyncio.run(_generate_all(engine, requests))
    assert engine.stats["max_batch"] == 2  # the two concurrent requests shared one batch
    segments = _segments(prompts, generations, [1.0, -1.0])
    assert _max_gap(trainer, segments) < 1e-5
    # at temperature 1 the same tokens have different logprobs: the convention is really the tempered one
    plain = TorchTrainer(TorchTrainerOptions(device="cpu"), model=policy_model,
                         algorithm=AlgorithmSection(temperature=1.0, kl_coef=0.0))
    assert _max_gap(plain, segments) > 1e-3

    metrics = trainer.train_step(segments)
    assert metrics["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    stale = asyncio.run(_generate_all(engine, requests))
    assert _max_gap(trainer, _segments(prompts, stale, [0.0, 0.0])) > 1e-4  # the engine has the old weights
    assert engine.weight_version is None and {g.weight_version for g in stale} == {None}
    assert sync_weights(trainer, engine, 1) == len(trainer.trainable_names)
    assert engine.weight_version == 1
    fresh = asyncio.run(_generate_all(engine, requests))
    assert _max_gap(trainer, _segments(prompts, fresh, [0.0, 0.0])) < 1e-5
    assert {g.weight_version for g in fresh} == {1}  # each generation says which policy sampled it


def test_suppressed_tokens_are_never_sampled_but_the_stop_token_is(policy_model, prompts) -> None:
    renderer = policy_model.renderer()
    engine = _engine(policy_model)
    suppressed = set(engine.suppress_ids)
    assert renderer.image_pad_id in suppressed and not suppressed & set(renderer.stop_ids)
    # the random model does put mass on those ids, so suppression is doing work
    with torch.no_grad():
        from plugins.qwen_vl.forward import build_model_inputs

        inputs = build_model_inputs(renderer, prompts[0].ids, prompts[0].images)
        logits = engine.model(**inputs).logits[0, -1]
    mass = torch.softmax(logits, -1)[sorted(suppressed)].sum().item()
    assert mass > 0.005
    requests = [_request(p, renderer, max_new_tokens=96, temperature=1.5, seed=10 + i, stop_ids=())
                for i, p in enumerate(prompts * 2)]
    generations = asyncio.run(_generate_all(engine, requests))
    sampled = [t for g in generations for t in g.ids]
    assert len(sampled) == 4 * 96
    assert not suppressed & set(sampled)
    assert all(g.finish_reason == "length" for g in generations)


def test_a_stop_token_ends_the_response(policy_model, prompts) -> None:
    renderer = policy_model.renderer()
    engine = _engine(policy_model)
    first = asyncio.run(engine.generate(_request(prompts[0], renderer, seed=5, stop_ids=(), max_new_tokens=12)))
    stop = first.ids[4]
    cut = first.ids.index(stop)
    stopped = asyncio.run(engine.generate(_request(prompts[0], renderer, seed=5, stop_ids=(stop,))))
    assert stopped.finish_reason == "stop"
    assert stopped.ids == first.ids[: cut + 1]
    assert stopped.logprobs == pytest.approx(first.logprobs[: cut + 1], abs=1e-6)
    assert stopped.text == renderer.decode(first.ids[:cut])  # the stop token is not part of the text


def test_seeded_sampling_does_not_depend_on_batching(policy_model, prompts) -> None:
    renderer = policy_model.renderer()
    engine = _engine(policy_model)
    requests = [_request(p, renderer, seed=42 + i) for i, p in enumerate(prompts)]
    batched = asyncio.run(_generate_all(engine, requests))
    alone = [asyncio.run(engine.generate(r)) for r in requests]
    for b, a in zip(batched, alone):
        assert b.ids == a.ids
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-5)
    other = asyncio.run(engine.generate(_request(prompts[0], renderer, seed=43)))
    assert other.ids != alone[0].ids
    assert all(len(g.ids) <= 12 for g in batched)


def test_top_p_truncates_the_draw(policy_model, prompts) -> None:
    renderer = policy_model.renderer()
    engine = _engine(policy_model)
    narrow = asyncio.run(engine.generate(_request(prompts[0], renderer, seed=1, top_p=1e-6, max_new_tokens=8)))
    # the tiniest nucleus keeps only the most likely token: sampling becomes greedy
    with torch.no_grad():
        from plugins.qwen_vl.forward import build_model_inputs
        from trainers.policy import policy_logits

        inputs = build_model_inputs(renderer, prompts[0].ids, prompts[0].images)
        logits = engine.model(**inputs).logits[0, -1]
        greedy = int(policy_logits(logits, temperature=0.8, suppressed=engine._suppressed).argmax())
    assert narrow.ids[0] == greedy


def test_greedy_decoding_follows_the_argmax_whatever_the_seed(policy_model, prompts) -> None:
    renderer = policy_model.renderer()
    engine = _engine(policy_model)
    outs = [asyncio.run(engine.generate(_request(prompts[0], renderer, seed=s, greedy=True, max_new_tokens=8)))
            for s in (1, 2, 3)]
    assert all(o.ids == outs[0].ids for o in outs)
    narrow = asyncio.run(engine.generate(_request(prompts[0], renderer, seed=9, top_p=1e-6, max_new_tokens=8)))
    assert outs[0].ids == narrow.ids  # the tiniest nucleus is greedy too
    # the logprobs are those of the sampling distribution at the request's temperature
    assert outs[0].logprobs == pytest.approx(narrow.logprobs, abs=1e-5)


def test_weight_updates_and_requests_are_checked(policy_model, prompts) -> None:
    renderer = policy_model.renderer()
    engine = _engine(policy_model)
    with pytest.raises(WeightSyncError, match="outside a weight-sync session"):
        engine.update_weights([])
    engine.begin_weight_update(1)
    with pytest.raises(KeyError, match="does not have"):
        engine.update_weights([("model.no_such.weight", torch.zeros(1))])
    name, param = next(iter(engine.model.named_parameters()))
    with pytest.raises(ValueError, match="shape"):
        engine.update_weights([(name, torch.zeros(param.numel() + 1))])
    engine.abort_weight_update()
    bad = [
        (_request(prompts[0], renderer, max_new_tokens=0), "max_new_tokens"),
        (_request(prompts[0], renderer, temperature=0.0), "temperature"),
        (_request(prompts[0], renderer, top_p=0.0), "top_p"),
        (_request(prompts[0], renderer, stop_ids=(renderer.image_pad_id,)), "suppressed"),
        (GenerationRequest(prompt_ids=[], images=[], max_new_tokens=4), "no prompt"),
    ]
    for request, message in bad:
        with pytest.raises(ValueError, match=message):
            asyncio.run(engine.generate(request))
    asyncio.run(engine.close())
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(engine.generate(_request(prompts[0], renderer)))


def test_registered_as_hf(plugins, policy_model) -> None:
    registry = plugins.registry("rollout_engine")
    engine = registry.create("hf", {"device": "cpu", "max_batch_size": 4}, model=policy_model, seed=1)
    assert isinstance(engine, HFRolloutEngine) and engine.options.max_batch_size == 4


def test_a_weight_sync_session_is_all_or_nothing_for_generation(policy_model, prompts) -> None:
    """Generations wait while a session is open and report the committed version; an aborted session that
    copied weights in leaves the engine refusing to generate until a later session commits; versions grow."""
    renderer = policy_model.renderer()
    engine = _engine(policy_model)
    weights = [(n, p.detach().clone()) for n, p in engine.model.named_parameters()
               if not n.startswith(tuple(policy_model.vision_parameter_prefixes()))]
    request = _request(prompts[0], renderer, seed=3)

    async def generate_during_a_session() -> Any:
        engine.begin_weight_update(1)
        pending = asyncio.ensure_future(engine.generate(request))
        await asyncio.sleep(0)  # the request is queued; it cannot finish while the session holds the engine
        assert not pending.done()
        engine.update_weights(weights[:1])
        engine.commit_weight_update()
        return await pending

    assert asyncio.run(generate_during_a_session()).weight_version == 1
    with pytest.raises(WeightSyncError, match="does not follow the current version 1"):
        engine.begin_weight_update(1)
    engine.begin_weight_update(2)
    with pytest.raises(WeightSyncError, match="still open"):
        engine.begin_weight_update(3)
    engine.update_weights(weights[:1])
    engine.abort_weight_update()
    assert engine.weight_version == 1
    with pytest.raises(WeightSyncError, match="aborted after copying some weights"):
        asyncio.run(engine.generate(request))
    engine.begin_weight_update(3)
    engine.update_weights(weights)
    engine.commit_weight_update()
    assert asyncio.run(engine.generate(request)).weight_version == 3
