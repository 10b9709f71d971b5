"""Trainer backend ``torch``: GRPO on a Hugging Face Qwen-VL model in one process (CPU or one GPU).

One :meth:`TorchTrainer.train_step` is one optimizer step over all segments of an
iteration: segments are packed into micro-batches under a padded-token budget,
each micro-batch runs the frozen reference model (KL term) and the actor
forward/backward, gradients accumulate, then AdamW steps once. The loss is a
token mean over the whole step (:func:`trainers.objective.grpo_token_loss`), so the
micro-batch split does not change the update.

Only language-model parameters train; the vision tower is frozen, as in the
paper's RL stage. Logprobs follow the convention of :mod:`trainers.policy`
(temperature-scaled, suppressed ids removed), which the ``hf`` rollout engine
shares, so the importance ratio is 1 at equal weights.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import structlog
import torch

from core.config import AlgorithmSection
from core.interfaces import PolicyModel, TrainerBackend
from core.types import Segment
from core.weight_sync import iter_buckets
from trainers import torch_checkpoint
from trainers.batching import (MicroBatch, micro_batch_tensors, plan_micro_batches, plan_packed_micro_batches,
                               proximal_tensor)
from trainers.objective import StepStats, check_objective, count_trainable_tokens, token_loss
from trainers.options import TorchTrainerOptions, learning_rate
from trainers.vision_cache import StepVisionCache
from trainers.weights import freeze_vision_tower

log = structlog.get_logger(__name__)


def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"trainer.options.device: {name!r} was asked for but no CUDA GPU is visible; use cpu or auto")
    return device


class TorchTrainer(TrainerBackend):
    """GRPO/DAPO actor (+ frozen reference) on one device."""

    def __init__(self, options: TorchTrainerOptions, *, model: PolicyModel, algorithm: AlgorithmSection,
                 seed: int = 0, objective: str = "grpo") -> None:
        check_objective(objective)
        self.objective = objective
        if algorithm.entropy_coef != 0.0:
            raise ValueError(
                f"algorithm.entropy_coef: {algorithm.entropy_coef} is not supported by the torch trainer, which "
                "computes logprobs of the sampled tokens only; use 0 (the paper's value)"
            )
        self.options = options
        self.algorithm = algorithm
        self.seed = seed
        missing = [m for m in ("model_inputs", "token_logprobs")
                   if getattr(type(model), m) is getattr(PolicyModel, m)]
        if missing:
            raise TypeError(f"the torch trainer needs a model family that implements PolicyModel."
                            f"{' and PolicyModel.'.join(missing)}; {type(model).__name__} does not")
        can_pack = type(model).packed_model_inputs is not PolicyModel.packed_model_inputs
        if options.packing == "on" and not can_pack:
            raise TypeError(f"packing: on needs a model family that implements PolicyModel.packed_model_inputs; "
                            f"{type(model).__name__} does not (set packing: auto or off)")
        self.packing = can_pack and options.packing != "off"
        self.policy = model
        self.renderer = model.renderer()
        self.device = _resolve_device(options.device)
        self.autocast_dtype = torch.bfloat16 if options.dtype == "bfloat16" else None
        started = time.perf_counter()
        # AdamW keeps fp32 master weights; bf16 only enters through autocast.
        self.model = model.load(dtype="float32", device=str(self.device))
        self.model.train()
        if options.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.vision_prefixes = tuple(model.vision_parameter_prefixes())
        trainable = freeze_vision_tower(self.model, self.vision_prefixes)
        self.trainable_names = [name for name, _ in trainable]
        self.optimizer = torch.optim.AdamW(
            [p for _, p in trainable],
            lr=options.lr,
            betas=options.betas,
            eps=options.adam_eps,
            weight_decay=options.weight_decay,
        )
        self.reference: torch.nn.Module | None = None
        if algorithm.kl_coef != 0.0 and objective == "grpo":
            # The reference is the initial policy; it is rebuilt (never checkpointed) on resume.
            self._copy_reference()
        self.suppress_ids = model.suppressed_ids()
        self._suppressed_set = frozenset(self.suppress_ids)
        self._accepts_encoder_outputs = "mm_encoder_outputs" in inspect.signature(self.model.model.forward).parameters
        self._cache: StepVisionCache | None = None
        self.steps = 0
        log.info("torch trainer ready", device=str(self.device), dtype=options.dtype,
                 trainable_params=sum(p.numel() for _, p in trainable),
                 frozen_params=sum(p.numel() for p in self.model.parameters() if not p.requires_grad),
                 reference=self.reference is not None, seconds=round(time.perf_counter() - started, 2))

    # -- helpers --------------------------------------------------------------

    def _copy_reference(self) -> None:
        self.reference = copy.deepcopy(self.model)
        if self.autocast_dtype is not None:
            self.reference.to(self.autocast_dtype)
        self.reference.eval().requires_grad_(False)

    def _learning_rate(self) -> float:
        """The AdamW rate of the next step (:func:`trainers.options.learning_rate`)."""
        return learning_rate(self.options, self.steps)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def _inputs(self, segments: Sequence[Segment]) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor, torch.Tensor]:
        return micro_batch_tensors(self.policy, segments, self.device, packed=self.packing)

    def _plan(self, segments: Sequence[Segment]) -> list[MicroBatch]:
        if self.packing:
            return plan_packed_micro_batches(segments, self.options.micro_batch_tokens,
                                             max_items=self.options.max_micro_batch_items)
        return plan_micro_batches(segments, self.options.micro_batch_tokens,
                                  max_items=self.options.max_micro_batch_items, max_padding=self.options.max_padding)

    def _logprobs(self, module: torch.nn.Module, inputs: dict[str, Any], mask: torch.Tensor, *,
                  with_entropy: bool = False) -> Any:
        return self.policy.token_logprobs(
            module,
            inputs,
            temperature=self.algorithm.temperature,
            suppress_ids=self.suppress_ids,
            positions=mask > 0,
            chunk_size=self.options.logprob_chunk_size,
            with_entropy=with_entropy,
        )

    def _check(self, segments: Sequence[Segment]) -> None:
        for seg in segments:
            for token, m in zip(seg.input_ids, seg.loss_mask):
                if m and token in self._suppressed_set:
                    raise ValueError(
                        f"segment {seg.trajectory_id}#{seg.index} trains on token id {token}, which the policy "
                        "suppresses (vision/special token); the rollout engine must suppress the same ids"
                    )

    # -- TrainerBackend -------------------------------------------------------

    def train_step(self, segments: Sequence[Segment], kl_limit: float | None = None) -> dict[str, float]:
        if not segments:
            raise ValueError("train_step needs at least one segment")
        self._check(segments)
        total = count_trainable_tokens(segments)
        if total == 0:
            log.warning("no trainable tokens in this step; skipping the optimizer step", segments=len(segments))
            return {"loss/tokens": 0.0, "batch/segments": float(len(segments))}
        started = time.perf_counter()
        batches = self._plan(segments)
        times = {"inputs": 0.0, "vision": 0.0, "reference": 0.0, "actor": 0.0}
        stats = StepStats()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with self._vision_features(segments, times) as cache:
            self._accumulate(segments, batches, total, stats, times)
        summary = self._reduce(stats).summary()
        if kl_limit is not None and summary["actor/approx_kl"] > kl_limit:
            self.optimizer.zero_grad(set_to_none=True)  # the KL stop: this batch has moved the policy enough
            log.info("kl stop: step skipped", approx_kl=round(summary["actor/approx_kl"], 5), limit=kl_limit)
            return {**summary, "actor/kl_stopped": 1.0, "batch/segments": float(len(segments)),
                    "time/step": time.perf_counter() - started}
        t0 = time.perf_counter()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if self.options.max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(params, self.options.max_grad_norm)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        grad_norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # DTensor under FSDP
        for group in self.optimizer.param_groups:
            group["lr"] = self._learning_rate()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._sync()
        times["optimizer"] = time.perf_counter() - t0
        self.steps += 1
        metrics = summary
        metrics.update({
            "actor/kl_stopped": 0.0,
            "actor/grad_norm": grad_norm,
            "actor/lr": self.optimizer.param_groups[0]["lr"],
            "batch/segments": float(len(segments)),
            "batch/tokens": float(sum(s.num_tokens for s in segments)),
            "batch/images": float(sum(len(s.images) for s in segments)),
            "batch/micro_batches": float(len(batches)),
            "batch/padded_tokens": float(sum(b.padded_tokens for b in batches)),
            "time/inputs": times["inputs"],
            "time/vision_encoder": times["vision"],
            "time/reference_logprobs": times["reference"],
            "time/actor_update": times["actor"] + times["optimizer"],
            "time/step": time.perf_counter() - started,
        })
        if cache is not None:
            metrics.update(cache.stats.metrics())
        return metrics

    def _accumulate(self, segments: Sequence[Segment], batches: list[MicroBatch], total: int, stats: StepStats,
                    times: dict[str, float]) -> None:
        """Forward and backward over the step's micro-batches, gradients summed (data-parallel backends deal
        them over ranks)."""
        for batch in batches:
            self._micro_step([segments[i] for i in batch.indices], total, stats, times)

    def _reduce(self, stats: StepStats) -> StepStats:
        """The step's statistics over all workers (one process: as they are)."""
        return stats

    def _micro_step(self, segs: list[Segment], total: int, stats: StepStats, times: dict[str, float]) -> None:
        t0 = time.perf_counter()
        inputs, mask, rollout, adv = self._inputs(segs)
        t1 = time.perf_counter()
        inputs = self._encode_images(inputs, segs)
        t2 = time.perf_counter()
        ref = None
        if self.reference is not None:
            with torch.no_grad(), self._autocast():
                ref = self._logprobs(self.reference, inputs, mask)
            self._sync()
        t3 = time.perf_counter()
        with self._autocast():
            logp, entropy = self._logprobs(self.model, inputs, mask, with_entropy=True)
        loss = token_loss(self.objective, logp, rollout, adv, mask, algorithm=self.algorithm,
                          normalizer=float(total), ref_logprobs=ref, entropy=entropy, stats=stats,
                          proximal_logprobs=proximal_tensor(segs, rollout, packed=self.packing))
        loss.backward()
        self._sync()
        t4 = time.perf_counter()
        times["inputs"] += t1 - t0
        if "mm_encoder_outputs" in inputs:
            times["vision"] += t2 - t1
        if ref is not None:
            times["reference"] += t3 - t2
        times["actor"] += t4 - t3

    @torch.no_grad()
    def eval_step(self, segments: Sequence[Segment]) -> dict[str, float]:
        if not segments:
            raise ValueError("eval_step needs at least one segment")
        total = count_trainable_tokens(segments)
        if total == 0:
            return {"loss/tokens": 0.0}
        batches = self._plan(segments)
        stats = StepStats()
        self.model.eval()
        try:
            with self._vision_features(segments):
                self._evaluate(segments, batches, total, stats)
        finally:
            self.model.train()
        return self._reduce(stats).summary()

    def _evaluate(self, segments: Sequence[Segment], batches: list[MicroBatch], total: int, stats: StepStats) -> None:
        for batch in batches:
            self._eval_micro_step([segments[i] for i in batch.indices], total, stats)

    def _eval_micro_step(self, segs: list[Segment], total: float, stats: StepStats) -> None:
        inputs, mask, rollout, adv = self._inputs(segs)
        inputs = self._encode_images(inputs, segs)
        ref = None
        with self._autocast():
            if self.reference is not None:
                ref = self._logprobs(self.reference, inputs, mask)
            logp, entropy = self._logprobs(self.model, inputs, mask, with_entropy=True)
        token_loss(self.objective, logp, rollout, adv, mask, algorithm=self.algorithm, normalizer=float(total),
                   ref_logprobs=ref, entropy=entropy, stats=stats,
                   proximal_logprobs=proximal_tensor(segs, rollout, packed=self.packing))

    @contextlib.contextmanager
    def _vision_features(self, segments: Sequence[Segment],
                         times: dict[str, float] | None = None) -> Iterator[StepVisionCache | None]:
        """The step's vision-feature cache (:mod:`trainers.vision_cache`), filled up front, dropped after."""
        budget = int(self.options.vision_cache_mib * 2**20)
        if not (self._accepts_encoder_outputs and budget and any(s.images for s in segments)):
            yield None
            return
        t0 = time.perf_counter()
        self._cache = StepVisionCache(self._encode_screenshots, self.renderer.image_tokens, budget)
        try:
            self._cache.fill(segments)
            self._sync()
            if times is not None:
                times["vision"] += time.perf_counter() - t0
            yield self._cache
        finally:
            self._cache = None

    def _encode_screenshots(self, images: Sequence[Any]) -> Any:
        # the family's own inputs for one row of placeholder runs (a stop id between them keeps them apart):
        # pixels and grids through the model contract, never through a family's image processor
        row: list[int] = []
        for image in images:
            row += [self.renderer.stop_ids[0]] + [self.renderer.image_pad_id] * self.renderer.image_tokens(image)
        inputs = self.policy.model_inputs([row], [list(images)], device=self.device)
        with torch.no_grad(), self._autocast():
            return self.model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"],
                                                       return_dict=True)

    def _encode_images(self, inputs: dict[str, Any], segments: Sequence[Segment]) -> dict[str, Any]:
        """The frozen vision tower's features for one micro-batch, handed to reference and actor alike.

        The vision tower never trains and the reference starts as a copy of the actor, so both would
        compute the same features; with the step's cache each distinct screenshot is encoded once per
        step, without it once per micro-batch (transformers' ``mm_encoder_outputs`` input).
        """
        if "pixel_values" not in inputs or not self._accepts_encoder_outputs:
            return inputs
        if self._cache is not None:
            features = self._cache.features_for([image for seg in segments for image in seg.images])
        else:
            with torch.no_grad(), self._autocast():
                features = self.model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"],
                                                               return_dict=True)
        self._sync()
        shared = {k: v for k, v in inputs.items() if k != "pixel_values"}
        shared["mm_encoder_outputs"] = {"image": features}
        return shared

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @torch.no_grad()
    def recompute_logprobs(self, segments: Sequence[Segment], *, reference: bool = False) -> list[list[float]]:
        """Per-token logprobs of each segment's ids under the actor (or reference), 0 where the mask is 0."""
        module = self.reference if reference else self.model
        if module is None:
            raise ValueError("no reference model: algorithm.kl_coef is 0")
        out: list[list[float]] = []
        with self._vision_features(segments):
            for seg in segments:
                inputs, mask, _, _ = self._inputs([seg])
                inputs = self._encode_images(inputs, [seg])
                with self._autocast():
                    lp = self._logprobs(module, inputs, mask)
                out.append((lp[0] * mask[0]).tolist())
        return out

    def export_weights(self, bucket_bytes: int = 256 << 20) -> Iterator[list[tuple[str, Any]]]:
        params = dict(self.model.named_parameters())
        named = ((name, params[name].detach()) for name in self.trainable_names)
        return iter_buckets(named, bucket_bytes)

    def save(self, path: Path) -> None:
        torch_checkpoint.save(self, path)

    def load(self, path: Path) -> None:
        torch_checkpoint.load(self, path)

    def load_weights(self, path: Path) -> None:
        torch_checkpoint.load_weights(self, path)

    def close(self) -> None:
        self.reference = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def create_torch_trainer(options: TorchTrainerOptions, *, model: PolicyModel, algorithm: AlgorithmSection,
                         seed: int = 0, objective: str = "grpo", **_: Any) -> TorchTrainer:
    """Factory of the ``torch`` trainer backend (context: model, algorithm, seed, objective)."""
    return TorchTrainer(options, model=model, algorithm=algorithm, seed=seed, objective=objective)


__all__ = ["MicroBatch", "TorchTrainer", "TorchTrainerOptions", "create_torch_trainer"]
