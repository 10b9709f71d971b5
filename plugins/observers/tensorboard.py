"""TensorBoard scalars for every iteration, when ``run.tensorboard: true``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import structlog

from core import hookimpl

log = structlog.get_logger(__name__)


class TensorBoardObserver:
    def __init__(self) -> None:
        self.writer: Any = None

    @hookimpl
    def scalecua_configure(self, config: Mapping[str, Any], run_dir: Path) -> None:
        if not (config.get("run") or {}).get("tensorboard"):
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise RuntimeError(
                "run.tensorboard is true but TensorBoard is not installed: pip install tensorboard "
                "(or install the 'dev' extra), or set run.tensorboard: false"
            ) from exc
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        log.info("tensorboard logging", log_dir=str(run_dir / "tensorboard"))

    @hookimpl
    def scalecua_iteration_end(self, iteration: int, metrics: Mapping[str, float], run_dir: Path) -> None:
        if self.writer is None:
            return
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and key != "iteration":
                self.writer.add_scalar(key, float(value), iteration)
        self.writer.flush()

    @hookimpl
    def scalecua_run_end(self, run_dir: Path, status: str) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
