"""TensorBoard: every iteration's scalars under ``<run_dir>/<log_dir>``, the config as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import Tracker
from plugins.trackers.common import component_params


class TensorBoardOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    log_dir: str = Field("tensorboard", description="event files' directory (relative: inside the run directory)")


class TensorBoardTracker(Tracker):
    def __init__(self, options: TensorBoardOptions, *, run_dir: Path | None = None) -> None:
        self.options = options
        self.writer: Any = None

    def start(self, *, run_name: str, run_dir: Path, config: Mapping[str, Any],
              components: Mapping[str, Mapping[str, str]]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise RuntimeError(f"TensorBoard is not installed ({exc}): pip install tensorboard") from None
        directory = Path(self.options.log_dir)
        self.writer = SummaryWriter(log_dir=str(directory if directory.is_absolute() else run_dir / directory))
        self.writer.add_text("config", "```\n" + yaml.safe_dump(dict(config), sort_keys=False) + "\n```", 0)
        self.writer.add_text("components", "\n".join(f"{k}: {v}" for k, v in component_params(components).items()), 0)

    def log_metrics(self, iteration: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, iteration)
        self.writer.flush()

    def log_images(self, iteration: int, images: Mapping[str, Any]) -> None:
        import numpy as np

        for key, image in images.items():
            self.writer.add_image(key, np.asarray(image.convert("RGB")), iteration, dataformats="HWC")

    def finish(self, status: str) -> None:
        if self.writer is not None:
            self.writer.add_text("status", status, 0)
            self.writer.close()
            self.writer = None
