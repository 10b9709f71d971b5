"""Screen recordings of one X display with ffmpeg's ``x11grab``: what OSWorld's ``/start_recording`` and
``/end_recording`` run, one recording at a time.

ffmpeg runs as the probe's own user and writes into a private temporary directory, so the desktop's user
(the agent's shell) can neither read nor replace a recording. It is stopped with SIGINT, which makes it
finish the MP4 (an MP4 cut off by SIGKILL has no index and does not play).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping

#: Debian's package that provides the ``ffmpeg`` program (scripts/install.sh installs it)
FFMPEG_PACKAGE = "ffmpeg"
#: frames per second; OSWorld records at 30, but a desktop agent changes the screen a few times a second at
#: most, and each desktop's recording costs CPU beside its applications
FRAME_RATE = 10
#: how long ffmpeg may take to open the display and write its first frame before start reports success
START_WAIT_S = 5.0
#: how long a SIGINT-ed ffmpeg may take to finish the file (OSWorld's server waits as long) before SIGKILL
STOP_WAIT_S = 15.0


class RecordingError(Exception):
    """A recording that cannot start or end; ``status`` is the HTTP status OSWorld's server answers with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def ffmpeg_argv(ffmpeg: str, display: str, size: tuple[int, int], output: str) -> list[str]:
    width, height = size
    return [
        ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
        "-f", "x11grab", "-draw_mouse", "1", "-framerate", str(FRAME_RATE), "-video_size", f"{width}x{height}",
        "-i", display,
        # H.264 in 4:2:0 with even dimensions: what browsers (the episode viewer's <video>) play
        "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        output,
    ]


class ScreenRecorder:
    """Records ``display`` into an MP4; ``env`` is the environment ffmpeg runs with (its PATH finds ffmpeg)."""

    def __init__(self, display: str, env: Mapping[str, str]):
        self.display = display
        self.env = dict(env)
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: str | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def ffmpeg(self) -> str:
        found = shutil.which("ffmpeg", path=self.env.get("PATH", os.defpath))
        if found is None:
            raise RecordingError(500, f"cannot record the screen: ffmpeg is not installed (install Debian's "
                                      f"'{FFMPEG_PACKAGE}' package: apt-get install {FFMPEG_PACKAGE})")
        return found

    def start(self, size: tuple[int, int]) -> None:
        """Start recording the whole screen (``size``: its width and height); returns once ffmpeg writes frames."""
        with self._lock:
            if self.running:
                raise RecordingError(400, "Recording is already in progress.")
            ffmpeg = self.ffmpeg()
            self._discard()
            self._workdir = tempfile.mkdtemp(prefix="scalecua-recording-")
            with open(self._stderr_path, "wb") as stderr:
                self._process = subprocess.Popen(
                    ffmpeg_argv(ffmpeg, self.display, size, self._output_path), env=self.env,
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                    start_new_session=True,  # a signal meant for the probe's process group does not cut it short
                )
            deadline = time.monotonic() + START_WAIT_S
            while time.monotonic() < deadline and self._process.poll() is None and not self._has_frames():
                time.sleep(0.05)
            if self._process.poll() is not None:
                reason = self._stderr_tail()
                self._process = None
                self._discard()
                raise RecordingError(500, "Failed to start recording. ffmpeg terminated unexpectedly. "
                                          f"Error: {reason}")

    def stop(self) -> bytes:
        """End the recording and return the MP4's bytes."""
        with self._lock:
            process, self._process = self._process, None
            if process is None or process.poll() is not None:
                self._discard()
                raise RecordingError(400, "No recording in progress to stop.")
            try:
                process.send_signal(signal.SIGINT)
                process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                reason = self._stderr_tail()
                self._discard()
                raise RecordingError(500, "Recording process was unresponsive and had to be killed. "
                                          f"Stderr: {reason}") from None
            try:
                if not self._has_frames():
                    raise RecordingError(500, "Recording failed. The output file is missing or empty. "
                                              f"ffmpeg stderr: {self._stderr_tail()}")
                with open(self._output_path, "rb") as handle:
                    return handle.read()
            finally:
                self._discard()

    def close(self) -> None:
        """Stop a recording nobody ended (the probe is shutting down) and remove its files."""
        with self._lock:
            process, self._process = self._process, None
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
            self._discard()

    @property
    def _output_path(self) -> str:
        assert self._workdir is not None
        return os.path.join(self._workdir, "recording.mp4")

    @property
    def _stderr_path(self) -> str:
        assert self._workdir is not None
        return os.path.join(self._workdir, "ffmpeg.log")

    def _has_frames(self) -> bool:
        try:
            return os.path.getsize(self._output_path) > 0
        except OSError:
            return False

    def _stderr_tail(self, limit: int = 2000) -> str:
        try:
            with open(self._stderr_path, "rb") as handle:
                return handle.read().decode("utf-8", "replace").strip()[-limit:]
        except OSError:
            return ""

    def _discard(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
