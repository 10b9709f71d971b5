"""The run's experiment trackers (the config's ``trackers`` list), driven by the lifecycle hooks.

:func:`start_trackers` creates every configured tracker and opens its run; one that cannot start stops
the run there, naming the tracker and the fix. The :class:`TrackerHub` is then registered as a plugin
object, so ``scalecua_iteration_end`` and ``scalecua_run_end`` reach it like any observer; a tracker
that fails there is logged once as a warning and skipped from then on: training never stops for it.

With ``run.log_images_every: N`` the hub also keeps each task's latest episode (``scalecua_episode_end``)
and every N iterations sends up to :data:`IMAGES_PER_LOG` of them, the first screenshot with the first
turn's actions drawn (:func:`core.runtime.shots.sample_images`), through ``Tracker.log_images``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import structlog

from core import hookimpl
from core.errors import ScaleCUAError

log = structlog.get_logger(__name__)

HUB_NAME = "scalecua-trackers"
IMAGES_PER_LOG = 4


class TrackerHub:
    def __init__(self, trackers: list[tuple[str, Any]], plugins: Any, *, images_every: int = 0):
        self.trackers = trackers  # (config path, tracker)
        self.plugins = plugins
        self.failed: set[str] = set()
        self.images_every = images_every
        self.latest: dict[str, Any] = {}  # task id -> its latest episode (only while images are logged)

    def _each(self, what: str, call: Any) -> None:
        for path, tracker in self.trackers:
            if path in self.failed:
                continue
            try:
                call(tracker)
            except Exception as exc:  # a tracker's own failure (network, disk, its library) never stops a run
                self.failed.add(path)
                log.warning("tracker failed; it is skipped for the rest of the run", tracker=path, during=what,
                            error=f"{type(exc).__name__}: {exc}")

    @hookimpl
    def scalecua_episode_end(self, iteration: int, trajectory: Any, run_dir: Path) -> None:
        if self.images_every:
            self.latest.pop(trajectory.task_id, None)
            self.latest[trajectory.task_id] = trajectory

    @hookimpl
    def scalecua_iteration_end(self, iteration: int, metrics: Mapping[str, float], run_dir: Path) -> None:
        scalars = {k: float(v) for k, v in metrics.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "iteration"}
        self._each("log_metrics", lambda t: t.log_metrics(iteration, scalars))
        if self.images_every and (iteration + 1) % self.images_every == 0 and self.latest:
            from core.runtime.shots import sample_images

            images = sample_images(reversed(list(self.latest.values())), IMAGES_PER_LOG)  # the newest first
            self.latest.clear()
            if images:
                self._each("log_images", lambda t: t.log_images(iteration, images))

    @hookimpl
    def scalecua_run_end(self, run_dir: Path, status: str) -> None:
        self._each("finish", lambda t: t.finish(status))
        self.plugins.unregister(HUB_NAME)


def start_trackers(resolved: Any, plugins: Any, run_dir: Path) -> TrackerHub | None:
    """Create and start the configured trackers; None when there are none."""
    paths = [f"trackers[{i}]" for i in range(len(resolved.config.trackers))]
    if not paths:
        return None
    components = {slot: {"name": c.name, "provider": c.provider, "version": c.version}
                  for slot, c in resolved.components.items() if not slot.startswith("trackers[")}
    started: list[tuple[str, Any]] = []
    for path in paths:
        tracker = resolved.create(path, plugins, run_dir=run_dir)
        try:
            tracker.start(run_name=run_dir.name, run_dir=run_dir, config=resolved.raw, components=components)
        except Exception as exc:
            for _, done in started:
                done.finish("failed")
            name = resolved.components[path].name
            raise ScaleCUAError(f"{path} ({name}) cannot start: {type(exc).__name__}: {exc}. Fix its options, "
                                f"or remove it from trackers") from exc
        started.append((path, tracker))
    hub = TrackerHub(started, plugins, images_every=resolved.config.run.log_images_every)
    plugins.register(hub, name=HUB_NAME)
    log.info("trackers started", trackers=[resolved.components[p].name for p in paths])
    return hub
