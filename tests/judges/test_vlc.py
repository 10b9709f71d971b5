"""VLC's judges (:mod:`environments.judges.vlc`).

* Conformance: our metrics and OSWorld's own (``desktop_env/evaluators/metrics/vlc.py``, loaded with its
  audio/video imports as stubs: none of the compared functions calls them) on the same generated ``vlcrc``
  files, window sizes and VLC ``status.xml`` answers; every case must score the same, and the cases include
  ones that score 1 and ones that score 0.
* Strict errors and missing files: hand-derived (upstream raises KeyError / FileNotFoundError there).
* On a real desktop (Xvfb + openbox + the probe): ``vm_window_size`` measures real X windows (VLC is not
  installed here, so ``xmessage`` and ``xterm`` play it under the instance name ``vlc``) and OSWorld's task
  ``8d9fd4e2`` evaluator (``is_vlc_fullscreen`` of window and screen size) judges a fullscreen and a small
  window; ``vlc_playing_info`` fetches ``status.xml`` from an HTTP server on loopback that, like VLC's, wants
  the password ``password``.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import shutil
import socket
import threading
import time
import types
from pathlib import Path
from typing import Any, Iterator

import pytest

from environments.judges import vlc
from tests.judges.upstream import metrics_module

STUBS = ("acoustid", "cv2", "imagehash", "librosa", "fastdtw")


@pytest.fixture(scope="module")
def upstream() -> Any:
    return metrics_module("vlc", STUBS)


def vlcrc(tmp: Path, name: str, *settings: str, layout: str = "vlc") -> str:
    """A vlcrc in VLC's own layout (``vlc``; ``crlf``: with Windows line ends): a section header, comment lines,
    the commented-out defaults, then ``settings`` (uncommented lines as the preferences dialog writes them);
    ``bare``: only ``settings``, so VLC's defaults apply."""
    lines = [] if layout == "bare" else [
        "###", "###  vlc 3.0.16", "###", "", "[qt] # Qt interface", "",
        "# Display background cone or art (boolean)", "#qt-bgcone=1", "",
        "# Maximum Volume displayed (integer)", "#qt-max-volume=125", "",
        "# Start in minimal view (without menus) (boolean)", "#qt-minimal-view=0", "",
        "# Define the colors of the volume slider (string)", f"#qt-slider-colours={vlc.SLIDER_DEFAULT}",
        "", "[core] # core program", "",
        "# Record directory (string)", "#input-record-path=", "",
        "# Play/Pause (string)", "#global-key-play-pause=", "#key-play-pause=Space", "",
        "# One instance when started from file (boolean)", "#one-instance-when-started-from-file=1", "",
    ]
    path = tmp / name
    path.write_bytes(("\r\n" if layout == "crlf" else "\n").join([*lines, *settings]).encode())
    return str(path)


DESKTOP = {"recording_file_path": "/home/user/Desktop"}
CONFIG_CASES: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    ("check_qt_bgcone", (), {"expected_qt_bgcone": 1}),  # commented default counts: "1"
    ("check_qt_bgcone", (), {"expected_qt_bgcone": 0}),
    ("check_qt_bgcone", ("qt-bgcone=0",), {"expected_qt_bgcone": 0}),
    ("check_qt_bgcone", ("qt-bgcone=0",), {"expected_qt_bgcone": "0"}),
    ("check_qt_bgcone", ("qt-bgcone=0",), {"expected_qt_bgcone": 1}),
    ("check_qt_bgcone", ("qt-bgcone = 0 ",), {"expected_qt_bgcone": 0}),  # no '=' directly after the key
    ("check_qt_bgcone", ("qt-bgcone=1",), {"expected_qt_bgcone": True}),  # True compares as "True"
    ("check_qt_max_volume", (), {"expected_qt_max_volume": 125}),
    ("check_qt_max_volume", ("qt-max-volume=200",), {"expected_qt_max_volume": 200}),
    ("check_qt_max_volume", ("qt-max-volume=150",), {"expected_qt_max_volume": 200}),
    ("check_qt_max_volume", ("qt-max-volume=200",), {"expected_qt_max_volume": 200.0}),  # a float never equals
    ("check_qt_max_volume", ("qt-max-volume=200.0",), {"expected_qt_max_volume": 200.0}),  # not even as text
    ("check_qt_minimal_view", (), {"expected_qt_minimal_view": 1}),
    ("check_qt_minimal_view", ("qt-minimal-view=1",), {"expected_qt_minimal_view": 1}),
    ("check_qt_minimal_view", ("qt-minimal-view=1", "#qt-minimal-view=0"), {"expected_qt_minimal_view": 1}),
    ("check_one_instance_when_started_from_file", (), {"expected_one_instance_when_started_from_file": 0}),
    ("check_one_instance_when_started_from_file", ("one-instance-when-started-from-file=0",),
     {"expected_one_instance_when_started_from_file": 0}),
    ("check_one_instance_when_started_from_file", (), {"expected_one_instance_when_started_from_file": "1"}),
    ("check_global_key_play_pause", (), {"expected_global_key_play_pause": 1}),
    ("check_global_key_play_pause", (), {"expected_global_key_play_pause": 0}),
    ("check_global_key_play_pause", ("global-key-play-pause=Space",), {"expected_global_key_play_pause": 1}),
    ("check_global_key_play_pause", ("global-key-play-pause=  ",), {"expected_global_key_play_pause": 1}),
    ("check_qt_slider_colours", (), {"type": "blackish"}),
    ("check_qt_slider_colours", ("qt-slider-colours=0;0;0;20;20;20;99;99;99;1;2;3",), {"type": "blackish"}),
    ("check_qt_slider_colours", ("qt-slider-colours=0;0;0;20;20;20;99;100;99;1;2;3",), {"type": "blackish"}),
    ("check_qt_slider_colours", ("qt-slider-colours=0;0;0;20;20;20;99;99;99;1;2;300",), {"type": "blackish"}),
    ("check_qt_slider_colours", ("qt-slider-colours=0;0;0;20;20",), {"type": "blackish"}),  # last triple dropped
    ("check_qt_slider_colours", ("qt-slider-colours=0;0;x",), {"type": "blackish"}),
    ("check_qt_slider_colours", ("qt-slider-colours=",), {"type": "blackish"}),
    ("check_qt_slider_colours", ("qt-slider-colours=1;2;3",), {"type": "match", "expected_qt_slider_colours": "1;2;3"}),
    ("check_qt_slider_colours", (), {"type": "match", "expected_qt_slider_colours": vlc.SLIDER_DEFAULT}),
    ("check_qt_slider_colours", (), {"type": "match", "expected_qt_slider_colours": "1;2;3"}),
    ("is_vlc_recordings_folder", (), DESKTOP),
    ("is_vlc_recordings_folder", ("input-record-path=/home/user/Desktop",), DESKTOP),
    ("is_vlc_recordings_folder", ("input-record-path=/home/user/Desktop ",), DESKTOP),
    ("is_vlc_recordings_folder", ("input-record-path=/home/user/Videos",), DESKTOP),
    ("is_vlc_recordings_folder", ("input-record-path=/tmp", "input-record-path=/home/user/Desktop"),
     DESKTOP),  # the first uncommented line decides
    ("is_vlc_recordings_folder", ("  # input-record-path=/home/user/Desktop",),
     DESKTOP),  # only lines *starting* with '#' are comments
]


@pytest.mark.parametrize("layout", ["vlc", "crlf", "bare"])
@pytest.mark.parametrize("index", range(len(CONFIG_CASES)))
def test_config_metrics_match_upstream(upstream: Any, tmp_path: Path, index: int, layout: str) -> None:
    name, settings, rule = CONFIG_CASES[index]
    path = vlcrc(tmp_path, "vlcrc", *settings, layout=layout)
    ours, theirs = getattr(vlc, name)(path, rule), getattr(upstream, name)(path, rule)
    assert ours == float(theirs), (name, settings, rule)


def test_config_cases_score_both_ways(tmp_path: Path) -> None:
    scores = {}
    for name, settings, rule in CONFIG_CASES:
        for layout in ("vlc", "bare"):
            path = vlcrc(tmp_path, "vlcrc", *settings, layout=layout)
            scores.setdefault(name, set()).add(getattr(vlc, name)(path, rule))
    assert all(found == {0.0, 1.0} for found in scores.values()), scores


SIZES = [({"width": 1920, "height": 1080}, {"width": 1920, "height": 1080}),
         ({"width": 1920, "height": 1080}, {"width": 1920, "height": 1053}),
         ({"width": 800, "height": 600}, {"width": 1280, "height": 800}),
         ({"width": 1280, "height": 800}, {"width": 1280.0, "height": 800}),
         (None, {"width": 1, "height": 1}), ({"width": 1, "height": 1}, None)]


@pytest.mark.parametrize("window, screen", SIZES)
def test_fullscreen_matches_upstream(upstream: Any, window: Any, screen: Any) -> None:
    assert vlc.is_vlc_fullscreen(screen, window) == float(upstream.is_vlc_fullscreen(screen, window))
    assert vlc.is_vlc_fullscreen(window, screen) == vlc.is_vlc_fullscreen(screen, window)


def status_xml(state: str, meta: dict[str, str], stream: dict[str, str] | None = None) -> str:
    infos = "".join(f"<info name='{k}'>{v}</info>" for k, v in meta.items())
    streams = "".join(f"<info name='{k}'>{v}</info>" for k, v in (stream or {}).items())
    return (f'<?xml version="1.0" encoding="utf-8" standalone="yes" ?>\n<root><fullscreen>false</fullscreen>'
            f"<volume>256</volume><state>{state}</state><information><category name=\"meta\">{infos}</category>"
            f"<category name=\"Stream 0\">{streams}</category></information></root>")


RICK = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"
HLS = "https://devstreaming-cdn.apple.com/videos/streaming/examples/img_bipbop_adv_example_fmp4/master.m3u8"
PLAYING_CASES = [
    (status_xml("playing", {"filename": RICK}), {"type": "file_name", "file_name": RICK}),
    (status_xml("paused", {"filename": RICK}), {"type": "file_name", "file_name": RICK}),
    (status_xml("playing", {"filename": "other.mp4"}), {"type": "file_name", "file_name": RICK}),
    (status_xml("playing", {"uri": f"file:///home/user/Desktop/{RICK}"}), {"type": "file_name", "file_name": RICK}),
    (status_xml("playing", {"title": "Rick", "filename": RICK}), {"type": "file_name", "file_name": RICK}),
    (status_xml("playing", {"artist": "Rick"}), {"type": "file_name", "file_name": RICK}),
    (status_xml("playing", {"url": HLS}), {"type": "url", "url": HLS}),
    (status_xml("playing", {"filename": "master.m3u8"}), {"type": "url", "url": HLS}),
    (status_xml("playing", {"url": "https://devstreaming-cdn.apple.com/x/img_bipbop_adv_example_fmp4/master.m3u8?a=1"}),
     {"type": "url", "url": HLS}),
    (status_xml("playing", {"url": "https://devstreaming-cdn.apple.com/videos/streaming/examples/img_bipbop_adv_"
                                   "example_fmp4/master.m3u8/extra"}), {"type": "url", "url": HLS}),
    (status_xml("playing", {"url": "https://example.org/master.m3u8.bak"}), {"type": "url", "url": HLS}),
    (status_xml("playing", {"url": "https://example.org/videos/streaming/examples/img_bipbop_adv_example_fmp4/"
                                   "master.m3u8"}), {"type": "url", "url": HLS}),  # same path, other host
    (status_xml("playing", {}, {"Codec": "master.m3u8"}), {"type": "url", "url": HLS}),
    (status_xml("playing", {}, {"Codec": "H264"}), {"type": "url", "url": HLS}),
    (status_xml("stopped", {"url": HLS}), {"type": "url", "url": HLS}),
]


@pytest.mark.parametrize("index", range(len(PLAYING_CASES)))
def test_playing_matches_upstream(upstream: Any, tmp_path: Path, index: int) -> None:
    text, rule = PLAYING_CASES[index]
    path = tmp_path / "status.xml"
    path.write_text(text, encoding="utf-8")
    assert vlc.is_vlc_playing(str(path), rule) == float(upstream.is_vlc_playing(str(path), rule)), (text, rule)


def test_playing_cases_score_both_ways(tmp_path: Path) -> None:
    scores = set()
    for text, rule in PLAYING_CASES:
        (tmp_path / "status.xml").write_text(text, encoding="utf-8")
        scores.add(vlc.is_vlc_playing(str(tmp_path / "status.xml"), rule))
    assert scores == {0.0, 1.0}


def test_bad_rules_are_errors_and_missing_files_score_zero(tmp_path: Path) -> None:
    path = vlcrc(tmp_path, "vlcrc", "qt-bgcone=0")
    for call, needs in [(lambda: vlc.check_qt_bgcone(path, {"expected": 0}), "expected_qt_bgcone"),
                        (lambda: vlc.check_qt_max_volume(path, None), "expected_qt_max_volume"),
                        (lambda: vlc.is_vlc_recordings_folder(path, {}), "recording_file_path"),
                        (lambda: vlc.check_qt_slider_colours(path, {"type": "dark"}), "blackish"),
                        (lambda: vlc.check_qt_slider_colours(path, {"type": "match"}), "expected_qt_slider_colours"),
                        (lambda: vlc.is_vlc_playing(path, {"type": "url", "file_name": "x"}), "'url'")]:
        with pytest.raises(ValueError, match=needs):
            call()
    missing = str(tmp_path / "absent")
    assert vlc.check_qt_bgcone(missing, {"expected_qt_bgcone": 1}) == 0.0  # the default would have matched
    assert vlc.check_qt_slider_colours(None, {"type": "blackish"}) == 0.0
    assert vlc.is_vlc_recordings_folder(missing, {"recording_file_path": ""}) == 0.0
    assert vlc.is_vlc_playing(missing, {"type": "file_name", "file_name": ""}) == 0.0
    (tmp_path / "broken.xml").write_text("<root><state>playing</state>")
    assert vlc.is_vlc_playing(str(tmp_path / "broken.xml"), {"type": "file_name", "file_name": ""}) == 0.0


# -- on a real desktop ------------------------------------------------------------------------------------

PASSWORD_HEADER = "Basic " + base64.b64encode(b":password").decode()


@pytest.fixture()
def vlc_http() -> Iterator[int]:
    """A loopback server answering like VLC's HTTP interface: 401 without VLC's password."""
    body = status_xml("playing", {"filename": RICK}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.headers.get("Authorization") != PASSWORD_HEADER:
                self.send_response(401)
                self.end_headers()
                return
            found = self.path == "/requests/status.xml"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/xml")
            self.end_headers()
            self.wfile.write(body if found else b"")

        def log_message(self, *_: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.desktop
def test_window_size_and_playing_info_on_a_desktop(tmp_path: Path, vlc_http: int) -> None:
    from core.interfaces import JudgeServices
    from core.pluginmanager import load_plugins
    from core.types import JudgementStatus, Task
    from tests.environments.desktops import one_desktop

    assert shutil.which("xmessage") and shutil.which("xterm"), "scripts/install.sh installs x11-utils and xterm"
    judge = JudgeServices.of(load_plugins())
    assert all(name in judge.getters for name in ("vm_window_size", "vlc_playing_info"))
    assert all(name in judge.metrics for name in ("is_vlc_fullscreen", "is_vlc_playing"))
    wait = {"type": "execute", "parameters": {"command": ["xdotool", "search", "--sync", "--onlyvisible",
                                                          "--classname", "^vlc$"]}}

    def task(window: list[str]) -> Task:  # OSWorld's 8d9fd4e2 evaluator, our stand-in for VLC's window
        return Task.model_validate({
            "id": "vlc-fullscreen", "instruction": "test",
            "config": [{"type": "launch", "parameters": {"command": window}}, wait],
            "evaluator": {"func": "is_vlc_fullscreen", "expected": {"type": "vm_window_size", "app_class_name": "vlc"},
                          "result": {"type": "vm_screen_size"}},
        })

    small = task(["xmessage", "-name", "vlc", "-geometry", "400x250+30+40", "a small window"])
    full = task(["xterm", "-name", "vlc", "-fullscreen"])

    async def body() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with one_desktop(tmp_path, width=1024, height=768) as (pool, env):
            view = types.SimpleNamespace(client=env.client, cache_dir=str(tmp_path))
            await env.reset(small)
            seen["small"] = await vlc.get_vm_window_size(view, {"app_class_name": "VLC"})
            seen["xmessage"] = await vlc.get_vm_window_size(view, {"app_class_name": "xmessage"})
            seen["absent"] = await vlc.get_vm_window_size(view, {"app_class_name": "vl"})
            seen["small_score"] = await pool.evaluate(env, small, judge=judge, last_action=None)
            await env.reset(full)
            deadline = time.monotonic() + 20  # openbox makes the window fullscreen just after it maps
            while time.monotonic() < deadline:
                seen["full"] = await vlc.get_vm_window_size(view, {"app_class_name": "vlc"})
                if seen["full"] == {"width": 1024, "height": 768}:
                    break
                await asyncio.sleep(0.2)
            seen["full_score"] = await pool.evaluate(env, full, judge=judge, last_action=None)
            seen["status"] = await vlc.get_vlc_playing_info(view, {"dest": "status.xml", "port": vlc_http})
            seen["closed"] = await vlc.get_vlc_playing_info(view, {"dest": "closed.xml", "port": free_port()})
        return seen

    seen = asyncio.run(body())
    assert seen["small"] == {"width": 400, "height": 250}
    assert seen["xmessage"] == seen["small"]  # the class (Xmessage) matches as well as the instance
    assert seen["absent"] is None  # whole names only
    assert (seen["small_score"].status, seen["small_score"].score) == (JudgementStatus.OK, 0.0)
    assert seen["full"] == {"width": 1024, "height": 768}
    assert (seen["full_score"].status, seen["full_score"].score) == (JudgementStatus.OK, 1.0)
    assert seen["status"] == str(tmp_path / "status.xml")
    assert vlc.is_vlc_playing(seen["status"], {"type": "file_name", "file_name": RICK}) == 1.0
    assert seen["closed"] is None and not (tmp_path / "closed.xml").exists()
