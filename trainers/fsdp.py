"""Trainer backend ``torch-fsdp``: the ``torch`` backend data-parallel over many processes with FSDP2.

Every rank holds a shard of the weights, gradients and AdamW state
(``torch.distributed.fsdp.fully_shard``: one unit per decoder layer, one for
the frozen vision tower, the rest in the root). The computation is the torch
backend's (same inputs, same logprob convention, same
:func:`trainers.objective.grpo_token_loss`); only the split of the work
differs:

* The step's micro-batches are planned once (identically on every rank) and
  dealt round-robin; a rank with fewer gets an all-masked micro-batch, because
  every rank must run the same number of forward/backward passes (each is a
  collective).
* The loss keeps the *global* token count as normalizer (times the world size,
  which FSDP's gradient averaging divides out again), so the update equals the
  single-process token mean over the whole step, whatever the world size.

SPMD contract: every rank calls :meth:`FSDPTrainer.train_step`,
:meth:`export_weights`, :meth:`save` and :meth:`load` with the same arguments,
in the same order (Ray trainer workers do exactly that). Under ``torchrun``
use :mod:`trainers.fsdp_run`: rank 0 runs the training loop and the other
ranks follow its trainer calls.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

import structlog
import torch
from pydantic import Field

from core.config import AlgorithmSection
from core.errors import CheckpointError
from core.interfaces import PolicyModel
from core.types import Segment
from core.weight_sync import iter_buckets
from trainers.batching import MicroBatch
from trainers.objective import StepStats
from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

log = structlog.get_logger(__name__)

#: StepStats fields reduced with MAX / MIN across ranks (the others are sums)
_MAX_FIELDS = ("ratio_max",)
_MIN_FIELDS = ("ratio_min",)


class FSDPTrainerOptions(TorchTrainerOptions):
    """Options of the ``torch-fsdp`` backend: the ``torch`` options plus process-group settings."""

    process_group_backend: str = Field(
        "auto", description="torch.distributed backend: auto (nccl with GPUs, gloo without), nccl or gloo"
    )
    reshard_after_forward: bool = Field(
        True, description="free gathered weights after each unit's forward (ZeRO-3); False keeps them (ZeRO-2)"
    )


class _PolicyForward(torch.nn.Module):
    """Root FSDP unit: one forward computes the teacher-forced logprobs (decoder, then the LM head).

    ``token_logprobs`` calls the decoder body and the LM head separately; wrapping
    both in one module makes that single call the root forward, so FSDP2 gathers
    the root's parameters (embeddings, tied LM head, final norm) around it.
    """

    def __init__(self, model: torch.nn.Module, trainer: FSDPTrainer) -> None:
        super().__init__()
        self.model = model
        self._trainer = [trainer]  # a list: not registered as a submodule

    def forward(self, inputs: dict[str, Any], mask: torch.Tensor, with_entropy: bool = False) -> Any:
        return TorchTrainer._logprobs(self._trainer[0], self.model, inputs, mask, with_entropy=with_entropy)


def _init_process_group(backend: str) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        return
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        raise RuntimeError(
            f"trainer 'torch-fsdp' needs a process group: {', '.join(missing)} not set; start it with torchrun "
            "(torchrun --nproc-per-node N -m trainers.fsdp_run --config FILE) or as Ray trainer workers"
        )
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)


class FSDPTrainer(TorchTrainer):
    """The torch backend with parameters, gradients and optimizer state sharded over the process group."""

    def __init__(self, options: FSDPTrainerOptions, *, model: PolicyModel, algorithm: AlgorithmSection,
                 seed: int = 0, objective: str = "grpo") -> None:
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        _init_process_group(options.process_group_backend)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        if options.device == "auto" and torch.cuda.is_available():
            options = options.model_copy(update={"device": f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"})
        # Every rank builds the same seeded weights, then keeps only its shard.
        super().__init__(options, model=model, algorithm=algorithm, seed=seed, objective=objective)
        self._accepts_encoder_outputs = False  # the vision tower runs inside the root forward (its own unit)
        self._root = self._shard(self.model, options.reshard_after_forward, fully_shard)
        self._reference_root = None
        if self.reference is not None:
            self._reference_root = self._shard(self.reference, options.reshard_after_forward, fully_shard)
        # fully_shard swaps every parameter for a DTensor: the optimizer must see the new ones.
        params = dict(self.model.named_parameters())
        self.optimizer = torch.optim.AdamW(
            [params[name] for name in self.trainable_names], lr=options.lr, betas=options.betas,
            eps=options.adam_eps, weight_decay=options.weight_decay,
        )
        log.info("fsdp trainer ready", rank=self.rank, world_size=self.world_size,
                 backend=dist.get_backend(), device=str(self.device))

    def _shard(self, module: torch.nn.Module, reshard: bool, fully_shard: Any) -> torch.nn.Module:
        body = module.model
        for layer in body.language_model.layers:
            fully_shard(layer, reshard_after_forward=reshard)
        fully_shard(body.visual, reshard_after_forward=reshard)
        root = _PolicyForward(module, self)
        fully_shard(root, reshard_after_forward=reshard)
        return root

    # -- the step ---------------------------------------------------------------

    def _logprobs(self, module: torch.nn.Module, inputs: dict[str, Any], mask: torch.Tensor, *,
                  with_entropy: bool = False) -> Any:
        root = self._root if module is self.model else self._reference_root
        return root(inputs, mask, with_entropy)

    def train_step(self, segments: Sequence[Segment], kl_limit: float | None = None) -> dict[str, float]:
        metrics = super().train_step(segments, kl_limit)
        if "batch/micro_batches" in metrics:  # a step that trained
            metrics["dist/world_size"] = float(self.world_size)
        return metrics

    def _accumulate(self, segments: Sequence[Segment], batches: list[MicroBatch], total: int, stats: StepStats,
                    times: dict[str, float]) -> None:
        mine = batches[self.rank::self.world_size]
        rounds = -(-len(batches) // self.world_size)  # every rank runs this many micro-steps
        for i in range(rounds):
            self._root.set_requires_gradient_sync(i == rounds - 1)  # reduce-scatter once, after the last
            if i < len(mine):
                # FSDP averages gradients over ranks; scaling the normalizer by the world size turns that
                # average back into the sum of per-rank token sums over the *global* token count.
                self._micro_step([segments[j] for j in mine[i].indices], total / self.world_size, stats, times)
            else:
                self._idle_micro_step(segments[0])

    def _evaluate(self, segments: Sequence[Segment], batches: list[MicroBatch], total: int, stats: StepStats) -> None:
        mine = batches[self.rank::self.world_size]
        for i in range(-(-len(batches) // self.world_size)):  # the same forward collectives on every rank
            if i < len(mine):
                self._eval_micro_step([segments[j] for j in mine[i].indices], total, stats)
            else:
                inputs, mask, _, _ = self._inputs([segments[0]])
                with self._autocast():
                    if self.reference is not None:
                        self._logprobs(self.reference, inputs, mask)
                    self._logprobs(self.model, inputs, mask)

    def _reduce(self, stats: StepStats) -> StepStats:
        import torch.distributed as dist

        return _reduce_stats(stats, dist, self.device)

    def _idle_micro_step(self, segment: Segment) -> None:
        """A rank without a micro-batch this round still runs every collective: same passes, zero gradient."""
        inputs, mask, _, _ = self._inputs([segment])
        if self.reference is not None:
            with torch.no_grad(), self._autocast():
                self._logprobs(self.reference, inputs, mask)
        with self._autocast():
            logp = self._logprobs(self.model, inputs, mask)
        (logp.sum() * 0.0).backward()

    # -- weights out and in ---------------------------------------------------------

    def full_tensors(self, names: Sequence[str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, full tensor) for each parameter (all ranks must iterate: each gather is a collective)."""
        params = dict(self.model.named_parameters())
        for name in (self.trainable_names if names is None else names):
            param = params[name].detach()
            yield name, param.full_tensor() if hasattr(param, "full_tensor") else param

    def export_weights(self, bucket_bytes: int = 256 << 20) -> Iterator[list[tuple[str, Any]]]:
        return iter_buckets(self.full_tensors(), bucket_bytes)

    def save(self, path: Path) -> None:
        import torch.distributed as dist
        from safetensors.torch import save_file
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model_state, optim_state = get_state_dict(self.model, self.optimizer, options=options)
        if self.rank == 0:
            path = Path(path)
            path.mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous() for k, v in model_state.items()}, str(path / "model.safetensors"))
            torch.save(optim_state, path / "optimizer.pt")
            (path / "trainer.json").write_text(json.dumps({
                "steps": self.steps, "world_size": self.world_size, "trainable": len(self.trainable_names),
                "options": self.options.model_dump(mode="json"),
            }, indent=2) + "\n", encoding="utf-8")
        dist.barrier()  # the directory exists before the other ranks write into it
        # each rank's RNG: ranks draw nothing today, but a resumed run must not depend on that
        torch.save({"cpu": torch.get_rng_state()}, Path(path) / f"rng-{self.rank}.pt")
        dist.barrier()

    def load(self, path: Path) -> None:
        from safetensors.torch import load_file
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        path = Path(path)
        for name in ("model.safetensors", "optimizer.pt", "trainer.json"):
            if not (path / name).is_file():
                raise CheckpointError(f"trainer checkpoint {path} lacks {name}")
        meta = json.loads((path / "trainer.json").read_text(encoding="utf-8"))
        if meta.get("trainable") != len(self.trainable_names):
            raise CheckpointError(f"trainer checkpoint {path} trained {meta.get('trainable')} tensors but this model "
                                  f"has {len(self.trainable_names)}: the model config differs")
        model_state = load_file(str(path / "model.safetensors"))
        optim_state = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False)
        set_state_dict(self.model, self.optimizer, model_state_dict=model_state, optim_state_dict=optim_state,
                       options=StateDictOptions(full_state_dict=True))
        rng = path / f"rng-{self.rank}.pt"
        if rng.is_file():
            torch.set_rng_state(torch.load(rng, weights_only=True)["cpu"])
        self.steps = int(meta["steps"])

    def load_weights(self, path: Path) -> None:
        from safetensors.torch import load_file
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        weights = Path(path) / "model.safetensors"
        if not weights.is_file():
            raise CheckpointError(f"run.init_from: {Path(path)} holds no model.safetensors (a trainer checkpoint "
                                  "directory, e.g. <run>/checkpoints/iter_000100/trainer)")
        if self.options.init_optimizer:
            raise CheckpointError("trainer.options.init_optimizer is not supported by torch-fsdp (its optimizer state "
                                  "is sharded per rank); set it to false")
        state = load_file(str(weights))
        for module in (self.model, self.reference):  # the reference (KL term) starts from the same weights
            if module is not None:
                set_model_state_dict(module, state, options=StateDictOptions(full_state_dict=True, strict=True))

    def close(self) -> None:
        super().close()
        self._reference_root = None


def _reduce_stats(stats: StepStats, dist: Any, device: torch.device) -> StepStats:
    """Sum the step's metric sums over ranks (max/min for the ratio extremes)."""
    fields = [f.name for f in dataclasses.fields(StepStats)]
    sums = [f for f in fields if f not in _MAX_FIELDS + _MIN_FIELDS]
    buffer = torch.tensor([float(getattr(stats, f)) for f in sums], dtype=torch.float64, device=device)
    dist.all_reduce(buffer)
    extremes = torch.tensor([getattr(stats, f) for f in _MAX_FIELDS] + [-getattr(stats, f) for f in _MIN_FIELDS],
                            dtype=torch.float64, device=device)
    dist.all_reduce(extremes, op=dist.ReduceOp.MAX)
    values = dict(zip(sums, buffer.cpu().tolist()))
    values.update(zip(_MAX_FIELDS, extremes[: len(_MAX_FIELDS)].tolist()))
    values.update(zip(_MIN_FIELDS, (-extremes[len(_MAX_FIELDS):]).cpu().tolist()))
    return StepStats(**values)


def create_fsdp_trainer(options: FSDPTrainerOptions, *, model: PolicyModel, algorithm: AlgorithmSection,
                        seed: int = 0, objective: str = "grpo", **_: Any) -> FSDPTrainer:
    """Factory of the ``torch-fsdp`` trainer backend (context: model, algorithm, seed, objective).

    Under :mod:`trainers.fsdp_run`, rank 0's placement plugin wraps what this returns so the other ranks
    follow its calls.
    """
    return FSDPTrainer(options, model=model, algorithm=algorithm, seed=seed, objective=objective)
