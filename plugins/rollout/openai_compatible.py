"""Rollout engine ``openai-compatible``: generation on a remote OpenAI-compatible server (``vllm serve``, ``plugins.serving``).

The policy generates from the segmenter's token stream, so the prompt must
reach the model exactly as the segmenter holds it; re-tokenizing rendered
text changes BPE boundaries of sampled history. Three request paths, by
``prompt_api`` (``auto`` picks the first or the second):

* ``completions`` — ``POST /v1/completions`` with the token ids as ``prompt``.
  Exact, but OpenAI's completions API carries no images: text-only prompts.
* ``generate`` — vLLM's tokens-in/tokens-out API (vLLM >= 0.20; newer
  releases need ``vllm serve --enable-scale-out``): each image not seen before
  is sent once to ``POST /v1/chat/completions/render``, whose ``features``
  (processed pixels, hash, placeholder length) are cached; then
  ``POST /inference/v1/generate`` takes our *expanded* ids unchanged plus
  those features with placeholder offsets moved onto our image-pad runs.
  Exact, with images. A server that expands an image to a different number of
  placeholders than our renderer (different pixel bounds) is refused loudly.
  Cost: every generate request carries each of its images' processed pixels
  (vLLM's ``kwargs_data``; no server-side cache is relied on), once per image.
* ``chat`` — ``POST /v1/chat/completions`` for servers without the above: our
  ids, collapsed to one placeholder per image, are decoded into text parts
  between image parts and rendered by a pass-through ``chat_template``
  (vLLM needs ``--trust-request-chat-template``, and must read the template's
  content as OpenAI parts, as it detects from the loop over
  ``message['content']``; ``--chat-template-content-format openai`` forces it);
  the server *re-tokenizes* that text. ``return_token_ids`` gives back the server's prompt ids, which
  must equal ours: a mismatch (non-canonical BPE in sampled history, a
  different image expansion) raises :class:`PromptMismatchError`
  (``on_prompt_mismatch: warn`` logs it instead).

Every path asks for the sampled token's logprob (``logprobs: 0``) and the
sampled ids (``return_token_ids``). vLLM reports logprobs of the *raw* model
distribution unless started with ``--logprobs-mode processed_logprobs``; the
trainer needs them at the sampling temperature, so start vLLM with that flag.
Special and vision tokens the policy never emits are banned with a
``logit_bias`` of -100 (vLLM's limit; the residual mass is < e^-100).

Weight updates use vLLM's weight-transfer HTTP protocol
(:mod:`plugins.rollout.remote_weights`). A vLLM server for this engine::

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --logprobs-mode processed_logprobs \
        --weight-transfer-config '{"backend": "nccl"}' --enable-scale-out [--trust-request-chat-template]

``python -m plugins.serving`` serves the in-process engine over the same protocol.

A server that restarts holds the weights it loaded at start, not those pushed to it. While it is down, requests
wait for it (``server_restart_wait_s``). Its answers then come from another process
(:mod:`plugins.rollout.server_identity`): a generation that started before the restart refuses them, every
generation raises :class:`core.interfaces.EngineRestarted` until a push commits again, and the run loop
pushes the trainer's weights again and re-issues the requests (:mod:`core.runtime.weights`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import OrderedDict
from typing import Any, Iterable, Literal, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import Generation, GenerationRequest, PolicyModel, RolloutEngine
from plugins.serving.protocol import pad_runs
from core.types import Screenshot
from plugins.rollout.openai_wire import (
    PromptMismatchError,
    RemoteEngineError,
    api_key_from_env,
    data_url,
    error_reason,
    first_choice,
    image_features,
    json_object,
    passthrough_template,
)
from plugins.rollout.remote_weights import RemoteWeightSync, WeightSyncError, WeightTransferOptions
from plugins.rollout.server_identity import RestartWatch

log = structlog.get_logger(__name__)

#: longest wait between two connection attempts while the server is down
_REFUSED_BACKOFF_S = 2.0

class _Refused(WeightSyncError):
    """A weight-sync request found no server listening (down or restarting)."""


_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


class OpenAICompatibleOptions(BaseModel):
    """Options of the ``openai-compatible`` rollout engine."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field("http://127.0.0.1:8000", description="server root (without /v1)")
    served_model: str | None = Field(None, description="model name on the server (default: the first of /v1/models)")
    api_key_env: str | None = Field(None, description="environment variable holding the server's API key")
    prompt_api: Literal["auto", "completions", "generate", "chat"] = Field(
        "auto", description="auto: completions for text-only prompts, generate when there are images"
    )
    on_prompt_mismatch: Literal["error", "warn"] = Field("error", description="when the server's prompt ids differ")
    suppress_special_tokens: bool = Field(True, description="ban vision/special tokens with logit_bias -100")
    timeout_s: float = Field(600.0, gt=0, description="per-request timeout")
    connect_timeout_s: float = Field(10.0, gt=0, description="connection timeout")
    max_retries: int = Field(4, ge=0, description="retries of connection errors, timeouts, 408/429/5xx")
    server_restart_wait_s: float = Field(
        300.0, ge=0, description="how long a request waits for a server that refuses connections (restarting) "
                                 "before it fails; refusals do not count against max_retries"
    )
    retry_backoff_s: float = Field(0.5, ge=0, description="first retry delay (doubles, jittered, at most 30 s)")
    max_concurrency: int = Field(256, ge=1, description="requests in flight at once")
    image_cache_size: int = Field(64, ge=0, description="rendered image features kept for the generate API")
    weight_transfer: WeightTransferOptions = Field(default_factory=WeightTransferOptions)


class OpenAICompatibleEngine(RolloutEngine):
    def __init__(self, options: OpenAICompatibleOptions, *, model: PolicyModel, seed: int = 0) -> None:
        import httpx


        self.options = options
        self.renderer = model.renderer()
        self.base_url = options.base_url.rstrip("/")
        self.api_key = api_key_from_env(options.api_key_env)
        suppressed = model.suppressed_ids() if options.suppress_special_tokens else []
        self.logit_bias = {str(i): -100.0 for i in suppressed}
        self._image_cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._semaphore: asyncio.Semaphore | None = None
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._sync = httpx.Client(headers=self._headers(), timeout=options.weight_transfer.timeout_s)
        self._served_model = options.served_model
        self.weights = RemoteWeightSync(options.weight_transfer, self.base_url, post=self._post_sync,
                                        get=self._get_sync)
        self._rng = random.Random(seed)
        self.restarts = RestartWatch(self.base_url, self.weights)

    # -- RolloutEngine ----------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> Generation:
        runs = pad_runs(request.prompt_ids, self.renderer.image_pad_id)
        if len(runs) != len(request.images):
            raise ValueError(f"prompt holds {len(runs)} image placeholder runs but {len(request.images)} images")
        api = self.options.prompt_api
        if api == "auto":
            api = "generate" if request.images else "completions"
        if api == "completions" and request.images:
            raise ValueError("prompt_api 'completions' cannot send images (OpenAI completions take no images); "
                             "use 'generate' (vLLM >= 0.20) or 'chat'")
        client, semaphore = self._async_client()
        async with semaphore:
            self.restarts.generation_starts()  # refused while a restarted server lacks the pushed weights
            version = self.weight_version  # the server pauses for updates: a request started now samples this one
            if api == "completions":
                generation = await self._via_completions(client, request)
            elif api == "generate":
                generation = await self._via_generate(client, request, runs)
            else:
                generation = await self._via_chat(client, request)
        generation.weight_version = version
        return generation

    @property
    def weight_version(self) -> int | None:
        return self.weights.version

    def begin_weight_update(self, version: int) -> None:
        self._probe_server()
        self.weights.begin(version)

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        self.weights.send(weights)

    def commit_weight_update(self) -> None:
        self.weights.commit()
        self.restarts.committed()

    def abort_weight_update(self) -> None:
        self.weights.abort()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self._sync.close()

    # -- the three paths ----------------------------------------------------------------

    async def _via_completions(self, client: Any, request: GenerationRequest) -> Generation:
        body = {**self._sampling(request), "model": await self._model(client), "prompt": list(request.prompt_ids),
                "max_tokens": request.max_new_tokens, "logprobs": 0, "echo": False}
        data = await self._post(client, "/v1/completions", body)
        choice = first_choice(data, "/v1/completions")
        self._check_prompt(choice.get("prompt_token_ids"), request.prompt_ids, "/v1/completions")
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        return self._generation(choice, logprobs, request, "/v1/completions")

    async def _via_generate(self, client: Any, request: GenerationRequest, runs: list[tuple[int, int]]) -> Generation:
        model = await self._model(client)
        features = await self._features(client, model, request.images, runs)
        sampling = {k: v for k, v in self._sampling(request).items() if k not in ("return_token_ids", "n")}
        sampling.update(max_tokens=request.max_new_tokens, logprobs=0, n=1)
        body = {"model": model, "token_ids": list(request.prompt_ids), "sampling_params": sampling, "stream": False}
        if features is not None:
            body["features"] = features
        data = await self._post(client, "/inference/v1/generate", body)
        choice = first_choice(data, "/inference/v1/generate")
        content = (choice.get("logprobs") or {}).get("content")
        logprobs = None if content is None else [entry.get("logprob") for entry in content]
        return self._generation(choice, logprobs, request, "/inference/v1/generate")

    async def _via_chat(self, client: Any, request: GenerationRequest) -> Generation:
        pad_id = self.renderer.image_pad_id
        pad_text = self.renderer.decode([pad_id])
        parts: list[dict[str, Any]] = []
        text_ids: list[int] = []
        images = iter(request.images)
        for token in self.renderer.collapse_image_pads(request.prompt_ids):
            if token != pad_id:
                text_ids.append(token)
                continue
            if text_ids:
                parts.append({"type": "text", "text": self.renderer.decode(text_ids)})
                text_ids = []
            parts.append({"type": "image_url", "image_url": {"url": data_url(next(images))}})
        if text_ids:
            parts.append({"type": "text", "text": self.renderer.decode(text_ids)})
        body = {**self._sampling(request), "model": await self._model(client),
                "messages": [{"role": "user", "content": parts}], "chat_template": passthrough_template(pad_text),
                "add_generation_prompt": False, "add_special_tokens": False,
                "max_completion_tokens": request.max_new_tokens, "logprobs": True, "top_logprobs": 0}
        data = await self._post(client, "/v1/chat/completions", body)
        choice = first_choice(data, "/v1/chat/completions")
        self._check_prompt(data.get("prompt_token_ids"), request.prompt_ids, "/v1/chat/completions")
        content = (choice.get("logprobs") or {}).get("content")
        logprobs = None if content is None else [entry.get("logprob") for entry in content]
        return self._generation(choice, logprobs, request, "/v1/chat/completions")

    # -- pieces -------------------------------------------------------------------------

    def _sampling(self, request: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "temperature": 0.0 if request.greedy else request.temperature, "top_p": request.top_p, "n": 1,
            "stop_token_ids": list(request.stop_ids), "return_token_ids": True, "skip_special_tokens": False,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if self.logit_bias:
            body["logit_bias"] = self.logit_bias
        return body

    async def _features(self, client: Any, model: str, images: Sequence[Screenshot],
                        runs: list[tuple[int, int]]) -> dict[str, Any] | None:
        """vLLM multimodal features for ``images``, placed on our pad runs (render once per new image)."""
        if not images:
            return None
        # take what is cached now: concurrent requests may evict entries while this one awaits the render
        known = {img.digest: self._image_cache[img.digest] for img in images if img.digest in self._image_cache}
        new = list({img.digest: img for img in images if img.digest not in known}.values())
        if new:
            content = [{"type": "image_url", "image_url": {"url": data_url(img)}} for img in new]
            data = await self._post(client, "/v1/chat/completions/render",
                                    {"model": model, "messages": [{"role": "user", "content": content}]})
            for img, item in zip(new, image_features(data, len(new))):
                known[img.digest] = self._image_cache[img.digest] = item
        hashes, places, kwargs = [], [], []
        for index, (img, (offset, length)) in enumerate(zip(images, runs)):
            item = known[img.digest]
            if img.digest in self._image_cache:
                self._image_cache.move_to_end(img.digest)
            if item["length"] != length:
                raise PromptMismatchError(
                    f"image {index} ({img.width}x{img.height}) expands to {item['length']} placeholders on the server "
                    f"but to {length} in our token stream; make the server's image processor (min_pixels/max_pixels, "
                    "mm_processor_kwargs) match the model options"
                )
            hashes.append(item["hash"])
            places.append({"offset": offset, "length": length})
            kwargs.append(item["kwargs"])
        while len(self._image_cache) > self.options.image_cache_size:
            self._image_cache.popitem(last=False)
        return {"mm_hashes": {"image": hashes}, "mm_placeholders": {"image": places}, "kwargs_data": {"image": kwargs}}

    def _check_prompt(self, server_ids: Any, ours: Sequence[int], endpoint: str) -> None:
        if server_ids is None:
            raise RemoteEngineError(f"{endpoint} returned no prompt_token_ids: the server ignores return_token_ids "
                                    "(vLLM >= 0.10.2 supports it), so the prompt cannot be verified")
        if list(server_ids) == list(ours):
            return
        at = next((i for i, (a, b) in enumerate(zip(server_ids, ours)) if a != b), min(len(server_ids), len(ours)))
        window = slice(max(0, at - 8), at + 8)
        message = (
            f"{endpoint}: the server's prompt differs from the segmenter's token stream at position {at} "
            f"(server {len(server_ids)} ids, ours {len(ours)}): server ...{self.renderer.decode(server_ids[window])!r} "
            f"vs ours ...{self.renderer.decode(list(ours)[window])!r}. The server re-tokenized the prompt; use "
            "prompt_api 'generate' (exact token ids with images) or 'completions' (text only)"
        )
        if self.options.on_prompt_mismatch == "error":
            raise PromptMismatchError(message)
        log.warning("prompt mismatch", detail=message)

    def _generation(self, choice: dict[str, Any], logprobs: Any, request: GenerationRequest,
                    endpoint: str) -> Generation:
        ids = choice.get("token_ids")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise RemoteEngineError(f"{endpoint} returned no token_ids: the server does not support "
                                    "return_token_ids (vLLM >= 0.10.2)")
        if not isinstance(logprobs, list) or len(logprobs) != len(ids) or any(lp is None for lp in logprobs):
            raise RemoteEngineError(f"{endpoint} returned {len(logprobs or [])} logprobs for {len(ids)} tokens; "
                                    "the sampled-token logprob of every token is required")
        finish = choice.get("finish_reason")
        if finish not in ("stop", "length"):
            raise RemoteEngineError(f"{endpoint}: finish_reason {finish!r} (the server aborted the request)",
                                    status=503)
        stops = {*request.stop_ids, *self.renderer.stop_ids}
        text_ids = ids[:-1] if finish == "stop" and ids and ids[-1] in stops else ids  # as the hf engine: no stop
        return Generation(ids=ids, logprobs=[float(lp) for lp in logprobs], text=self.renderer.decode(text_ids),
                          finish_reason=finish)

    # -- server restarts ------------------------------------------------------------------

    def _probe_server(self) -> None:
        """Before a push: wait for a server that refuses connections (restarting), then learn which process
        answers; another than the known one lost the pushed weights (``restarts.push_answered`` sees to it)."""
        started = time.monotonic()
        while True:
            try:
                self._sync_request("GET", "/health", None)
                return
            except _Refused:
                waited = time.monotonic() - started
                if waited >= self.options.server_restart_wait_s:
                    raise
                log.warning("rollout server refuses connections; waiting for it before the push",
                            server=self.base_url, waited_s=round(waited, 1))
                time.sleep(min(_REFUSED_BACKOFF_S, self.options.server_restart_wait_s - waited))

    # -- HTTP ---------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _async_client(self) -> tuple[Any, asyncio.Semaphore]:
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # clients are bound to the loop that made them
            timeout = httpx.Timeout(self.options.timeout_s, connect=self.options.connect_timeout_s)
            limits = httpx.Limits(max_connections=self.options.max_concurrency)
            self._client = httpx.AsyncClient(headers=self._headers(), timeout=timeout, limits=limits)
            self._client_loop = loop
            self._semaphore = asyncio.Semaphore(self.options.max_concurrency)
        assert self._semaphore is not None
        return self._client, self._semaphore

    async def _model(self, client: Any) -> str:
        if self._served_model is None:
            data = await self._request(client, "GET", "/v1/models", None)
            models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
            if not models:
                raise RemoteEngineError(f"{self.base_url}/v1/models lists no model; set rollout.options.served_model")
            self._served_model = str(models[0])
        return self._served_model

    async def _post(self, client: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._request(client, "POST", path, body)

    async def _request(self, client: Any, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        import httpx

        url = self.base_url + path
        attempt, refusals, refused_since = 0, 0, None
        while True:
            retry_reason = None
            try:
                response = await client.request(method, url, json=body)
            except httpx.ConnectError as exc:  # nothing listens: the server is down or restarting
                self.restarts.identity.refused()
                refused_since = refused_since if refused_since is not None else time.monotonic()
                waited = time.monotonic() - refused_since
                if waited < self.options.server_restart_wait_s:
                    delay = min(_REFUSED_BACKOFF_S, self.options.retry_backoff_s * 2 ** min(refusals, 8))
                    refusals += 1
                    log.warning("rollout server refuses connections; waiting for it", url=url,
                                waited_s=round(waited, 1), error=str(exc))
                    await asyncio.sleep(min(delay, self.options.server_restart_wait_s - waited))
                    continue
                retry_reason = f"{type(exc).__name__}: {exc} (refused for {waited:.0f} s)"
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                retry_reason = f"{type(exc).__name__}: {exc}"
            else:
                self.restarts.generation_answered(response.headers)
                if response.status_code < 400:
                    return json_object(response, url)
                if response.status_code not in _RETRY_STATUS:
                    raise RemoteEngineError(f"{method} {url} -> {response.status_code}: {error_reason(response)}",
                                            status=response.status_code)
                retry_reason = f"{response.status_code}: {error_reason(response)}"
            if attempt >= self.options.max_retries:
                raise RemoteEngineError(f"{method} {url} failed after {attempt + 1} attempts ({retry_reason})")
            delay = min(30.0, self.options.retry_backoff_s * 2**attempt) * (0.5 + self._rng.random())
            log.warning("retrying rollout request", url=url, attempt=attempt + 1, reason=retry_reason,
                        delay_s=round(delay, 2))
            attempt += 1
            await asyncio.sleep(delay)

    def _post_sync(self, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        return self._sync_request("POST", path, body)

    def _get_sync(self, path: str) -> dict[str, Any]:
        return self._sync_request("GET", path, None)

    def _sync_request(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        import httpx

        url = self.base_url + path
        try:
            response = self._sync.request(method, url, json=body)
        except httpx.HTTPError as exc:
            if isinstance(exc, httpx.ConnectError):
                self.restarts.identity.refused()
                raise _Refused(f"{method} {url}: {type(exc).__name__}: {exc}") from None
            raise WeightSyncError(f"{method} {url}: {type(exc).__name__}: {exc}") from None
        self.restarts.push_answered(response.headers)
        if response.status_code >= 400:
            raise WeightSyncError(f"{method} {url} -> {response.status_code}: {error_reason(response)}")
        return json_object(response, url) if response.content else {}


def create_openai_compatible_engine(options: OpenAICompatibleOptions, *, model: PolicyModel, seed: int = 0,
                                    **_: Any) -> OpenAICompatibleEngine:
    """Factory of the ``openai-compatible`` rollout engine (context: model, seed)."""
    return OpenAICompatibleEngine(options, model=model, seed=seed)
