"""AsyncLLM test double: placeholders re-expanded as vLLM's processor does, sampling by the real hf engine."""

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
    instances: list["AsyncLLM"] = []

    def __init__(self, args: Any) -> None:
        from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions
        from plugins.rollout.hf import HFEngineOptions, HFRolloutEngine

        mm = args.mm_processor_kwargs or {}
        self.args = args
        self.policy = QwenVLModel(QwenVLOptions(path=args.model, min_pixels=mm.get("min_pixels"),
                                                max_pixels=mm.get("max_pixels")))
        self.hf = HFRolloutEngine(HFEngineOptions(device="cpu"), model=self.policy)
        self.model_config = SimpleNamespace(dtype=torch.float32)
        self.calls: list[str] = []
        self.loop = None
        AsyncLLM.instances.append(self)

    @classmethod
    def from_engine_args(cls, args: Any) -> "AsyncLLM":
        assert asyncio.get_running_loop() is not None  # vLLM binds its output handler to the creating loop
        return cls(args)

    async def generate(self, prompt: dict[str, Any], params: Any, request_id: str) -> AsyncIterator[RequestOutput]:
        self.loop = asyncio.get_running_loop()
        if params.logprobs != 0 or not params.ignore_eos or self.args.logprobs_mode != "processed_logprobs":
            raise AssertionError("the engine must ask for the sampled logprob under the processed distribution")
        renderer = self.policy.renderer()
        images = [_png(im) for im in (prompt.get("multi_modal_data") or {}).get("image", [])]
        ids: list[int] = []
        pads = iter(images)
        for token in prompt["prompt_token_ids"]:  # vLLM: one placeholder per image, expanded here
            ids.extend([token] * renderer.image_tokens(next(pads)) if token == renderer.image_pad_id else [token])
        request = GenerationRequest(ids, images, params.max_tokens, temperature=params.temperature,
                                    top_p=params.top_p, stop_ids=tuple(params.stop_token_ids), seed=params.seed)
        self.calls.append("generate")
        (generation,) = await asyncio.to_thread(self.hf.generate_batch, [request], [params.seed])
        entries = [{t: Logprob(lp)} for t, lp in zip(generation.ids, generation.logprobs)]
        yield RequestOutput(request_id, [CompletionOutput(0, generation.ids, entries, generation.finish_reason)], True)

    async def init_weight_transfer_engine(self, request: Any) -> None:
        self.calls.append("init")

    async def start_weight_update(self) -> None:  # vLLM 0.33: no arguments (checkpoint names)
        self.hf.begin_weight_update((self.hf.weight_version or 0) + 1)  # the stand-in's own model
        self.calls.append("start")

    async def update_weights(self, request: Any) -> None:
        info = request.update_info
        handles = pickle.loads(base64.b64decode(info["ipc_handles_pickled"]))
        tensors = [(name, func(*args)) for name, (func, args) in zip(info["names"], handles)]
        self.hf.update_weights(tensors)
        self.calls.append("update")

    async def finish_weight_update(self) -> None:
        self.hf.commit_weight_update()
        self.calls.append("finish")

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
