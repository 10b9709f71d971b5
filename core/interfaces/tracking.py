"""Experiment trackers: where a run shows up besides its own directory (TensorBoard, W&B, MLflow, ...)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Mapping


class Tracker(ABC):
    """One experiment tracker of a run, selected in the config's ``trackers`` list.

    The core calls :meth:`start` once (a failure stops the run before it trains, with the tracker's
    reason), then :meth:`log_metrics` after every iteration and :meth:`finish` at the end; a failure
    in those is logged as a warning and never stops training.
    """

    @abstractmethod
    def start(self, *, run_name: str, run_dir: Path, config: Mapping[str, Any],
              components: Mapping[str, Mapping[str, str]]) -> None:
        """Open the tracker's run: ``config`` is the resolved config, ``components`` each selected
        slot's ``{name, provider, version}``."""

    @abstractmethod
    def log_metrics(self, iteration: int, metrics: Mapping[str, float]) -> None:
        """Every scalar metric of one iteration."""

    def log_images(self, iteration: int, images: Mapping[str, Any]) -> None:
        """Sample screenshots (PIL images, the actions drawn on them) keyed by a name; optional."""

    @abstractmethod
    def finish(self, status: str) -> None:
        """Close the tracker's run; ``status`` is ``completed``, ``interrupted`` or ``failed``."""
