"""``plugins.serving``: the in-process engine behind vLLM's HTTP API, driven with plain HTTP requests on loopback.

Checks the protocol itself (response shapes, vLLM's extensions), that bad
requests are refused with a 4xx and a reason naming the field, the
weight-update routes' state machine, the API key, and the command line.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.rollout.serve_fixtures import image_prompt, screenshot, serving, text_prompt, tiny_policy


@pytest.fixture(scope="module")
def served() -> Any:
    with serving(api_key="sesame") as (server, url):
        yield server, httpx.Client(base_url=url, headers={"Authorization": "Bearer sesame"}, timeout=120)


def _data_url(img: Any) -> str:
    return "data:image/png;base64," + base64.b64encode(img.png).decode()


def _refused(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    for word in words:
        assert word in message, message


def test_completions_answers_with_vllm_token_extensions(served: Any) -> None:
    _, client = served
    prompt = text_prompt()
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 6, "temperature": 0.7, "seed": 1, "logprobs": 0,
            "return_token_ids": True, "return_tokens_as_token_ids": True}
    choice = client.post("/v1/completions", json=body).json()["choices"][0]
    assert choice["prompt_token_ids"] == prompt and 1 <= len(choice["token_ids"]) <= 6
    assert choice["logprobs"]["tokens"] == [f"token_id:{i}" for i in choice["token_ids"]]
    assert all(lp < 0 for lp in choice["logprobs"]["token_logprobs"])
    assert choice["finish_reason"] in ("stop", "length")
    again = client.post("/v1/completions", json=body).json()["choices"][0]
    assert again["token_ids"] == choice["token_ids"]  # same seed, same sample
    assert client.get("/v1/models").json()["data"][0]["id"] == "tiny"


def test_render_returns_a_generate_request_whose_features_fit_the_token_ids(served: Any) -> None:
    _, client = served
    images = [screenshot("red"), screenshot("blue", (200, 120))]
    content = [{"type": "text", "text": "Look:"}] + [{"type": "image_url", "image_url": {"url": _data_url(i)}}
                                                      for i in images]
    rendered = client.post("/v1/chat/completions/render",
                           json={"messages": [{"role": "user", "content": content}]}).json()
    renderer = tiny_policy()[1].renderer()
    places = rendered["features"]["mm_placeholders"]["image"]
    assert [p["length"] for p in places] == [renderer.image_tokens(i) for i in images]
    for place in places:
        assert set(rendered["token_ids"][place["offset"]: place["offset"] + place["length"]]) == {renderer.image_pad_id}
    rendered["sampling_params"] = {"max_tokens": 4, "seed": 2, "logprobs": 0}
    generated = client.post("/inference/v1/generate", json=rendered).json()["choices"][0]
    assert len(generated["token_ids"]) == len(generated["logprobs"]["content"]) >= 1


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/v1/completions", {"prompt": [1, 2], "temperature": -1}, 400, ["temperature", "greedy"]),
        ("/v1/completions", {"prompt": [1, 99999]}, 400, ["99999", "outside the vocabulary"]),
        ("/v1/completions", {"prompt": []}, 400, ["prompt", "non-empty"]),
        ("/v1/completions", {"prompt": [1, 2], "top_k": 5}, 400, ["top_k=5", "not supported"]),
        ("/v1/completions", {"prompt": [1, 2], "n": 2}, 400, ["n=2"]),
        ("/v1/completions", {"prompt": [1, 2], "stream": True}, 400, ["stream"]),
        ("/v1/completions", {"prompt": [1, 2], "logprobs": 5}, 400, ["logprobs=5", "sampled token"]),
        ("/v1/completions", {"prompt": [1, 2], "max_tokens": 0}, 400, ["max_tokens", ">= 1"]),
        ("/v1/completions", {"prompt": [1, 2], "logit_bias": {"5": 3.0}}, 400, ["logit_bias", "bans"]),
        ("/v1/completions", {"prompt": [1, 2], "model": "gpt-9"}, 404, ["gpt-9", "does not exist"]),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}, 400, ["fetches no URLs"]),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "chat_template": "{{ 1 }}"},
         400, ["--trust-request-chat-template"]),
        ("/v1/chat/completions", {"messages": [{"role": "tool", "content": "x"}]}, 400, ["messages[0]", "role"]),
        ("/inference/v1/generate", {"token_ids": [1, 2]}, 400, ["sampling_params"]),
        ("/init_weight_transfer_engine", {}, 400, ["init_info"]),
        ("/init_weight_transfer_engine", {"init_info": {"master_address": "127.0.0.1"}}, 400, ["missing", "port"]),
        ("/init_weight_transfer_engine", {"init_info": {"master_address": "127.0.0.1", "master_port": 1234,
                                                        "rank_offset": 1, "world_size": 4}}, 400, ["1 worker"]),
        ("/update_weights", {"update_info": {"names": ["a"], "dtype_names": [], "shapes": [[1]]}}, 400,
         ["same length"]),
        ("/update_weights", {"update_info": {"names": ["a"], "dtype_names": ["float32"], "shapes": [[1]]}}, 409,
         ["/init_weight_transfer_engine"]),
        ("/start_weight_update", None, 409, ["/init_weight_transfer_engine first"]),
        ("/finish_weight_update", None, 409, ["/start_weight_update first"]),
        ("/pause?mode=later", None, 400, ["later"]),
        ("/v1/embeddings", {}, 404, ["no route", "/v1/completions"]),
    ],
)
def test_bad_requests_get_4xx_with_reasons(served: Any, path: str, body: Any, status: int, words: list[str]) -> None:
    _, client = served
    _refused(client.post(path, json=body), status, *words)


def test_generate_refuses_features_that_do_not_fit_the_tokens(served: Any) -> None:
    _, client = served
    img = screenshot("red")
    ids = image_prompt([img])
    renderer = tiny_policy()[1].renderer()
    start = ids.index(renderer.image_pad_id)
    count = renderer.image_tokens(img)
    item = base64.b64encode(img.png).decode()
    sampling = {"max_tokens": 2}

    def features(offset: int, length: int, data: Any = item) -> dict[str, Any]:
        return {"mm_hashes": {"image": ["h"]}, "mm_placeholders": {"image": [{"offset": offset, "length": length}]},
                "kwargs_data": {"image": [data]}}

    post = lambda f: client.post("/inference/v1/generate",  # noqa: E731
                                 json={"token_ids": ids, "sampling_params": sampling, "features": f})
    _refused(post(None), 400, "no features")
    _refused(post(features(start + 1, count)), 400, f"offset {start}, length {count}")
    _refused(post(features(start, count, None)), 400, "no multimodal cache")
    _refused(post(features(start, count, "bm90IGFuIGltYWdl")), 400, "not a base64-encoded image")
    assert post(features(start, count)).status_code == 200
    small = screenshot("red", (64, 64))  # expands to a different placeholder count
    if renderer.image_tokens(small) != count:
        _refused(post(features(start, count, base64.b64encode(small.png).decode())), 400, "placeholder tokens")


def test_beyond_loopback_without_a_key_generation_is_open_and_weight_updates_are_refused() -> None:
    from plugins.serving.routes import CONTROL_ROUTES

    with serving(host="0.0.0.0") as (server, url):
        local = "http://127.0.0.1:" + url.rsplit(":", 1)[1]
        assert httpx.get(f"{local}/v1/models").status_code == 200
        assert httpx.post(f"{local}/v1/completions", json={"model": "tiny", "prompt": [1, 2], "max_tokens": 2},
                          timeout=120).status_code == 200
        for path in sorted(CONTROL_ROUTES):
            _refused(httpx.post(f"{local}{path}", json={}), 403, path, "beyond loopback", "--api-key")
        assert not server.gate.paused and not server.engine.weight_version
    with serving(host="0.0.0.0", api_key="sesame") as (server, url):
        local = "http://127.0.0.1:" + url.rsplit(":", 1)[1]
        _refused(httpx.post(f"{local}/pause"), 401, "API key")
        key = {"Authorization": "Bearer sesame"}
        assert httpx.post(f"{local}/pause", headers=key).json() == {"status": "paused"}
        assert httpx.post(f"{local}/resume", headers=key).json() == {"status": "resumed"}
    with serving() as (server, url):  # loopback without a key: the trainer beside it may update the weights
        assert httpx.post(f"{url}/pause").json() == {"status": "paused"} and server.gate.paused


def test_http_level_errors(served: Any) -> None:
    server, client = served
    _refused(client.post("/v1/completions", content=b"{not json", headers={"Content-Type": "application/json"}),
             400, "not valid JSON")
    _refused(client.get("/v1/completions"), 405, "GET is not allowed")
    url = str(client.base_url)
    _refused(httpx.post(f"{url}/v1/completions", json={"prompt": [1]}), 401, "API key")
    _refused(httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"}), 401, "API key")
    assert httpx.get(f"{url}/health").status_code == 200  # open, for load balancers
    assert client.get("/get_world_size").json() == {"world_size": 1}
    assert client.post("/pause").json() == {"status": "paused"} and client.get("/is_paused").json()["is_paused"]
    assert client.post("/resume").json() == {"status": "resumed"} and not server.gate.paused


def test_command_line_serves_a_model_directory(tmp_path: Path) -> None:
    _, model = tiny_policy()
    directory = model.save_pretrained_dir(tmp_path / "tiny-model")
    env = {**os.environ, "SCALECUA_SERVE_API_KEY": "k3y"}
    proc = subprocess.Popen([sys.executable, "-m", "plugins.serving", "--model", str(directory), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("plugins.serving listening on http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
        url = line.split()[-1]
        headers = {"Authorization": "Bearer k3y"}
        assert httpx.get(f"{url}/v1/models", headers=headers).json()["data"][0]["id"] == str(directory)
        answer = httpx.post(f"{url}/v1/completions", headers=headers, timeout=120,
                            json={"prompt": text_prompt(), "max_tokens": 3, "return_token_ids": True}).json()
        assert 1 <= len(answer["choices"][0]["token_ids"]) <= 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_command_line_reports_a_missing_model_directory(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "plugins.serving", "--model", str(tmp_path / "nope"), "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "has no config.json" in done.stderr and "Traceback" not in done.stderr
