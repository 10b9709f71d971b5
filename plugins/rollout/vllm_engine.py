"""Rollout engine ``vllm``: vLLM's in-process async engine (``AsyncLLM``), tensor parallel, with weight updates.

Prompts go in as token ids (``TokensPrompt``), never as text, so the policy
generates from exactly the segmenter's stream. vLLM expands each image's
placeholder itself, so each run of ``<|image_pad|>`` is collapsed to ONE
(:meth:`ChatRenderer.collapse_image_pads`) and the screenshots travel as
``multi_modal_data``; the image processor bounds (``min_pixels``/``max_pixels``)
are handed to vLLM so it expands each image to as many tokens as our renderer.

Logprobs follow :mod:`trainers.policy`: ``logprobs=0`` returns the sampled
token's logprob, and the engine is started with
``logprobs_mode="processed_logprobs"`` so that logprob is under the tempered
distribution; suppressed (vision/special) ids get a ``logit_bias`` of -100
(vLLM's bound). Stopping is by our stop ids only (``ignore_eos``), as in the
``hf`` engine.

AsyncLLM runs on its own event loop in a background thread: the training loop
calls :meth:`VLLMRolloutEngine.update_weights` synchronously from inside its
own loop, which must not wait on itself. Weight updates use vLLM's weight
transfer API (``init_weight_transfer_engine`` once, then per weight-sync session
(:mod:`core.weight_sync`) ``start_weight_update`` at begin -> ``update_weights`` per bucket ->
``finish_weight_update`` at commit); new generations wait while a session is open.
Data plane (:mod:`plugins.rollout.vllm_weights`):
``ipc`` (colocated: CUDA IPC handles of tensors on the engine's GPUs) or
``nccl`` (disaggregated: this process broadcasts as rank 0 from its own GPU).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import uuid
from concurrent.futures import Future
from typing import Any, Awaitable, Iterable, Literal, Sequence, TypeVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.errors import ScaleCUAError
from core.interfaces import Generation, GenerationRequest, PolicyModel, RolloutEngine
from core.weight_sync import WeightSession, WeightSyncError
from plugins.serving.protocol import pad_runs

log = structlog.get_logger(__name__)
T = TypeVar("T")

#: vLLM clamps logit biases to this magnitude; e^-100 of residual mass is far below float32 resolution
SUPPRESS_BIAS = -100.0


class VLLMEngineOptions(BaseModel):
    """Options of the ``vllm`` rollout engine."""

    model_config = ConfigDict(extra="forbid")

    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per engine (the paper: 2)")
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = Field("bfloat16", description="weights and compute")
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1, description="share of each GPU vLLM may take "
                                                                         "(lower it when colocated with the trainer)")
    max_model_len: int | None = Field(None, ge=256, description="context limit (default: the model's)")
    max_num_seqs: int = Field(256, ge=1, description="sequences decoded together")
    max_images_per_prompt: int = Field(8, ge=1, description="vLLM's limit_mm_per_prompt for images")
    enable_prefix_caching: bool = Field(True, description="reuse KV of shared prompt prefixes (multi-turn episodes)")
    enforce_eager: bool = Field(False, description="disable CUDA graphs (faster start, slower decode)")
    weight_transfer: Literal["ipc", "nccl"] = Field(
        "ipc", description="ipc: trainer on the engine's GPUs (CUDA IPC); nccl: trainer on other GPUs (broadcast)"
    )
    nccl_master_address: str = Field("127.0.0.1", description="rendezvous address for the nccl weight transfer")
    transfer_dtype: Literal["same", "bfloat16", "float16", "float32"] = Field(
        "same", description="cast weights before transfer (same: the engine's dtype)"
    )
    extra_engine_args: dict[str, Any] = Field(default_factory=dict, description="more AsyncEngineArgs fields")


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ScaleCUAError(
            f"rollout engine 'vllm' needs vLLM ({exc}); install the gpu extra: pip install 'scalecua[gpu]' "
            "(CUDA machines only), or use rollout 'hf' (in-process) or 'openai-compatible' (a vllm serve elsewhere)"
        ) from None
    return vllm


# -- the request/response mapping (pure: unit-tested without vLLM) ----------------------------------


def build_prompt(renderer: Any, request: GenerationRequest) -> dict[str, Any]:
    """vLLM ``TokensPrompt`` fields: one placeholder per image, screenshots as PIL images."""
    runs = pad_runs(request.prompt_ids, renderer.image_pad_id)
    if len(runs) != len(request.images):
        raise ValueError(f"prompt holds {len(runs)} image placeholder runs but {len(request.images)} images; "
                         "each screenshot needs exactly one run of image pads")
    expected = [renderer.image_tokens(image) for image in request.images]
    if [length for _, length in runs] != expected:
        raise ValueError(f"image placeholder runs {[n for _, n in runs]} do not match the screenshots' visual token "
                         f"counts {expected}; render prompts with this model's image processor")
    prompt: dict[str, Any] = {"prompt_token_ids": renderer.collapse_image_pads(request.prompt_ids)}
    if request.images:
        prompt["multi_modal_data"] = {"image": [image.to_pil() for image in request.images]}
    return prompt


def sampling_kwargs(request: GenerationRequest, logit_bias: dict[int, float], seed: int) -> dict[str, Any]:
    """``SamplingParams`` fields of a request (sampled token's logprob, our stop ids only)."""
    if request.temperature <= 0:
        raise ValueError(f"temperature must be > 0 (sampling), got {request.temperature}")
    if not request.stop_ids:
        raise ValueError("generation request has no stop ids; the response could only end at max_new_tokens")
    if request.top_p < 1.0:
        raise ValueError(f"top_p {request.top_p} < 1 with the vllm engine: vLLM's processed logprobs are taken after "
                         "top-p truncation, which the trainer's policy does not include (trainers/policy.py), so every "
                         "importance ratio would be off; use top_p 1.0 (the paper's setting) or the hf engine")
    banned = set(request.stop_ids) & set(logit_bias)
    if banned:
        raise ValueError(f"stop ids {sorted(banned)} are suppressed tokens; the response could never stop")
    return {
        # vLLM decodes greedily at temperature 0 (its logprobs are then the raw logits' log-softmax)
        "n": 1, "temperature": 0.0 if request.greedy else request.temperature, "top_p": request.top_p, "top_k": 0,
        "max_tokens": request.max_new_tokens, "stop_token_ids": list(request.stop_ids), "ignore_eos": True,
        "seed": seed, "logprobs": 0, "logit_bias": dict(logit_bias) or None, "detokenize": False,
        "skip_special_tokens": False,
    }


def to_generation(output: Any, renderer: Any, stop_ids: Sequence[int]) -> Generation:
    """Our :class:`Generation` from a vLLM ``RequestOutput`` (its first ``CompletionOutput``)."""
    completion = output.outputs[0]
    ids = [int(t) for t in completion.token_ids]
    if completion.logprobs is None or len(completion.logprobs) != len(ids):
        raise RuntimeError(f"vLLM returned {0 if completion.logprobs is None else len(completion.logprobs)} "
                           f"logprob entries for {len(ids)} tokens; requests must ask for logprobs=0")
    logprobs = [float(entry[token].logprob) for entry, token in zip(completion.logprobs, ids)]
    finish = "stop" if ids and ids[-1] in stop_ids else "length"
    if completion.finish_reason not in ("stop", "length"):
        raise RuntimeError(f"vLLM finished a request with {completion.finish_reason!r} (aborted?)")
    text_ids = ids[:-1] if finish == "stop" else ids
    return Generation(ids=ids, logprobs=logprobs, text=renderer.decode(text_ids), finish_reason=finish)


# -- the engine -----------------------------------------------------------------------------------------


class VLLMRolloutEngine(RolloutEngine):
    def __init__(self, options: VLLMEngineOptions, *, model: PolicyModel, seed: int = 0) -> None:

        self.vllm = import_vllm()
        self.options = options
        self.renderer = model.renderer()
        self.vocab_size = model.vocab_size()
        suppressed = model.suppressed_ids()
        self.logit_bias = {int(i): SUPPRESS_BIAS for i in suppressed}
        self._seeds = itertools.count(seed * 1_000_003)
        if options.weight_transfer == "ipc":
            # IPC handles reach the engine core process pickled; vLLM refuses pickles unless this is set
            os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
        self.model_dir = model.model_directory(dtype="float32" if options.dtype == "auto" else options.dtype)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-engine-loop", daemon=True)
        self._thread.start()
        self.engine = self._call(self._start())
        from plugins.rollout.vllm_weights import make_transport

        self.transport = make_transport(options, self.engine_dtype)
        self._transport_ready = False
        self._session_lock: asyncio.Lock | None = None
        self._weights = WeightSession("vllm engine")
        log.info("vllm engine ready", model=str(self.model_dir), tp=options.tensor_parallel_size,
                 weight_transfer=options.weight_transfer)

    async def _start(self) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        o = self.options
        settings = self.renderer.image_processor.settings
        args = AsyncEngineArgs(
            model=str(self.model_dir), tokenizer=str(self.model_dir), dtype=o.dtype,
            tensor_parallel_size=o.tensor_parallel_size, gpu_memory_utilization=o.gpu_memory_utilization,
            max_model_len=o.max_model_len, max_num_seqs=o.max_num_seqs, enable_prefix_caching=o.enable_prefix_caching,
            enforce_eager=o.enforce_eager, logprobs_mode="processed_logprobs", seed=0,
            limit_mm_per_prompt={"image": o.max_images_per_prompt},
            mm_processor_kwargs={"min_pixels": settings.min_pixels, "max_pixels": settings.max_pixels},
            weight_transfer_config={"backend": o.weight_transfer},
            **o.extra_engine_args,
        )
        engine = AsyncLLM.from_engine_args(args)
        self.engine_dtype = str(engine.model_config.dtype).split(".")[-1]
        return engine

    def _call(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the engine's loop and wait for it (from any thread but the engine's)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def _submit(self, coro: Awaitable[T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    # -- generation -------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> Generation:
        if not request.prompt_ids:
            raise ValueError("generation request has no prompt ids")
        prompt = build_prompt(self.renderer, request)
        seed = request.seed if request.seed is not None else next(self._seeds)
        kwargs = sampling_kwargs(request, self.logit_bias, int(seed) % (2**63))
        return await asyncio.wrap_future(self._submit(self._generate(prompt, kwargs, request.stop_ids)))

    async def _generate(self, prompt: dict[str, Any], kwargs: dict[str, Any], stop_ids: Sequence[int]) -> Generation:
        await self._wait_for_weights()
        version = self._weights.version
        params = self.vllm.SamplingParams(**kwargs)
        final = None
        async for output in self.engine.generate(self.vllm.TokensPrompt(**prompt), params, uuid.uuid4().hex):
            final = output
        if final is None:
            raise RuntimeError("vLLM produced no output for a request")
        generation = to_generation(final, self.renderer, stop_ids)
        generation.weight_version = version
        return generation

    # -- weights ----------------------------------------------------------------

    def _lock(self) -> asyncio.Lock:
        if self._session_lock is None:
            self._session_lock = asyncio.Lock()
        return self._session_lock

    @property
    def weight_version(self) -> int | None:
        return self._weights.version

    async def _wait_for_weights(self) -> None:
        """Generation waits while a session is open (new requests see whole weights)."""
        async with self._lock():
            pass

    def begin_weight_update(self, version: int) -> None:
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest

        self._weights.begin(version)
        drives = self.transport.drives_round
        try:
            if not self._transport_ready:
                if drives:  # vLLM's trainer engine posts init_weight_transfer_engine itself
                    self.transport.connect(_EngineClient(self), self.options.tensor_parallel_size)
                else:
                    init = self.transport.init_info(self.options.tensor_parallel_size)
                    pending = self._submit(self.engine.init_weight_transfer_engine(
                        WeightTransferInitRequest(init_info=init)))
                    self.transport.join()
                    pending.result()
                self._transport_ready = True
            self._call(self._lock().acquire())
            try:
                if not drives:
                    self._call(self.engine.start_weight_update())  # names are checkpoint (HF) names
            except BaseException:
                self._loop.call_soon_threadsafe(self._lock().release)
                raise
        except BaseException:
            self._weights.abort()
            raise

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        from vllm.distributed.weight_transfer.base import WeightTransferUpdateRequest

        self._weights.bucket()
        bucket = list(weights)
        if not bucket:
            return
        if self.transport.drives_round:
            self.transport.collect(bucket)
            return
        prepared = self.transport.prepare(bucket)  # holds the tensors alive until the update returns
        pending = self._submit(self.engine.update_weights(WeightTransferUpdateRequest(update_info=prepared.info)))
        self.transport.send(prepared)
        pending.result()

    def commit_weight_update(self) -> None:
        self._weights.bucket()
        try:
            if self.transport.drives_round:
                self.transport.commit()  # start, update + broadcast, finish: driven by vLLM's trainer engine
            else:
                self._call(self.engine.finish_weight_update())
            # vLLM's finish_weight_update keeps the KV prefix cache: a later prompt sharing a prefix would reuse
            # KV the old weights computed. Drop it; requests still running are preempted and recompute theirs
            # under the new weights. (The encoder cache stays: the vision tower never changes during RL.)
            if not self._call(self.engine.reset_prefix_cache(reset_running_requests=True)):
                raise WeightSyncError("vllm engine: the prefix cache could not be reset after a weight update")
        except BaseException:
            self.abort_weight_update()
            raise
        self._weights.commit()
        self._loop.call_soon_threadsafe(self._lock().release)

    def abort_weight_update(self) -> None:
        if self._weights.pending is None:
            return
        self._weights.abort()
        self._transport_ready = False  # a failed transfer leaves the group out of step: rendezvous again
        self._loop.call_soon_threadsafe(self._lock().release)

    async def close(self) -> None:
        if self.engine is None:
            return
        try:
            self.abort_weight_update()
        finally:
            self.engine.shutdown()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self.engine = None


class _EngineClient:
    """vLLM's ``VLLMWeightSyncClient`` protocol on the in-process ``AsyncLLM`` (its calls run on the engine's loop)."""

    def __init__(self, engine: VLLMRolloutEngine) -> None:
        self._engine = engine

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest

        request = WeightTransferInitRequest(init_info=init_info)
        self._engine._call(self._engine.engine.init_weight_transfer_engine(request))

    def start_weight_update(self) -> None:
        self._engine._call(self._engine.engine.start_weight_update())

    def update_weights(self, update_info: dict[str, Any]) -> None:
        from vllm.distributed.weight_transfer.base import WeightTransferUpdateRequest

        self._engine._call(self._engine.engine.update_weights(WeightTransferUpdateRequest(update_info=update_info)))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._engine._call(self._engine.engine.finish_weight_update())


def create_vllm_engine(options: VLLMEngineOptions, *, model: PolicyModel, seed: int = 0, **_: Any) -> VLLMRolloutEngine:
    """Factory of the ``vllm`` rollout engine (context: model, seed). Imports vLLM only here."""
    return VLLMRolloutEngine(options, model=model, seed=seed)
