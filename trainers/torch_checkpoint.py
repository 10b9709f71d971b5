"""Checkpoint I/O of the ``torch`` trainer backend: save / resume, and starting from another run's weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import structlog
import torch

from core.errors import CheckpointError

log = structlog.get_logger(__name__)


class Checkpointed(Protocol):
    """What checkpoint I/O reads and restores of a trainer (``trainers.torch_backend.TorchTrainer``)."""

    model: torch.nn.Module
    reference: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    device: torch.device
    steps: int
    options: Any  # the backend's options model (``init_optimizer``, ...)
    trainable_names: list[str]


def save(trainer: Checkpointed, path: Path) -> None:
    """Weights (safetensors), AdamW state, RNG states and the step count under ``path``."""
    from safetensors.torch import save_model

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_model(trainer.model, str(path / "model.safetensors"))
    torch.save(trainer.optimizer.state_dict(), path / "optimizer.pt")
    rng = {"cpu": torch.get_rng_state()}
    if trainer.device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(trainer.device)
    torch.save(rng, path / "rng.pt")
    (path / "trainer.json").write_text(json.dumps({
        "steps": trainer.steps,
        "options": trainer.options.model_dump(mode="json"),
        "trainable": len(trainer.trainable_names),
    }, indent=2) + "\n", encoding="utf-8")


def load(trainer: Checkpointed, path: Path) -> None:
    """Everything :func:`save` wrote, checked against this trainer's model first."""
    from safetensors.torch import load_model

    path = Path(path)
    for name in ("model.safetensors", "optimizer.pt", "rng.pt", "trainer.json"):
        if not (path / name).is_file():
            raise CheckpointError(f"trainer checkpoint {path} lacks {name}")
    meta = json.loads((path / "trainer.json").read_text(encoding="utf-8"))
    if meta.get("trainable") != len(trainer.trainable_names):
        raise CheckpointError(
            f"trainer checkpoint {path} trained {meta.get('trainable')} tensors but this model has "
            f"{len(trainer.trainable_names)}: the model config differs from the checkpointed run"
        )
    missing, unexpected = load_model(trainer.model, str(path / "model.safetensors"), strict=False,
                                     device=str(trainer.device))
    if missing or unexpected:
        raise CheckpointError(f"trainer checkpoint {path} does not match the model: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")
    trainer.optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location=trainer.device, weights_only=True))
    rng = torch.load(path / "rng.pt", weights_only=True)
    torch.set_rng_state(rng["cpu"])
    if "cuda" in rng and trainer.device.type == "cuda":
        torch.cuda.set_rng_state(rng["cuda"], trainer.device)
    trainer.steps = int(meta["steps"])


def load_weights(trainer: Checkpointed, path: Path) -> None:
    """``run.init_from``: the weights (and with ``init_optimizer`` the AdamW moments) of a checkpoint."""
    from safetensors.torch import load_model

    weights = Path(path) / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"run.init_from: {Path(path)} holds no model.safetensors (a trainer checkpoint "
                              "directory, e.g. <run>/checkpoints/iter_000100/trainer)")
    # the KL term regularizes toward the starting point: the reference gets the same weights
    for module in (trainer.model, trainer.reference):
        if module is None:
            continue
        missing, unexpected = load_model(module, str(weights), strict=False, device=str(trainer.device))
        if missing or unexpected:
            raise CheckpointError(f"run.init_from: {weights} does not match the configured model: missing "
                                  f"{missing[:5]}, unexpected {unexpected[:5]}; use the model config it was "
                                  "trained with")
    if trainer.options.init_optimizer:
        _load_optimizer_moments(trainer, Path(path))
    log.info("trainer weights initialized", path=str(weights), optimizer=trainer.options.init_optimizer)


def _load_optimizer_moments(trainer: Checkpointed, path: Path) -> None:
    """The AdamW second moments and step count of ``path`` (``trainer.options.init_optimizer``), under this run's
    hyperparameters; the first moments start at zero."""
    state_file = path / "optimizer.pt"
    if not state_file.is_file():
        raise CheckpointError(f"trainer.options.init_optimizer: {path} holds no optimizer.pt; point run.init_from "
                              "at a trainer checkpoint of this backend or set init_optimizer: false")
    configured = [{k: v for k, v in g.items() if k != "params"} for g in trainer.optimizer.param_groups]
    try:
        trainer.optimizer.load_state_dict(torch.load(state_file, map_location=trainer.device, weights_only=True))
    except ValueError as exc:
        raise CheckpointError(f"trainer.options.init_optimizer: {state_file} does not fit this model's "
                              f"trainable parameters ({exc}); set init_optimizer: false") from None
    for group, settings in zip(trainer.optimizer.param_groups, configured):
        group.update(settings)  # lr / betas / eps / weight decay are this run's
    for state in trainer.optimizer.state.values():
        # The second moments (each weight's gradient scale) and the step count carry over; the first moment is
        # the warm start's last direction under its own objective, which the new objective must not continue
        # (measured: carrying it lowered the demonstrations' likelihood where the same RL step without it raised it)
        if "exp_avg" in state:
            state["exp_avg"].zero_()

