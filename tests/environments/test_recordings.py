"""Screen recordings: the probe's ``/start_recording`` and ``/end_recording`` driven by OSWorld's own, unmodified
``PythonController`` on a real Xvfb desktop (the MP4 it saves is read back with ffprobe and decoded with ffmpeg);
the answer where ffmpeg is not installed; and ``record_video`` on the local-desktop backend, through the real
episode runner (the first observation says where the recording goes; the release saves it) into the rollout
records and the episode viewer."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from core.interfaces import Generation, GenerationRequest, JudgeServices, RolloutEngine
from core.runtime.episode import EpisodeDeps, EpisodeSettings, run_episode
from core.runtime.episodes import write_episode_pages
from core.runtime.metrics import write_trajectories
from core.types import Task, Trajectory
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions
from environments.probe.desktop import Desktop
from environments.probe.routes import ROUTES
from environments.probe.server import ProbeHTTPServer, serve_in_thread
from environments.probe.state import ProbeState
from tests.environments.desktop_fixtures import DesktopSession, osworld_desktop, tagged  # noqa: F401 (fixture)

PythonController = pytest.importorskip("desktop_env.controllers.python").PythonController

pytestmark = pytest.mark.desktop
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None,
                                  reason="ffmpeg is not installed (Debian package ffmpeg; bash scripts/install.sh)")


def video_stream(path: Path) -> dict[str, Any]:
    """What ffprobe reads of the file's video stream, its frames counted by decoding them."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                            "stream=codec_name,width,height,pix_fmt,nb_read_frames", "-of", "json", str(path)],
                           capture_output=True, text=True, timeout=60, check=False)
    assert probe.returncode == 0, probe.stderr
    return json.loads(probe.stdout)["streams"][0]


def decodes_cleanly(path: Path) -> bool:
    decoded = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "null", "-"], capture_output=True,
                             text=True, timeout=60, check=False)
    return decoded.returncode == 0 and not decoded.stderr.strip()


def post(port: int, path: str) -> requests.Response:
    return requests.post(f"http://127.0.0.1:{port}{path}", timeout=60)


@needs_ffmpeg
def test_a_recording_made_through_osworlds_client_is_a_playable_mp4(osworld_desktop: DesktopSession,
                                                                    tmp_path: Path) -> None:
    python = PythonController("127.0.0.1", osworld_desktop.port)
    python.retry_interval = 0
    nothing = post(osworld_desktop.port, "/end_recording")
    assert nothing.status_code == 400 and nothing.json()["message"] == "No recording in progress to stop."

    python.start_recording()
    again = post(osworld_desktop.port, "/start_recording")
    assert again.status_code == 400 and again.json()["message"] == "Recording is already in progress."
    python.execute_python_command("pyautogui.moveTo(100, 100); pyautogui.moveTo(900, 600, duration=0.5)")
    time.sleep(1.0)
    saved = tmp_path / "recording.mp4"
    python.end_recording(str(saved))

    assert saved.stat().st_size > 0
    stream = video_stream(saved)
    assert (stream["codec_name"], stream["width"], stream["height"], stream["pix_fmt"]) == ("h264", 1280, 800,
                                                                                             "yuv420p"), stream
    assert int(stream["nb_read_frames"]) >= 5, stream  # ~1.5 s at 10 frames a second
    assert decodes_cleanly(saved)
    assert not any(b"ffmpeg" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in tagged(osworld_desktop.env_id))
    assert post(osworld_desktop.port, "/end_recording").status_code == 400  # one recording, handed over once


def test_without_ffmpeg_a_recording_is_refused_naming_the_package(tmp_path: Path) -> None:
    no_programs = tmp_path / "bin"
    no_programs.mkdir()
    # no display is touched: the missing program is reported first
    state = ProbeState(desktop=Desktop(":9999"), home=str(tmp_path), env={"PATH": str(no_programs)})
    server = ProbeHTTPServer(("127.0.0.1", 0), ROUTES, state, token=None)
    serve_in_thread(server)
    try:
        refused = post(server.server_address[1], "/start_recording")
        assert refused.status_code == 500, refused.text
        body = refused.json()
        assert body["status"] == "error" and body["error"] == body["message"]
        assert "ffmpeg is not installed" in body["error"] and "apt-get install ffmpeg" in body["error"]
        assert post(server.server_address[1], "/end_recording").status_code == 400
    finally:
        server.shutdown()
        server.server_close()


class ScriptedPolicy(RolloutEngine):
    """Answers with the given tool calls in turn (no model weights)."""

    weight_version = None

    def __init__(self, renderer: Any, actions: list[dict[str, Any]]) -> None:
        self.renderer = renderer
        self.texts = [f'<tool_call>\n{json.dumps({"name": "computer_use", "arguments": a})}\n</tool_call>'
                      for a in actions]

    async def generate(self, request: GenerationRequest) -> Generation:
        text = self.texts.pop(0)
        ids = [*self.renderer.encode_text(text), self.renderer.stop_ids[0]]
        return Generation(ids=ids, logprobs=[0.0] * len(ids), text=text, finish_reason="stop")

    def begin_weight_update(self, version: int) -> None:
        raise TypeError("scripted")

    def update_weights(self, weights: Any) -> None:
        raise TypeError("scripted")

    def commit_weight_update(self) -> None:
        raise TypeError("scripted")

    def abort_weight_update(self) -> None:
        raise TypeError("scripted")


@needs_ffmpeg
def test_a_recorded_episode_is_in_its_record_and_plays_in_the_viewer(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    renderer = QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0)).renderer()
    run_dir = tmp_path / "run"
    pool = LocalDesktopBackend(LocalDesktopOptions(work_dir=str(tmp_path / "envs"), settle_s=0.1, desktop_user=None,
                                                   record_video=True), run_dir=run_dir)
    task = Task.model_validate({"id": "t-rec", "instruction": "click", "config": [],
                                "evaluator": {"func": "infeasible"}})
    policy = ScriptedPolicy(renderer, [{"action": "mouse_move", "coordinate": [200, 200]},
                                       {"action": "left_click", "coordinate": [800, 700]}, {"action": "done"}])
    deps = EpisodeDeps(backend=pool, engine=policy, renderer=renderer,
                       segmenter=plugins.registry("segmenter").create("sliding-window", {}),
                       judge=JudgeServices.of(plugins), settings=EpisodeSettings(max_turns=4, max_new_tokens=64))

    async def body() -> tuple[Any, list[Any], str]:
        try:
            traj = await run_episode(task, deps, trajectory_id="r0", group_id="g")  # its release ends the recording
            env = await pool.acquire()  # the same desktop, idle again
            # reset twice without a release between (as the environment check does): each recording is kept
            firsts = [await env.reset(task), await env.reset(task)]
            await pool.release(env)
            return traj, firsts, env.env_id
        finally:
            await pool.close()

    traj, firsts, env_id = asyncio.run(body())
    assert traj.status.value == "completed", traj.status_reason
    recording = Path(traj.metadata["recording"])
    assert recording.parent == (run_dir / "recordings").resolve() and recording.name == f"{env_id}-0001.mp4"
    assert int(video_stream(recording)["nb_read_frames"]) > 0 and decodes_cleanly(recording)
    assert [Path(o.info["recording"]).name for o in firsts] == [f"{env_id}-0002.mp4", f"{env_id}-0003.mp4"]
    assert sorted(p.name for p in recording.parent.iterdir()) == [f"{env_id}-000{n}.mp4" for n in (1, 2, 3)]

    lost = Trajectory("r1", "t-rec", "g", metadata={"recording": str(recording.with_name("never-saved.mp4"))})
    records = write_trajectories(run_dir / "rollouts" / "iter_000001.jsonl", [traj, lost])
    assert [json.loads(line)["recording"] for line in records.read_text().splitlines()] == [
        f"../recordings/{recording.name}", None]  # a recording that was never saved is not linked
    page = write_episode_pages(run_dir).with_name("iter_000001.html")
    source = re.search(r'<video [^>]*src="([^"]+)"', page.read_text()).group(1)
    assert (page.parent / source).resolve() == recording  # the page's <video> plays the file
