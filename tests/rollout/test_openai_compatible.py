"""The ``openai-compatible`` rollout engine against a real server on loopback.

No vLLM runs on these machines (it needs CUDA), so the server is
``plugins.serving``: a real HTTP server speaking the same protocol subset (OpenAI
completions/chat with vLLM's ``return_token_ids``/``logprobs`` extensions,
vLLM's render + tokens-in/tokens-out generate pair, vLLM's weight-transfer
routes) in front of the in-process ``hf`` engine. What the remote engine
returns must equal what an ``hf`` engine with the same weights returns in
process for the same seed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch

from core.interfaces import GenerationRequest
from plugins.rollout.openai_compatible import PromptMismatchError, RemoteEngineError
from core.weight_sync import sync_weights
from plugins.rollout.remote_weights import WeightSyncError
from tests.rollout.serve_fixtures import (
    hf_engine,
    image_prompt,
    record,
    remote_engine,
    screenshot,
    serving,
    text_prompt,
    tiny_policy,
)


@pytest.fixture(scope="module")
def served() -> Any:
    with serving(trust_request_chat_template=True) as (server, url):
        yield server, url


@pytest.fixture(scope="module")
def direct() -> Any:
    """An in-process hf engine with the same (untouched) weights as the module's server."""
    return hf_engine()


def request(ids: list[int], images: list[Any] = (), *, seed: int = 11, tokens: int = 10) -> GenerationRequest:
    _, model = tiny_policy()
    return GenerationRequest(prompt_ids=ids, images=list(images), max_new_tokens=tokens, temperature=0.8,
                             stop_ids=model.renderer().stop_ids, seed=seed)


def run(engine: Any, *requests: GenerationRequest) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return [await engine.generate(r) for r in requests]
        finally:
            if hasattr(engine, "weights"):  # the remote engine owns HTTP clients
                await engine.close()

    return asyncio.run(go())


def direct_run(engine: Any, *requests: GenerationRequest) -> list[Any]:
    async def go() -> list[Any]:
        return [await engine.generate(r) for r in requests]

    return asyncio.run(go())


def test_text_prompt_over_completions_equals_in_process(served: Any, direct: Any) -> None:
    server, url = served
    seen = record(server, "POST", "/v1/completions")
    requests = [request(text_prompt(), seed=s, tokens=12) for s in (1, 2, 3)]
    remote = run(remote_engine(url), *requests)
    local = direct_run(direct, *requests)
    for r, d in zip(remote, local):
        assert (r.ids, r.logprobs, r.text, r.finish_reason) == (d.ids, d.logprobs, d.text, d.finish_reason)
    assert len({tuple(r.ids) for r in remote}) == 3  # seeds matter
    sent = seen[-1]
    assert sent["prompt"] == requests[-1].prompt_ids and sent["return_token_ids"] is True and sent["logprobs"] == 0
    _, model = tiny_policy()
    assert sent["stop_token_ids"] == list(model.renderer().stop_ids)
    assert all(v == -100 for v in sent["logit_bias"].values()) and str(model.renderer().image_pad_id) in \
        sent["logit_bias"]


def test_images_over_render_and_generate_equal_in_process_and_are_sent_once(served: Any, direct: Any) -> None:
    server, url = served
    renders = record(server, "POST", "/v1/chat/completions/render")
    generates = record(server, "POST", "/inference/v1/generate")
    first, second, third = screenshot("red"), screenshot("blue", (200, 120)), screenshot("green", (96, 160))
    turn1 = request(image_prompt([first, second]), [first, second], seed=5)
    turn2 = request(image_prompt([first, second, third]), [first, second, third], seed=6)
    engine = remote_engine(url)
    remote = run(engine, turn1, turn2)
    local = direct_run(direct, turn1, turn2)
    for r, d in zip(remote, local):
        assert (r.ids, r.logprobs, r.text) == (d.ids, d.logprobs, d.text)
    # each image travels to the renderer once (the second turn renders only the new one) ...
    sent_images = [[p["image_url"]["url"] for p in body["messages"][0]["content"]] for body in renders]
    assert [len(urls) for urls in sent_images] == [2, 1]
    # ... and each generate request carries exactly one data item per placeholder run, on our ids unchanged
    for body, turn in zip(generates, (turn1, turn2)):
        assert body["token_ids"] == turn.prompt_ids
        places = body["features"]["mm_placeholders"]["image"]
        assert len(places) == len(body["features"]["kwargs_data"]["image"]) == len(turn.images)
        renderer = tiny_policy()[1].renderer()
        for place, img in zip(places, turn.images):
            run_ids = turn.prompt_ids[place["offset"]: place["offset"] + place["length"]]
            assert run_ids == [renderer.image_pad_id] * renderer.image_tokens(img)


def test_concurrent_image_requests_survive_a_tiny_feature_cache(served: Any) -> None:
    server, url = served
    renders = record(server, "POST", "/v1/chat/completions/render")
    colors = [("red", "blue"), ("green", "yellow"), ("purple", "orange")]
    turns = [[screenshot(a), screenshot(b, (160, 96))] for a, b in colors]
    engine = remote_engine(url, image_cache_size=1)

    async def go() -> list[Any]:
        try:
            return await asyncio.gather(*[engine.generate(request(image_prompt(t), t, seed=i, tokens=4))
                                          for i, t in enumerate(turns)])
        finally:
            await engine.close()

    results = asyncio.run(go())
    assert all(1 <= len(r.ids) == len(r.logprobs) <= 4 for r in results)
    assert sum(len(body["messages"][0]["content"]) for body in renders) == 6  # each image rendered once
    assert len(engine._image_cache) == 1


def test_chat_path_sends_one_image_per_placeholder_and_checks_the_prompt(served: Any, direct: Any) -> None:
    server, url = served
    chats = record(server, "POST", "/v1/chat/completions")
    images = [screenshot("red"), screenshot("blue", (200, 120))]
    turn = request(image_prompt(images), images, seed=9)
    [remote] = run(remote_engine(url, prompt_api="chat"), turn)
    [local] = direct_run(direct, turn)
    assert (remote.ids, remote.logprobs) == (local.ids, local.logprobs)
    parts = chats[-1]["messages"][0]["content"]
    pad = tiny_policy()[1].renderer().decode([tiny_policy()[1].renderer().image_pad_id])
    assert [p["type"] for p in parts].count("image_url") == 2
    assert sum(p["text"].count(pad) for p in parts if p["type"] == "text") == 0


def _non_canonical_pair() -> tuple[list[int], str]:
    """Two token ids whose text re-tokenizes to a single different token (what sampled history can hold)."""
    renderer = tiny_policy()[1].renderer()
    for token in range(len(renderer.tokenizer)):
        text = renderer.decode([token])
        if len(text) >= 3 and text.isalpha() and renderer.encode_text(text) == [token]:
            head, tail = renderer.encode_text(text[0]), renderer.encode_text(text[1:])
            if len(head) == 1 and len(tail) == 1:
                return head + tail, text
    raise AssertionError("the tiny tokenizer has no merged token made of two tokens")


def test_chat_path_reports_a_retokenized_prompt_loudly(served: Any) -> None:
    _, url = served
    pair, text = _non_canonical_pair()
    ids = text_prompt() + pair
    with pytest.raises(PromptMismatchError, match=f"position {len(text_prompt())}") as err:
        run(remote_engine(url, prompt_api="chat"), request(ids))
    assert "re-tokenized" in str(err.value) and text in str(err.value)
    # the exact paths keep the same ids untouched
    [ok] = run(remote_engine(url, prompt_api="completions"), request(ids))
    assert ok.ids and ok.finish_reason in ("stop", "length")
    # warn mode still generates (from the server's prompt)
    [warned] = run(remote_engine(url, prompt_api="chat", on_prompt_mismatch="warn"), request(ids))
    assert warned.ids


def test_server_refusals_reach_the_caller_with_their_reason(served: Any) -> None:
    _, url = served
    negative = GenerationRequest(prompt_ids=text_prompt(), images=[], max_new_tokens=4, temperature=-0.5)
    with pytest.raises(RemoteEngineError, match="temperature must be >= 0") as err:
        run(remote_engine(url), negative)
    assert err.value.status == 400
    with pytest.raises(RemoteEngineError, match="does not exist"):
        run(remote_engine(url, served_model="other-model"), request(text_prompt()))
    images = [screenshot("red")]
    with pytest.raises(ValueError, match="cannot send images"):
        run(remote_engine(url, prompt_api="completions"), request(image_prompt(images), images))


def test_unreachable_server_is_retried_then_reported() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = remote_engine(f"http://127.0.0.1:{port}", served_model="tiny", max_retries=2, retry_backoff_s=0.01,
                           server_restart_wait_s=0.2)  # a refusing server is waited for, this long, then retried
    with pytest.raises(RemoteEngineError, match=r"after 3 attempts \(ConnectError: .*refused for 0 s\)"):
        run(engine, request(text_prompt()))


def test_a_paused_server_holds_requests_and_timeouts_apply(served: Any, direct: Any) -> None:
    import httpx

    server, url = served
    httpx.post(f"{url}/pause", params={"mode": "wait"}).raise_for_status()
    assert httpx.get(f"{url}/is_paused").json() == {"is_paused": True}
    try:
        with pytest.raises(RemoteEngineError, match="ReadTimeout"):
            run(remote_engine(url, timeout_s=0.5, max_retries=0), request(text_prompt()))
    finally:
        httpx.post(f"{url}/resume").raise_for_status()
    _wait_for(lambda: server.gate.in_flight == 0)  # the abandoned request must not share a batch below
    [after] = run(remote_engine(url), request(text_prompt(), seed=4))
    [local] = direct_run(direct, request(text_prompt(), seed=4))
    assert after.ids == local.ids


def _wait_for(condition: Any, timeout_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


class _Weights:
    """A trainer as far as a weight sync sees one: it exports these (name, tensor) pairs as one bucket."""

    def __init__(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        self.weights = weights

    def export_weights(self) -> list[list[tuple[str, torch.Tensor]]]:
        return [self.weights]


def _perturbed(engine: Any, scale: float, seed: int) -> list[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [(name, p.detach().clone() + scale * torch.randn(p.shape, generator=generator))
            for name, p in engine.model.named_parameters() if not name.startswith("model.visual.")]


def test_weight_update_over_http_changes_outputs_and_matches_a_direct_update() -> None:
    with serving() as (server, url):
        engine, direct = remote_engine(url, weight_transfer={"bucket_bytes": 300_000}), hf_engine()
        probe = request(text_prompt(), seed=21, tokens=12)
        [before] = direct_run(direct, probe)
        initialized = record(server, "POST", "/init_weight_transfer_engine")
        updates = record(server, "POST", "/update_weights")
        for version in (1, 2):  # the second round reuses the group
            weights = _Weights(_perturbed(direct, 0.05, version))
            sync_weights(weights, engine, version)
            sync_weights(weights, direct, version)
        [remote] = run(engine, probe)
        [local] = direct_run(direct, probe)
        assert remote.ids != before.ids and remote.weight_version == engine.weight_version == 2
        assert (remote.ids, remote.logprobs) == (local.ids, local.logprobs)
        assert len(initialized) == 1 and server.weights.updates == len(updates) > 2  # several buckets per round
        assert all(u["update_info"]["packed"] for u in updates)
        assert not server.gate.paused and not server.weights.session


def test_failed_weight_update_names_the_tensor_and_the_next_update_recovers() -> None:
    with serving() as (server, url):
        engine, direct = remote_engine(url), hf_engine()
        good = _perturbed(direct, 0.05, 3)
        with pytest.raises(WeightSyncError, match="lm_head.not_a_weight"):
            sync_weights(_Weights([*good[:2], ("lm_head.not_a_weight", torch.zeros(3))]), engine, 1)
        assert not server.gate.paused  # resumed despite the failure
        assert engine.weight_version is None  # nothing was committed
        init_calls = record(server, "POST", "/init_weight_transfer_engine")
        sync_weights(_Weights(good), engine, 1)
        sync_weights(_Weights(good), direct, 1)
        assert len(init_calls) == 1  # a failed update forces a fresh rendezvous
        probe = request(text_prompt(), seed=8)
        assert run(engine, probe)[0].ids == direct_run(direct, probe)[0].ids


def test_nccl_backend_without_vllm_says_how_to_fix_it(served: Any) -> None:
    _, url = served
    engine = remote_engine(url, weight_transfer={"backend": "nccl"})
    with pytest.raises(WeightSyncError, match=r"pip install 'scalecua\[gpu\]'"):
        sync_weights(_Weights(_perturbed(hf_engine(), 0.0, 0)[:1]), engine, 1)


def test_greedy_requests_decode_the_most_likely_token_whatever_the_seed(served: Any) -> None:
    """``greedy`` goes out as temperature 0 (vLLM's greedy decoding); the served model answers with its argmax."""
    _, url = served
    outs = [run(remote_engine(url), GenerationRequest(prompt_ids=text_prompt(), images=[], max_new_tokens=6,
                                                      temperature=0.8, seed=seed, greedy=True))[0]
            for seed in (1, 2, 3)]
    assert outs[0].ids and all(o.ids == outs[0].ids for o in outs)
