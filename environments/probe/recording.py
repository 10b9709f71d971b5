"""OSWorld's screen-recording endpoints: ``POST /start_recording`` and ``POST /end_recording``.

Start answers ``{status: success, message}`` once ffmpeg writes frames; end answers the MP4's bytes (an
attachment, as OSWorld's ``send_file``), which OSWorld's ``PythonController.end_recording`` saves. Failures
answer OSWorld's status codes (400: none in progress / already recording; 500: ffmpeg failed or is not
installed) with ``{status: error, message, error}``. Deliberate differences: the recording is 10 frames a second
of the probe's own display in browser-playable H.264 (see :mod:`environments.probe.recorder`), and one larger
than ``--max-served-bytes`` is a 413.
"""

from __future__ import annotations

from typing import Any

from environments.probe.recorder import RecordingError
from environments.probe.server import HTTPError, Request, Response, error_body, json_response
from environments.probe.state import ProbeState


def _failure(exc: RecordingError) -> HTTPError:
    return HTTPError(exc.status, exc.message, error_body(exc.message))


def start_recording(state: ProbeState, req: Request) -> Response:
    try:
        state.recorder.ffmpeg()  # a missing program is the first thing to say, before the display is asked
    except RecordingError as exc:
        raise _failure(exc) from None
    try:
        size = state.desktop.screen_size()
    except Exception as exc:  # mss / Xlib fail in many ways once the X server is gone
        raise HTTPError(503, f"the display cannot be captured: {exc!r}") from None
    try:
        state.recorder.start(size)
    except RecordingError as exc:
        raise _failure(exc) from None
    return json_response({"status": "success", "message": "Started recording successfully."})


def end_recording(state: ProbeState, req: Request) -> Response:
    try:
        video = state.recorder.stop()
    except RecordingError as exc:
        raise _failure(exc) from None
    if len(video) > state.max_served_bytes:
        raise HTTPError(413, f"the recording has {len(video)} bytes, more than the probe hands over "
                             f"({state.max_served_bytes}; see --max-served-bytes)")
    return Response(video, content_type="video/mp4",
                    headers={"Content-Disposition": 'attachment; filename="recording.mp4"'})


ROUTES: dict[tuple[str, str], Any] = {
    ("POST", "/start_recording"): start_recording,
    ("POST", "/end_recording"): end_recording,
}
