"""AsyncLLM stand-in: placeholders re-expanded as vLLM's processor does, sampling on its own as vLLM's v1 sampler
documents it (see :class:`AsyncLLM`)."""

from __future__ import annotations

import asyncio
import base64
import pickle
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, AsyncIterator

import torch

from core.interfaces import GenerationRequest
from core.types import Screenshot


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None


@dataclass
class RequestOutput:
    request_id: str
    outputs: list[CompletionOutput]
    finished: bool


class AsyncLLM:
    """Samples on its own, as vLLM documents its v1 sampler: the model's next-token logits (its own forward pass
    through the tiny model loaded from ``args.model``), plus ``logit_bias`` (clamped to [-100, 100]), divided by
    the temperature, then top-k and top-p truncation, then a draw from a generator seeded by the request's
    ``seed``. The reported logprob of the sampled token follows ``args.logprobs_mode``: ``processed_logprobs``
    after every step above (truncation included), ``raw_logprobs`` from the model's logits alone. Nothing here
    calls the project's hf engine, so the engine under test can disagree with the trainer. With
    ``enable_prefix_caching`` it reuses the output it computed for a prefix, as vLLM reuses KV blocks, across
    weight updates too, until ``reset_prefix_cache``."""

    instances: list["AsyncLLM"] = []

    def __init__(self, args: Any) -> None:
        from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

        mm = args.mm_processor_kwargs or {}
        if args.logprobs_mode not in ("processed_logprobs", "raw_logprobs"):
            raise ValueError(f"logprobs_mode {args.logprobs_mode!r} is not one this stand-in reports")
        self.args = args
        self.policy = QwenVLModel(QwenVLOptions(path=args.model, min_pixels=mm.get("min_pixels"),
                                                max_pixels=mm.get("max_pixels")))
        self.module = self.policy.load(dtype="float32")
        self.staged: dict[str, torch.Tensor] | None = None
        self.weight_version = 0
        self.model_config = SimpleNamespace(dtype=torch.float32)
        self.calls: list[str] = []
        self.loop = None
        #: prefix caching as vLLM does it: the model's output at every prefix computed so far is reused, whatever
        #: weights computed it, until reset_prefix_cache (key: the token ids and the images' digests)
        self.prefix_cache: dict[tuple, torch.Tensor] | None = {} if args.enable_prefix_caching else None
        AsyncLLM.instances.append(self)

    @classmethod
    def from_engine_args(cls, args: Any) -> "AsyncLLM":
        assert asyncio.get_running_loop() is not None  # vLLM binds its output handler to the creating loop
        return cls(args)

    async def generate(self, prompt: dict[str, Any], params: Any, request_id: str) -> AsyncIterator[RequestOutput]:
        self.loop = asyncio.get_running_loop()
        if params.logprobs is None:
            raise AssertionError("no logprobs requested: vLLM would return none")
        renderer = self.policy.renderer()
        images = [_png(im) for im in (prompt.get("multi_modal_data") or {}).get("image", [])]
        ids: list[int] = []
        pads = iter(images)
        for token in prompt["prompt_token_ids"]:  # vLLM: one placeholder per image, expanded by its processor
            ids.extend([token] * renderer.image_tokens(next(pads)) if token == renderer.image_pad_id else [token])
        self.calls.append("generate")
        sampled, logprobs, finish = await asyncio.to_thread(self._sample, ids, images, params)
        entries = [{t: Logprob(lp)} for t, lp in zip(sampled, logprobs)]
        yield RequestOutput(request_id, [CompletionOutput(0, sampled, entries, finish)], True)

    @torch.no_grad()
    def _sample(self, prompt: list[int], images: list[Screenshot], params: Any) -> tuple[list[int], list[float], str]:
        generator = torch.Generator().manual_seed(params.seed if params.seed is not None else 0)
        ids, out, logprobs = list(prompt), [], []
        stops = set(params.stop_token_ids or [])
        digests = tuple(image.digest for image in images)
        for _ in range(params.max_tokens):
            key = (tuple(ids), digests)
            raw = self.prefix_cache.get(key) if self.prefix_cache is not None else None
            if raw is None:
                inputs = self.policy.model_inputs([ids], [images])
                raw = self.module(**inputs).logits[0, -1].float()
                if self.prefix_cache is not None:
                    self.prefix_cache[key] = raw
            logits = raw.clone()
            for token, bias in (params.logit_bias or {}).items():
                logits[int(token)] += max(-100.0, min(100.0, float(bias)))
            logits = logits / params.temperature
            if params.top_k and params.top_k > 0:
                kth = torch.topk(logits, params.top_k).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            if params.top_p < 1.0:
                ordered, order = torch.sort(logits, descending=True)
                cumulative = torch.softmax(ordered, -1).cumsum(-1)
                drop = cumulative - torch.softmax(ordered, -1) > params.top_p  # keep the token that crosses p
                logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
            processed = torch.log_softmax(logits, -1)
            token = int(torch.multinomial(processed.exp(), 1, generator=generator))
            reported = processed if self.args.logprobs_mode == "processed_logprobs" else torch.log_softmax(raw, -1)
            out.append(token)
            logprobs.append(float(reported[token]))
            ids.append(token)
            if token in stops:
                return out, logprobs, "stop"
        return out, logprobs, "length"

    async def init_weight_transfer_engine(self, request: Any) -> None:
        self.calls.append("init")

    async def start_weight_update(self) -> None:  # vLLM 0.33: no arguments (checkpoint names)
        self.staged = {}
        self.calls.append("start")

    async def update_weights(self, request: Any) -> None:
        if self.staged is None:
            raise RuntimeError("update_weights outside start_weight_update / finish_weight_update")
        info = request.update_info
        handles = pickle.loads(base64.b64decode(info["ipc_handles_pickled"]))
        params = dict(self.module.named_parameters())
        for name, (func, args) in zip(info["names"], handles):
            if name not in params:
                raise KeyError(f"no parameter {name!r} in the served model")
            self.staged[name] = func(*args)
        self.calls.append("update")

    async def finish_weight_update(self) -> None:
        params = dict(self.module.named_parameters())
        with torch.no_grad():
            for name, tensor in (self.staged or {}).items():
                params[name].copy_(tensor)
        self.staged = None
        self.weight_version += 1
        self.calls.append("finish")

    async def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        self.calls.append("reset_prefix_cache")
        return True

    def shutdown(self) -> None:
        self.calls.append("shutdown")


def rebuild(tensor: Any) -> Any:
    """(func, args) "handle" of the CPU test transport: the tensor itself travels in the pickle."""
    return tensor


def _png(image: Any) -> Screenshot:
    import io

    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return Screenshot.from_png(buffer.getvalue())
