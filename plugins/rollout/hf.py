"""Rollout engine ``hf``: in-process sampling with the Hugging Face model the trainer trains.

Concurrent :meth:`HFRolloutEngine.generate` calls are gathered into batches and
run in a worker thread (the event loop keeps driving environments meanwhile):
one prefill over the right-padded prompts (images included), then a KV-cache
decode loop. Each request samples with its own seeded generator, so its output
does not depend on what it was batched with (up to float rounding).

Logprobs follow :mod:`trainers.policy`: the logprob of the sampled token under
``softmax(logits / temperature)`` with the suppressed ids (vision and other
special tokens, never the stop tokens) removed, which is exactly what the
``torch`` trainer recomputes, so the importance ratio starts at 1.
Weights arrive from the trainer in weight-sync sessions (:mod:`core.weight_sync`) and are copied in place,
no disk: a session holds the generation lock from begin to commit (an in-flight batch finishes first, new ones
wait), so no generation ever sees half-updated weights; an aborted session leaves the engine refusing to
generate until a later session commits.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import Generation, GenerationRequest, PolicyModel, RolloutEngine
from core.weight_sync import WeightSession, WeightSyncError

log = structlog.get_logger(__name__)


class HFEngineOptions(BaseModel):
    """Options of the ``hf`` rollout engine."""

    model_config = ConfigDict(extra="forbid")

    device: str = Field("auto", description="cpu, cuda, cuda:N, or auto (the first GPU if there is one)")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="weights and compute precision")
    max_batch_size: int = Field(8, ge=1, description="concurrent requests generated together")
    batch_wait_ms: float = Field(5.0, ge=0, description="how long a batch waits for more concurrent requests")


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future[Generation]
    seed: int


@dataclass
class _Row:
    """Decode state of one request in a batch."""

    request: GenerationRequest
    generator: Any
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    done: bool = False
    finish_reason: str = "length"


class HFRolloutEngine(RolloutEngine):
    def __init__(self, options: HFEngineOptions, *, model: PolicyModel, seed: int = 0) -> None:
        import torch

        self.options = options
        self.policy = model
        self.renderer = model.renderer()
        if options.device == "auto":
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            self.device = torch.device(options.device)
            if self.device.type == "cuda" and not torch.cuda.is_available():
                raise ValueError(f"rollout.options.device: {options.device!r} but no CUDA GPU is visible")
        self.model = model.load(dtype=options.dtype, device=str(self.device)).eval().requires_grad_(False)
        if not callable(getattr(getattr(self.model, "model", None), "get_rope_index", None)):
            raise TypeError(f"the hf engine samples Hugging Face vision-language models with multimodal rotary "
                            f"positions (the Qwen2-VL family's get_rope_index); {type(self.model).__name__} of "
                            f"model family {type(model).__name__} has none: use the vllm or openai-compatible engine")
        self._params = dict(self.model.named_parameters())
        self.suppress_ids = model.suppressed_ids()
        from trainers.policy import suppression_mask

        self._suppressed = suppression_mask(self.model.get_output_embeddings().weight.shape[0], self.suppress_ids,
                                            device=self.device)
        self._cache_kw = "cache" if "cache" in inspect.signature(self.model.model.forward).parameters else "past_key_values"
        self._lock = threading.Lock()
        self._seeds = itertools.count(seed * 1_000_003)
        self._pending: list[_Pending] = []
        self._worker: asyncio.Task[None] | None = None
        self._weights = WeightSession("hf engine")
        self._partial = False  # an aborted session copied some buckets in
        self.stats = {"batches": 0, "requests": 0, "max_batch": 0}

    # -- RolloutEngine --------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> Generation:
        self._validate(request)
        loop = asyncio.get_running_loop()
        seed = request.seed if request.seed is not None else next(self._seeds)
        pending = _Pending(request, loop.create_future(), seed)
        self._pending.append(pending)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await pending.future

    @property
    def weight_version(self) -> int | None:
        return self._weights.version

    def begin_weight_update(self, version: int) -> None:
        self._weights.begin(version)
        self._lock.acquire()  # generation pauses until commit or abort

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        import torch

        self._weights.bucket()
        self._partial = True
        with torch.no_grad():
            for name, tensor in weights:
                param = self._params.get(name)
                if param is None:
                    raise KeyError(f"hf engine: the trainer sent weight {name!r}, which this model does not have; "
                                   "trainer and engine must use the same model config")
                if tuple(param.shape) != tuple(tensor.shape):
                    raise ValueError(f"hf engine: weight {name!r} has shape {tuple(tensor.shape)}, expected "
                                     f"{tuple(param.shape)}")
                param.copy_(tensor.to(device=param.device, dtype=param.dtype))

    def commit_weight_update(self) -> None:
        self._weights.commit()
        self._partial = False
        self._lock.release()

    def abort_weight_update(self) -> None:
        if self._weights.pending is None:
            return
        self._weights.abort()
        self._lock.release()

    async def close(self) -> None:
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)
        self._params.clear()
        self.model = None

    # -- batching -------------------------------------------------------------

    def _validate(self, request: GenerationRequest) -> None:
        if not request.prompt_ids:
            raise ValueError("generation request has no prompt ids")
        if request.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {request.max_new_tokens}")
        if request.temperature <= 0:
            raise ValueError(f"temperature must be > 0 (sampling), got {request.temperature}")
        if not 0 < request.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {request.top_p}")
        banned = set(request.stop_ids) & set(self.suppress_ids)
        if banned:
            raise ValueError(f"stop ids {sorted(banned)} are suppressed tokens; the response could never stop")

    async def _drain(self) -> None:
        while self._pending:
            if self.options.batch_wait_ms > 0 and len(self._pending) < self.options.max_batch_size:
                await asyncio.sleep(self.options.batch_wait_ms / 1000)
            batch = self._pending[: self.options.max_batch_size]
            del self._pending[: len(batch)]
            try:
                results = await asyncio.to_thread(self._generate_locked, [p.request for p in batch],
                                                  [p.seed for p in batch])
            except Exception as exc:  # every waiter learns what went wrong
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(exc)
                continue
            for p, result in zip(batch, results):
                if not p.future.done():
                    p.future.set_result(result)

    def _generate_locked(self, requests: Sequence[GenerationRequest], seeds: Sequence[int]) -> list[Generation]:
        with self._lock:
            if self.model is None:
                raise RuntimeError("hf engine is closed")
            if self._partial:
                raise WeightSyncError("hf engine: a weight-sync session was aborted after copying some weights in; "
                                      "sync the weights again (a new session) before generating")
            version = self._weights.version
            results = self.generate_batch(requests, seeds)
        for result in results:
            result.weight_version = version
        return results

    # -- the sampling loop ----------------------------------------------------

    def generate_batch(self, requests: Sequence[GenerationRequest], seeds: Sequence[int]) -> list[Generation]:
        """Sample every request of a batch (synchronous; callers hold the engine lock)."""
        import torch

        from trainers.policy import policy_logits

        started = time.perf_counter()
        rows = []
        for req, seed in zip(requests, seeds):
            gen = torch.Generator(device=self.device)
            gen.manual_seed(int(seed) % (2**63))
            rows.append(_Row(req, gen))
        with torch.no_grad():
            inputs = self.policy.model_inputs([r.prompt_ids for r in requests], [list(r.images) for r in requests],
                                              device=self.device)
            attention = inputs["attention_mask"]
            body = self.model.model
            rope_kwargs = {k: inputs[k] for k in ("image_grid_thw",) if k in inputs}
            position_ids, _ = body.get_rope_index(inputs["input_ids"], inputs["mm_token_type_ids"],
                                                  attention_mask=attention, **rope_kwargs)
            lengths = attention.sum(dim=1)
            # next text position of each row: one past the largest position its prompt used
            next_pos = torch.stack([position_ids[:, b, : int(n)].max() + 1 for b, n in enumerate(lengths)])
            out = body(**inputs, position_ids=position_ids, use_cache=True)
            cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
            last = out.last_hidden_state[torch.arange(len(rows)), lengths - 1]  # [B, H]
            lm_head = self.model.get_output_embeddings()
            temps = torch.tensor([r.temperature for r in requests], device=self.device)[:, None]
            max_steps = max(r.max_new_tokens for r in requests)
            for step in range(max_steps):
                logits = policy_logits(lm_head(last), temperature=1.0, suppressed=self._suppressed) / temps
                logp = torch.log_softmax(logits, dim=-1)
                active = [not r.done for r in rows]
                tokens = []
                for b, row in enumerate(rows):
                    if not active[b]:
                        tokens.append(self.renderer.pad_token_id)
                        continue
                    token = self._sample(logp[b], row)
                    row.ids.append(token)
                    row.logprobs.append(float(logp[b, token]))
                    if token in row.request.stop_ids:
                        row.done, row.finish_reason = True, "stop"
                    elif len(row.ids) >= row.request.max_new_tokens:
                        row.done = True
                    tokens.append(token)
                if all(r.done for r in rows):
                    break
                new_ids = torch.tensor(tokens, device=self.device)[:, None]
                # rows that had already finished feed a pad nobody attends to
                column = torch.tensor(active, dtype=attention.dtype, device=self.device)[:, None]
                attention = torch.cat([attention, column], dim=1)
                pos = (next_pos + step).view(1, -1, 1).expand(3, -1, 1)
                out = body(input_ids=new_ids, attention_mask=attention, position_ids=pos, use_cache=True,
                           **{self._cache_kw: cache})
                cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
                last = out.last_hidden_state[:, -1]
        results = []
        for row in rows:
            text_ids = row.ids[:-1] if row.finish_reason == "stop" else row.ids
            results.append(Generation(ids=row.ids, logprobs=row.logprobs, text=self.renderer.decode(text_ids),
                                      finish_reason=row.finish_reason))
        self.stats["batches"] += 1
        self.stats["requests"] += len(rows)
        self.stats["max_batch"] = max(self.stats["max_batch"], len(rows))
        log.debug("generated batch", requests=len(rows), tokens=sum(len(r.ids) for r in rows),
                  seconds=round(time.perf_counter() - started, 3))
        return results

    @staticmethod
    def _sample(logp: Any, row: _Row) -> int:
        import torch

        if row.request.greedy:
            return int(torch.argmax(logp))
        probs = logp.exp()
        top_p = row.request.top_p
        if top_p < 1.0:
            # nucleus truncation only shapes the draw; the reported logprob stays the untruncated one
            sorted_p, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
            truncated = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
            probs = truncated / truncated.sum()
        return int(torch.multinomial(probs, 1, generator=row.generator))


def create_hf_engine(options: HFEngineOptions, *, model: PolicyModel, seed: int = 0, **_: Any) -> HFRolloutEngine:
    """Factory of the ``hf`` rollout engine (context: model, seed)."""
    return HFRolloutEngine(options, model=model, seed=seed)
