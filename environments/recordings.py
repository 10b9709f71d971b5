"""Screen recordings of a desktop's episodes, made by its probe (``/start_recording``, ``/end_recording``).

A backend with recording on starts one at the end of each reset and says in the first observation's
``info["recording"]`` where the MP4 will be; the episode runner puts that path into the trajectory's ``recording``
(the episode viewer plays it). The recording ends when the desktop is released (after judging, as OSWorld's
harness records) or reset again, and is saved then. It is a debugging aid: one that fails is a warning and the
episode goes on without it (its record then names no recording).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from environments.client import EnvironmentClient, ProbeError

log = structlog.get_logger(__name__)


class EpisodeRecording:
    """The recordings of one desktop (``name``: its environment id), saved as ``<directory>/<name>-NNNN.mp4``."""

    def __init__(self, directory: Path, name: str):
        self.directory = directory
        self.name = name
        self.started = 0
        #: where the running recording goes once it ends (None: none runs)
        self.path: Path | None = None

    async def start(self, client: EnvironmentClient) -> Path | None:
        """Start recording; returns where the MP4 will be once :meth:`finish` ran (None: it did not start)."""
        try:
            await client.start_recording()
        except ProbeError as exc:
            log.warning("the screen recording did not start; the episode goes on without one", desktop=self.name,
                        error=str(exc))
            return None
        self.started += 1
        self.path = self.directory / f"{self.name}-{self.started:04d}.mp4"
        return self.path

    async def finish(self, client: EnvironmentClient) -> None:
        """End the running recording and save it where :meth:`start` said (a failure leaves no file there)."""
        path, self.path = self.path, None
        if path is None:
            return
        try:
            video = await client.end_recording()
        except ProbeError as exc:  # the desktop died too, or ffmpeg did
            log.warning("the screen recording could not be ended", desktop=self.name, error=str(exc))
            return
        await asyncio.to_thread(_save, path, video)


def _save(path: Path, video: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    partial.write_bytes(video)
    partial.replace(path)
