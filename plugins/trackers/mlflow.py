"""MLflow: the flattened config and component versions as parameters, every metric per step, the resolved
config as an artifact. ``tracking_uri`` is any MLflow store: a server (``http://...``) or a local SQLite file
(``sqlite:///mlflow.db``; relative paths are under the run directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import Tracker
from plugins.trackers.common import component_params, flatten

MAX_PARAM_CHARS = 6000  # MLflow's limit on one parameter value


class MlflowOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tracking_uri: str = Field("sqlite:///mlflow.db", description="an MLflow server or store URI")
    experiment: str = Field("scalecua", description="experiment name (created when missing)")
    tags: dict[str, str] = Field(default_factory=dict)


class MlflowTracker(Tracker):
    def __init__(self, options: MlflowOptions, *, run_dir: Path | None = None) -> None:
        self.options = options
        self.client: Any = None
        self.run_id: str | None = None

    def _uri(self, run_dir: Path) -> str:
        uri = self.options.tracking_uri
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            return f"sqlite:///{run_dir / uri[len('sqlite:///'):]}"  # relative: inside the run directory
        return uri

    def start(self, *, run_name: str, run_dir: Path, config: Mapping[str, Any],
              components: Mapping[str, Mapping[str, str]]) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise RuntimeError(f"mlflow is not installed ({exc}): pip install mlflow") from None
        self.client = MlflowClient(tracking_uri=self._uri(run_dir))
        experiment = self.client.get_experiment_by_name(self.options.experiment)
        # a local store keeps the artifacts beside it in the run directory (MLflow's default is ./mlruns in the
        # working directory, wherever the run was started from)
        local = self.options.tracking_uri.startswith("sqlite:///")
        artifacts = (run_dir / "mlflow-artifacts").resolve().as_uri() if local else None
        experiment_id = (experiment.experiment_id if experiment is not None
                         else self.client.create_experiment(self.options.experiment, artifact_location=artifacts))
        found = self.client.search_runs([experiment_id], f"tags.`mlflow.runName` = '{run_name}'", max_results=1)
        if found:  # a resumed run continues its MLflow run
            self.run_id = found[0].info.run_id
            return
        run = self.client.create_run(experiment_id, run_name=run_name, tags=self.options.tags)
        self.run_id = run.info.run_id
        params = {**flatten(config), **component_params(components)}
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k[:250], v[:MAX_PARAM_CHARS]) for k, v in params.items()])
        self.client.log_dict(self.run_id, dict(config), "config.json")

    def log_metrics(self, iteration: int, metrics: Mapping[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, iteration) for k, v in metrics.items()])

    def log_images(self, iteration: int, images: Mapping[str, Any]) -> None:
        for key, image in images.items():
            self.client.log_image(self.run_id, image, key=key, step=iteration)

    def finish(self, status: str) -> None:
        if self.client is not None and self.run_id is not None:
            self.client.set_terminated(self.run_id, "FINISHED" if status == "completed" else
                                       "KILLED" if status == "interrupted" else "FAILED")
            self.run_id = None
