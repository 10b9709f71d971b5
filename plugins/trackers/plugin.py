"""Entry-point module: the built-in experiment trackers (each imports its library only when created)."""

from __future__ import annotations

from typing import Any

from core import hookimpl


@hookimpl
def scalecua_register_trackers(registry: Any) -> None:
    registry.register(
        "tensorboard", "plugins.trackers.tensorboard:TensorBoardTracker",
        options="plugins.trackers.tensorboard:TensorBoardOptions",
        description="TensorBoard scalars (and sample screenshots) under the run directory",
    )
    registry.register(
        "wandb", "plugins.trackers.wandb:WandbTracker", options="plugins.trackers.wandb:WandbOptions",
        description="Weights & Biases: config, component versions, every metric (online, offline or disabled)",
    )
    registry.register(
        "mlflow", "plugins.trackers.mlflow:MlflowTracker", options="plugins.trackers.mlflow:MlflowOptions",
        description="MLflow: parameters, component versions, every metric, the config as an artifact",
    )
