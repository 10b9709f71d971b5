"""Experiment trackers selected in YAML: TensorBoard, W&B (offline: no network here) and MLflow (a local SQLite
store) on one real training run at once, read back with each tool's own reader; a tracker that cannot start
stops the run at start-up naming it; one that fails mid-run is a warning and training goes on."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

import pytest

from core import hookimpl
from core.config import load_config
from core.errors import ConfigError, ScaleCUAError
from core.interfaces import Tracker
from core.pluginmanager import load_plugins
from core.runtime.tracking import HUB_NAME, start_trackers
from tests.run.hold import only_run_dir, run_cli

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "simulated-async.yaml"
ITERATIONS = 3


def small(runs: Path, trackers: str) -> list[str]:
    return [f"run.output_dir={runs}", f"run.iterations={ITERATIONS}", "run.checkpoint_every=3", "run.name=tracked",
            "algorithm.batch_size=2", "algorithm.n_rollouts=2", "algorithm.max_turns=3",
            "rollout.options.done_probability=0.5", "environment.options.step_latency_s=[0.0,0.02]",
            "environment.options.reset_latency_s=[0.0,0.02]", f"trackers={trackers}"]


@pytest.mark.slow
def test_three_trackers_at_once_see_the_config_the_components_and_every_metric(tmp_path: Path) -> None:
    trackers = ("[{name: tensorboard}, {name: wandb, options: {mode: offline, project: scalecua-test}},"
                " {name: mlflow, options: {tracking_uri: 'sqlite:///mlflow.db', experiment: test}}]")
    done = run_cli("core.run", "--config", str(CONFIG), *small(tmp_path, trackers), "run.log_images_every=2",
                   env=None)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == list(range(ITERATIONS))

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss/pg")] == list(range(ITERATIONS))
    assert [round(e.value, 5) for e in events.Scalars("train/loss/pg")] == [round(m["train/loss/pg"], 5)
                                                                            for m in metrics]
    assert "config" in {t.rsplit("/", 1)[0] for t in events.Tags()["tensors"]}
    # sample screenshots with the first action drawn: after iteration 1 (every 2), one per task, up to 4
    images = events.Tags()["images"]
    assert images and all(re.fullmatch(r"rollouts/[\w.-]+/(success|failure)", tag) for tag in images)
    first = events.Images(images[0])[0]
    assert first.step == 1 and first.width > 0 and first.encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n"

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'mlflow.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    assert run.info.run_name == run_dir.name and run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "success/rate")
    assert [(h.step, h.value) for h in history] == [(m["iteration"], m["success/rate"]) for m in metrics]
    assert run.data.params["sampler.name"] == "frontier"
    assert run.data.params["components.trainer"].startswith("torch (scalecua")
    # the config artifact lives in the run directory, not in ./mlruns of wherever the run started
    assert json.loads((run_dir / "mlflow-artifacts" / run.info.run_id / "artifacts" / "config.json").read_text())
    logged = [p.name for p in (run_dir / "mlflow-artifacts" / run.info.run_id / "artifacts").rglob("*.png")]
    assert logged and all(name.startswith("rollouts") for name in logged), logged

    [offline] = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    history, config = read_wandb(offline)
    assert sorted({int(h["_step"]) for h in history}) == list(range(ITERATIONS))
    pictures = {k.rsplit("/", 1)[0] for h in history for k, v in h.items() if k.endswith("/_type") and v == "image-file"}
    assert pictures and all(re.fullmatch(r"rollouts/[\w.-]+/(success|failure)", key) for key in pictures)
    assert list(offline.parent.glob("files/media/images/rollouts/**/*.png"))
    history = [h for h in history if "success/rate" in h]
    assert [int(h["_step"]) for h in history] == list(range(ITERATIONS))
    assert [h["success/rate"] for h in history] == [m["success/rate"] for m in metrics]
    assert config["sampler"]["name"] == "frontier" and config["components.sampler"].startswith("frontier (scalecua")


def read_wandb(path: Path) -> tuple[list[dict], dict]:
    """History rows and config of an offline W&B run file, read with wandb's own protobuf records.

    The file is a 7-byte header then LevelDB-style log blocks of 32 KiB: records of (crc32, length, type)
    + data, where type 1 is a whole record and 2 / 3 / 4 are its first / middle / last pieces."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, pieces, history, config = 7, b"", [], {}
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block  # a block's tail too short for a header is padding
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (2, 3):
            pieces = chunk if kind == 2 else pieces + chunk
            continue
        if kind not in (1, 4):
            continue
        record = pb.Record()
        record.ParseFromString(pieces + chunk if kind == 4 else chunk)
        if record.WhichOneof("record_type") == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})
        elif record.WhichOneof("record_type") == "run":  # the run record carries wandb.init's config
            config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
    return history, config


class Flaky(Tracker):
    """A tracker (registered by this test) failing where its options say."""

    def __init__(self, options: Any, **_: Any) -> None:
        self.fail = options.fail_in
        self.logged: list[int] = []
        self.finished: str | None = None

    def start(self, *, run_name: str, run_dir: Path, config: Mapping[str, Any], components: Any) -> None:
        if self.fail == "start":
            raise ConnectionError("no route to the tracking server")

    def log_metrics(self, iteration: int, metrics: Mapping[str, float]) -> None:
        if self.fail == "log":
            raise OSError("disk full")
        self.logged.append(iteration)

    def finish(self, status: str) -> None:
        self.finished = status


class FlakyPlugin:
    @hookimpl
    def scalecua_register_trackers(self, registry: Any) -> None:
        from pydantic import BaseModel

        class FlakyOptions(BaseModel):
            fail_in: str = "never"

        registry.register("flaky", Flaky, options=FlakyOptions)


def resolved_with(tmp_path: Path, trackers: str) -> tuple[Any, Any]:
    plugins = load_plugins(environ={})
    plugins.register(FlakyPlugin(), name="flaky-tracker")
    config = tmp_path / "c.yaml"
    config.write_text(f"trackers: {trackers}\n")
    return load_config(config, plugins=plugins)


def test_a_tracker_that_cannot_start_stops_the_run_naming_it(tmp_path: Path) -> None:
    resolved, plugins = resolved_with(tmp_path, "[{name: flaky}, {name: flaky, options: {fail_in: start}}]")
    with pytest.raises(ScaleCUAError, match=r"trackers\[1\] \(flaky\) cannot start: ConnectionError: no route"):
        start_trackers(resolved, plugins, tmp_path)
    assert plugins.manager.get_plugin(HUB_NAME) is None  # nothing registered: the run never started


def test_a_tracker_failing_mid_run_is_skipped_and_the_others_go_on(tmp_path: Path) -> None:
    resolved, plugins = resolved_with(tmp_path, "[{name: flaky, options: {fail_in: log}}, {name: flaky}]")
    hub = start_trackers(resolved, plugins, tmp_path)
    assert hub is not None
    for iteration in range(3):  # the lifecycle hooks, as the loop calls them
        plugins.hook.scalecua_iteration_end(iteration=iteration, metrics={"a": 1.0, "iteration": iteration,
                                                                          "label": "x"}, run_dir=tmp_path)
    plugins.hook.scalecua_run_end(run_dir=tmp_path, status="completed")
    (_, broken), (_, healthy) = hub.trackers
    assert hub.failed == {"trackers[0]"} and broken.finished is None  # skipped after its failure
    assert healthy.logged == [0, 1, 2] and healthy.finished == "completed"
    assert plugins.manager.get_plugin(HUB_NAME) is None  # unregistered at the end


def test_tracker_options_are_strict(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"trackers\[0\]\.options\.projekt: unknown option\. Did you mean 'project'"):
        load_config(_write(tmp_path, "trackers: [{name: wandb, options: {projekt: x}}]\n"))
    with pytest.raises(ConfigError, match=r"trackers\[1\]\.name: unknown experiment tracker 'wandbb'"):
        load_config(_write(tmp_path, "trackers: [{name: tensorboard}, {name: wandbb}]\n"))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return path
