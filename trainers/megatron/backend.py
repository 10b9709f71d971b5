"""Trainer backend ``megatron``: Qwen2.5-VL / Qwen3-VL on megatron-core through Megatron-Bridge.

* Import: ``AutoBridge.from_hf_pretrained(dir).to_megatron_provider()`` builds the
  Megatron model and loads the Hugging Face weights (tensor parallel sharded).
* Vision tower and merger frozen (the provider's ``freeze_vision_model`` /
  ``freeze_vision_projection``), as in the paper's RL stage.
* Megatron DDP + distributed optimizer (``get_megatron_optimizer`` with
  ``use_distributed_optimizer``); ``calculate_per_token_loss`` so gradients are
  summed over data-parallel ranks: the loss is :func:`trainers.objective.grpo_token_loss`
  (the torch backend's) with the step's global token count as normalizer.
* Logprobs from vocabulary-parallel logits (:mod:`trainers.megatron.logprobs`),
  tempered and with the policy's suppressed ids removed, as the torch backend.
* Export: ``bridge.export_hf_weights`` (gathers TP shards) renamed to the
  transformers parameter names (:mod:`trainers.megatron.names`), language model
  only, in buckets.

Pipeline parallelism is not supported (PP=1): the micro-batch loop is this
module's own. Data-parallel ranks deal the step's micro-batches round-robin,
as the ``torch-fsdp`` backend. Start multi-GPU runs with torchrun (every rank
makes the same trainer calls: :mod:`trainers.fsdp_run`'s protocol) or as Ray
trainer workers.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.config import AlgorithmSection
from core.errors import CheckpointError, ScaleCUAError
from core.interfaces import PolicyModel, TrainerBackend
from core.types import Segment
from core.weight_sync import iter_buckets
from trainers.batching import micro_batch_tensors, plan_micro_batches, proximal_tensor
from trainers.objective import StepStats, check_objective, count_trainable_tokens, token_loss

log = structlog.get_logger(__name__)


class MegatronTrainerOptions(BaseModel):
    """Options of the ``megatron`` backend (optimizer defaults: the paper's Table 10)."""

    model_config = ConfigDict(extra="forbid")

    tensor_parallel_size: int = Field(1, ge=1, description="tensor-parallel GPUs (the paper: 4)")
    sequence_parallel: bool = Field(False, description="shard activations along the sequence (TP > 1)")
    distributed_optimizer: bool = Field(True, description="shard optimizer state over data-parallel ranks")
    dtype: Literal["bfloat16", "float32"] = Field("bfloat16", description="compute precision (fp32 master weights)")
    lr: float = Field(3e-6, gt=0, description="Adam learning rate")
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = Field(1e-8, gt=0)
    max_grad_norm: float = Field(1.0, gt=0, description="global gradient-norm clip")
    micro_batch_tokens: int = Field(16384, ge=1, description="padded tokens per micro-batch")
    max_micro_batch_items: int | None = Field(None, ge=1)


def import_megatron() -> tuple[Any, Any]:
    try:
        import megatron.core as mcore
    except ImportError as exc:
        raise ScaleCUAError(f"trainer 'megatron' needs megatron-core ({exc}): pip install 'scalecua[megatron]'") \
            from None
    try:
        from megatron.bridge import AutoBridge
    except ImportError as exc:
        raise ScaleCUAError(
            f"trainer 'megatron' needs Megatron-Bridge for Qwen-VL ({exc}): pip install 'scalecua[megatron]' on "
            "Python >= 3.12 with CUDA (Megatron-Bridge pins transformers and CUDA packages); or use trainer "
            "'torch' / 'torch-fsdp'"
        ) from None
    return mcore, AutoBridge


class MegatronTrainer(TrainerBackend):
    def __init__(self, options: MegatronTrainerOptions, *, model: PolicyModel, algorithm: AlgorithmSection,
                 seed: int = 0, objective: str = "grpo") -> None:
        import torch

        check_objective(objective)
        self.objective = objective

        if algorithm.entropy_coef != 0.0:
            raise ValueError("algorithm.entropy_coef must be 0 with the megatron trainer (sampled-token logprobs only)")
        _, AutoBridge = import_megatron()
        from megatron.core import parallel_state
        from megatron.core.distributed import DistributedDataParallelConfig
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        from trainers.megatron.names import expected_parameters

        if not torch.cuda.is_available():
            raise ScaleCUAError("trainer 'megatron' needs CUDA GPUs; on CPU use trainer 'torch' or 'torch-fsdp'")
        self.options, self.algorithm, self.policy = options, algorithm, model
        self.renderer = model.renderer()
        started = time.perf_counter()
        self.model_dir = model.model_directory(dtype="float32")
        self.bridge = AutoBridge.from_hf_pretrained(str(self.model_dir))
        provider = self.bridge.to_megatron_provider(load_weights=True)
        provider.tensor_model_parallel_size = options.tensor_parallel_size
        provider.pipeline_model_parallel_size = 1
        provider.sequence_parallel = options.sequence_parallel
        provider.freeze_vision_model = True
        provider.freeze_vision_projection = True
        provider.calculate_per_token_loss = True
        provider.bf16 = options.dtype == "bfloat16"
        provider.params_dtype = torch.float32
        provider.finalize()
        if not parallel_state.is_initialized():
            provider.initialize_model_parallel(seed=seed)
        ddp = DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=False,
                                            use_distributed_optimizer=options.distributed_optimizer,
                                            average_in_collective=False)
        self.model = provider.provide_distributed_model(ddp_config=ddp, wrap_with_ddp=True,
                                                        bf16=options.dtype == "bfloat16")
        self.reference = None
        if algorithm.kl_coef != 0.0 and objective == "grpo":
            self.reference = provider.provide_distributed_model(wrap_with_ddp=False, bf16=options.dtype == "bfloat16")
            for chunk in self.reference:
                chunk.eval().requires_grad_(False)
        self.optimizer = get_megatron_optimizer(OptimizerConfig(
            optimizer="adam", lr=options.lr, min_lr=options.lr, weight_decay=options.weight_decay,
            adam_beta1=options.betas[0], adam_beta2=options.betas[1], adam_eps=options.adam_eps,
            clip_grad=options.max_grad_norm, bf16=options.dtype == "bfloat16", params_dtype=torch.float32,
            use_distributed_optimizer=options.distributed_optimizer,
        ), self.model)
        self.tp_group = parallel_state.get_tensor_model_parallel_group()
        self.tp_rank = parallel_state.get_tensor_model_parallel_rank()
        self.dp_rank = parallel_state.get_data_parallel_rank()
        self.dp_size = parallel_state.get_data_parallel_world_size()
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.expected = expected_parameters(model)
        self.real_vocab = model.vocab_size()
        self.suppress_ids = model.suppressed_ids()
        self.vision_prefixes = tuple(model.vision_parameter_prefixes())
        self.trainable = [n for chunk in self.model for n, p in chunk.named_parameters() if p.requires_grad]
        self.steps = 0
        self._mask_cache: dict[tuple[int, int], Any] = {}
        log.info("megatron trainer ready", tp=options.tensor_parallel_size, dp=self.dp_size,
                 trainable_tensors=len(self.trainable), seconds=round(time.perf_counter() - started, 1))

    # -- forward ---------------------------------------------------------------------

    def _inputs(self, segments: Sequence[Segment]) -> tuple[dict[str, Any], Any, Any, Any]:
        return micro_batch_tensors(self.policy, segments, self.device)

    def _logprobs(self, chunk: Any, inputs: dict[str, Any], mask: Any) -> Any:
        import torch

        from trainers.megatron.logprobs import suppression_slice, vocab_parallel_logprobs

        kwargs = {k: inputs[k] for k in ("pixel_values", "image_grid_thw") if k in inputs}
        logits = chunk(input_ids=inputs["input_ids"], position_ids=None, attention_mask=None, **kwargs)
        # logits: [batch, seq, vocab / tp] (causal attention; right padding is never attended to by real tokens)
        ids = inputs["input_ids"]
        rows, cols = (mask[:, 1:] > 0).nonzero(as_tuple=True)
        local_vocab = logits.shape[-1]
        start = self.tp_rank * local_vocab
        key = (start, local_vocab)
        if key not in self._mask_cache:
            self._mask_cache[key] = suppression_slice(self.suppress_ids, start, local_vocab, self.real_vocab,
                                                      device=logits.device)
        values = vocab_parallel_logprobs(logits[:, :-1][rows, cols], ids[:, 1:][rows, cols],
                                         temperature=self.algorithm.temperature, vocab_start=start,
                                         suppressed=self._mask_cache[key], group=self.tp_group)
        out = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
        return out.index_put((rows, cols + 1), values)

    # -- TrainerBackend ----------------------------------------------------------------

    def train_step(self, segments: Sequence[Segment], kl_limit: float | None = None) -> dict[str, float]:
        import torch
        import torch.distributed as dist
        from megatron.core.distributed import finalize_model_grads

        if not segments:
            raise ValueError("train_step needs at least one segment")
        total = count_trainable_tokens(segments)
        if total == 0:
            return {"loss/tokens": 0.0, "batch/segments": float(len(segments))}
        started = time.perf_counter()
        batches = plan_micro_batches(segments, self.options.micro_batch_tokens,
                                     max_items=self.options.max_micro_batch_items)
        mine = batches[self.dp_rank::self.dp_size]
        rounds = -(-len(batches) // self.dp_size)
        stats = StepStats()
        tokens_processed = 0
        for chunk in self.model:
            chunk.train()
            chunk.zero_grad_buffer()
        self.optimizer.zero_grad()
        for i in range(rounds):
            idle = i >= len(mine)
            segs = [segments[0]] if idle else [segments[j] for j in mine[i].indices]
            inputs, mask, rollout, adv = self._inputs(segs)
            ref = None
            if self.reference is not None:
                with torch.no_grad():
                    ref = self._logprobs(self.reference[0], inputs, mask)
            logp = self._logprobs(self.model[0], inputs, mask)
            if idle:  # same collectives as the other ranks, no gradient
                loss = logp.sum() * 0.0
            else:
                loss = token_loss(self.objective, logp, rollout, adv, mask, algorithm=self.algorithm,
                                  normalizer=float(total), ref_logprobs=ref, stats=stats,
                                  proximal_logprobs=proximal_tensor(segs, rollout))
                tokens_processed += int(inputs["attention_mask"].sum())
            loss.backward()
        sums = torch.tensor([stats.tokens, stats.pg_loss, stats.kl, stats.approx_kl, stats.ratio, stats.clipped_high,
                             stats.clipped_low, stats.dual_clipped, float(tokens_processed), stats.nll,
                             stats.behaviour_weight, stats.behaviour_kl, stats.behaviour_capped],
                            dtype=torch.float64, device=self.device)
        if self.dp_size > 1:
            from megatron.core import parallel_state

            dist.all_reduce(sums, group=parallel_state.get_data_parallel_group())
        s = sums.tolist()
        merged = StepStats(tokens=s[0], pg_loss=s[1], kl=s[2], approx_kl=s[3], ratio=s[4], clipped_high=s[5],
                           clipped_low=s[6], dual_clipped=s[7], ratio_max=stats.ratio_max, ratio_min=stats.ratio_min,
                           nll=s[9], behaviour_weight=s[10], behaviour_kl=s[11], behaviour_capped=s[12])
        metrics = merged.summary()
        if kl_limit is not None and metrics["actor/approx_kl"] > kl_limit:  # every rank decides alike (summed)
            self.optimizer.zero_grad()
            return {**metrics, "actor/kl_stopped": 1.0, "batch/segments": float(len(segments)),
                    "time/step": time.perf_counter() - started}
        finalize_model_grads(self.model)
        update_ok, grad_norm, _ = self.optimizer.step()
        torch.cuda.synchronize()
        self.steps += 1
        metrics.update({
            "actor/kl_stopped": 0.0,
            "actor/grad_norm": float(grad_norm) if grad_norm is not None else float("nan"),
            "actor/update_ok": float(bool(update_ok)),
            "actor/lr": self.options.lr,
            "batch/segments": float(len(segments)),
            "batch/tokens": s[8],
            "batch/micro_batches": float(len(batches)),
            "time/step": time.perf_counter() - started,
        })
        return metrics

    def recompute_logprobs(self, segments: Sequence[Segment], *, reference: bool = False) -> list[list[float]]:
        """Per-token logprobs of each segment under the current weights (or the reference's), 0 where the mask is
        0: the proximal policy of ``algorithm.old_logprobs: recompute``. Every rank computes every segment, one at
        a time and in the same order, so the tensor-parallel collectives of the vocabulary line up; the chunks
        stay in the mode the training forward uses, so before any update these equal its logprobs."""
        import torch

        chunks = self.reference if reference else self.model
        if chunks is None:
            raise ValueError("no reference model: algorithm.kl_coef is 0")
        out: list[list[float]] = []
        with torch.no_grad():
            for segment in segments:
                inputs, mask, _, _ = self._inputs([segment])
                logp = self._logprobs(chunks[0], inputs, mask)
                out.append((logp[0] * mask[0]).tolist())
        return out

    def eval_step(self, segments: Sequence[Segment]) -> dict[str, float]:
        """Forward passes only (every data-parallel rank runs the same number), metrics summed over ranks."""
        import torch
        import torch.distributed as dist

        total = count_trainable_tokens(segments)
        if total == 0:
            return {"loss/tokens": 0.0}
        batches = plan_micro_batches(segments, self.options.micro_batch_tokens,
                                     max_items=self.options.max_micro_batch_items)
        mine = batches[self.dp_rank::self.dp_size]
        stats = StepStats()
        for chunk in self.model:
            chunk.eval()
        with torch.no_grad():
            for i in range(-(-len(batches) // self.dp_size)):
                idle = i >= len(mine)
                inputs, mask, rollout, adv = self._inputs([segments[0]] if idle else
                                                          [segments[j] for j in mine[i].indices])
                ref = self._logprobs(self.reference[0], inputs, mask) if self.reference is not None else None
                logp = self._logprobs(self.model[0], inputs, mask)
                if not idle:
                    token_loss(self.objective, logp, rollout, adv, mask, algorithm=self.algorithm,
                               normalizer=float(total), ref_logprobs=ref, stats=stats)
        for chunk in self.model:
            chunk.train()
        sums = torch.tensor([stats.tokens, stats.pg_loss, stats.kl, stats.nll], dtype=torch.float64,
                            device=self.device)
        if self.dp_size > 1:
            from megatron.core import parallel_state

            dist.all_reduce(sums, group=parallel_state.get_data_parallel_group())
        tokens, pg, kl, nll = sums.tolist()
        return StepStats(tokens=tokens, pg_loss=pg, kl=kl, nll=nll).summary()

    def export_weights(self, bucket_bytes: int = 256 << 20) -> Iterator[list[tuple[str, Any]]]:
        from trainers.megatron.names import language_model_weights

        stream = self.bridge.export_hf_weights(self.model, cpu=False, show_progress=False)
        return iter_buckets(language_model_weights(stream, self.expected, self.vision_prefixes), bucket_bytes)

    def save(self, path: Path) -> None:
        """Per-rank model and optimizer state (resume needs the same parallel layout)."""
        import torch
        import torch.distributed as dist

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        rank = dist.get_rank()
        torch.save({"model": [c.state_dict() for c in self.model], "optimizer": self.optimizer.state_dict()},
                   path / f"megatron-rank{rank:05d}.pt")
        if hasattr(self.optimizer, "save_parameter_state"):  # distributed optimizer: the sharded Adam state
            self.optimizer.save_parameter_state(str(path / "optimizer-parameter-state.pt"))
        if rank == 0:
            (path / "trainer.json").write_text(json.dumps({
                "steps": self.steps, "world_size": dist.get_world_size(),
                "options": self.options.model_dump(mode="json")}, indent=2) + "\n", encoding="utf-8")
        dist.barrier()

    def load(self, path: Path) -> None:
        import torch
        import torch.distributed as dist

        path = Path(path)
        meta_file, rank_file = path / "trainer.json", path / f"megatron-rank{dist.get_rank():05d}.pt"
        if not meta_file.is_file() or not rank_file.is_file():
            raise CheckpointError(f"megatron checkpoint {path} lacks trainer.json or {rank_file.name}")
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if meta.get("world_size") != dist.get_world_size():
            raise CheckpointError(f"megatron checkpoint {path} was written by {meta.get('world_size')} ranks; "
                                  f"this run has {dist.get_world_size()}")
        state = torch.load(rank_file, map_location=self.device, weights_only=False)
        for chunk, chunk_state in zip(self.model, state["model"]):
            chunk.load_state_dict(chunk_state)
        self.optimizer.load_state_dict(state["optimizer"])
        if hasattr(self.optimizer, "load_parameter_state") and (path / "optimizer-parameter-state.pt").is_file():
            self.optimizer.load_parameter_state(str(path / "optimizer-parameter-state.pt"))
        self.steps = int(meta["steps"])


    def load_weights(self, path: Path) -> None:
        """The model state of a checkpoint this backend saved (same parallel layout); optimizer stays fresh."""
        import torch
        import torch.distributed as dist

        rank_file = Path(path) / f"megatron-rank{dist.get_rank():05d}.pt"
        if not rank_file.is_file():
            raise CheckpointError(
                f"run.init_from: {Path(path)} has no {rank_file.name}: the megatron trainer starts from checkpoints "
                "it wrote itself (warm-start with trainer megatron too), or from a Hugging Face directory given as "
                "model.options.path")
        state = torch.load(rank_file, map_location=self.device, weights_only=False)
        for chunk, chunk_state in zip(self.model, state["model"]):
            chunk.load_state_dict(chunk_state)
        if self.reference is not None:  # not wrapped in DDP: the same names without DDP's "module." prefix
            for chunk, chunk_state in zip(self.reference, state["model"]):
                bare = {k.removeprefix("module."): v for k, v in chunk_state.items()}
                missing = chunk.load_state_dict(bare, strict=False).missing_keys
                if missing:
                    raise CheckpointError(f"run.init_from: {rank_file} lacks reference weights {missing[:5]}")


def create_megatron_trainer(options: MegatronTrainerOptions, *, model: PolicyModel, algorithm: AlgorithmSection,
                            seed: int = 0, objective: str = "grpo", **_: Any) -> MegatronTrainer:
    """Factory of the ``megatron`` trainer backend (context: model, algorithm, seed, objective)."""
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")  # Megatron's TP overlap expects it
    return MegatronTrainer(options, model=model, algorithm=algorithm, seed=seed, objective=objective)
