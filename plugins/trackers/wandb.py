"""Weights & Biases: the resolved config and component versions as the run's config, every metric per step.

``mode: offline`` writes the run under ``<run_dir>/wandb`` for ``wandb sync`` later (no network, no account);
``online`` needs ``WANDB_API_KEY`` (or ``wandb login``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import Tracker
from plugins.trackers.common import component_params


class WandbOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str = Field("scalecua", description="W&B project")
    entity: str | None = Field(None, description="team or user (default: yours)")
    mode: Literal["online", "offline", "disabled"] = Field("online", description="offline: sync later")
    group: str | None = Field(None, description="group runs of one sweep or ablation")
    tags: list[str] = Field(default_factory=list)
    directory: str | None = Field(None, description="where wandb writes (default: the run directory)")


class WandbTracker(Tracker):
    def __init__(self, options: WandbOptions, *, run_dir: Path | None = None) -> None:
        self.options = options
        self.run: Any = None

    def start(self, *, run_name: str, run_dir: Path, config: Mapping[str, Any],
              components: Mapping[str, Mapping[str, str]]) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise RuntimeError(f"wandb is not installed ({exc}): pip install wandb") from None
        o = self.options
        self.run = wandb.init(project=o.project, entity=o.entity, mode=o.mode, group=o.group, tags=o.tags or None,
                              name=run_name, id=run_name, resume="allow", dir=o.directory or str(run_dir),
                              config={**dict(config), **component_params(components)})

    def log_metrics(self, iteration: int, metrics: Mapping[str, float]) -> None:
        self.run.log(dict(metrics), step=iteration)

    def log_images(self, iteration: int, images: Mapping[str, Any]) -> None:
        import wandb

        self.run.log({key: wandb.Image(image) for key, image in images.items()}, step=iteration)

    def finish(self, status: str) -> None:
        if self.run is not None:
            self.run.finish(exit_code=0 if status == "completed" else 1)
            self.run = None
