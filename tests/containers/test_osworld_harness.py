"""OSWorld's own harness, unmodified, on our container desktop (environments/containers/osworld_harness.py).

OSWorld's ``DesktopEnv(provider_name="docker")`` (the published ``desktop-env``) starts our ``osworld`` image, tagged
as its docker provider's image, through podman's Docker API; its ``PythonController`` and ``SetupController`` drive
the probe, and its getters and metrics judge. ``desktop_env.desktop_env`` imports every metric module at once; the
five third-party modules of those that do not install here (easyocr needs torchvision; borb, acoustid, bs4,
pdfplumber) are stubs that raise if called (tests/judges/upstream.py), which the judged tasks never do. The loopback
web pages Chrome opens are files on the desktop: the container has no route to this host's loopback.

Where the VM differs, it is written here: no gnome-terminal (xterm's own log answers ``/terminal``), no VNC on the
published port 8006.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from PIL import Image

from environments.containers import osworld_harness
from environments.containers.podman_service import PodmanService, fitted_ulimits_conf
from tests.judges import upstream

for _needed in ("gymnasium", "playwright.sync_api", "pydrive.drive", "requests_toolbelt", "desktop_env"):
    pytest.importorskip(_needed, reason="OSWorld's DesktopEnv needs the dev extra (pip install -e '.[dev]')")

pytestmark = [pytest.mark.containers, pytest.mark.desktop]

#: every third-party module OSWorld's metrics, getters and controllers import; only the absent ones are stubbed
UPSTREAM_IMPORTS = ("PIL", "PyPDF2", "acoustid", "borb", "bs4", "cv2", "docx", "dotenv", "easyocr", "fastdtw", "fitz",
                    "formulas", "imagehash", "librosa", "lxml", "mutagen", "odf", "openpyxl", "pandas", "pdfplumber",
                    "pptx", "pypdf", "pytz", "rapidfuzz", "scipy", "skimage", "tldextract", "xmltodict", "yaml")

SORT_TASK: dict[str, Any] = {
    "id": "harness-sort-unique",
    "instruction": "Write the distinct lines of ~/Data/in.txt, sorted, to ~/Data/out.txt.",
    "config": [
        {"type": "execute", "parameters": {"command": [
            "python", "-c", "import pyautogui; import time; pyautogui.click({SCREEN_WIDTH_HALF}, {SCREEN_HEIGHT_HALF}); "
                            "time.sleep(0.5);"]}},
        {"type": "command", "parameters": {"command": "mkdir -p /home/user/Data && printf 'pear\\napple\\npear\\n' > "
                                                      "/home/user/Data/in.txt", "shell": "true"}},
        {"type": "launch", "parameters": {"command": ["xterm", "-T", "work"]}},
        {"type": "execute_with_verification", "parameters": {
            "command": "true", "shell": True, "verification": {"window_exists": "work"}, "max_wait_time": 60,
            "check_interval": 0.5}},
        {"type": "activate_window", "parameters": {"window_name": "work"}},
    ],
    "evaluator": {
        "func": "check_include_exclude",
        "result": {"type": "vm_command_line", "command": "cat /home/user/Data/out.txt | tr '\\n' ,", "shell": True},
        "expected": {"type": "rule", "rules": {"include": ["apple,pear,"], "exclude": ["pear,pear"]}},
    },
}


@pytest.fixture(scope="module")
def docker_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """podman's Docker API with the containers' default rlimits fitted to this machine, as DOCKER_HOST."""
    osworld_harness.build_image(runtime="runc")
    scratch = tmp_path_factory.mktemp("engine")
    with PodmanService(scratch / "podman.sock", runtime="runc", config=fitted_ulimits_conf(scratch)) as service:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DOCKER_HOST", service.url)
            yield service.url


def harness_containers() -> list[str]:
    listing = subprocess.run(["podman", "ps", "-a", "--filter", f"ancestor={osworld_harness.OSWORLD_DOCKER_IMAGE}",
                              "--format", "{{.ID}}"], capture_output=True, text=True, check=True)
    return listing.stdout.split()


@pytest.fixture(scope="module")
def env(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """OSWorld's DesktopEnv as its run.py makes it, on our image; closing it removes the container."""
    before = set(harness_containers())
    DesktopEnv = upstream.desktop_env_module(UPSTREAM_IMPORTS).DesktopEnv
    scratch = tmp_path_factory.mktemp("harness")
    disk = scratch / "no-vm.qcow2"
    disk.touch()
    desktop = DesktopEnv(provider_name="docker", path_to_vm=str(disk), headless=True, action_space="pyautogui",
                         require_a11y_tree=False, cache_dir=str(scratch / "cache"))
    desktop.controller.retry_interval = 0
    try:
        yield desktop
    finally:
        desktop.close()
        assert set(harness_containers()) <= before  # the provider's stop removed it


def shell(env: Any, command: str) -> str:
    answer = requests.post(f"http://{env.vm_ip}:{env.server_port}/execute", json={"command": command, "shell": True},
                           timeout=60)
    return str(answer.json()["output"])


def wait_until(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.3)
    return bool(predicate())


def window_names(env: Any) -> list[str]:
    return shell(env, "for w in $(xdotool search --onlyvisible --name .); do xdotool getwindowname $w; done"
                 ).splitlines()


def test_a_task_resets_steps_and_is_judged_by_osworlds_own_harness(env: Any) -> None:
    observation = env.reset(task_config=SORT_TASK)
    assert Image.open(io.BytesIO(observation["screenshot"])).size == (1920, 1080)
    assert observation["instruction"] == SORT_TASK["instruction"]
    assert env.evaluate() == 0  # the untouched state
    # the agent's action: typed into the terminal the setup opened and focused
    env.step("pyautogui.typewrite('sort -u ~/Data/in.txt > ~/Data/out.txt\\n')", pause=0.5)
    assert wait_until(lambda: shell(env, "cat ~/Data/out.txt 2>/dev/null") == "apple\npear\n", 30)
    assert env.evaluate() == 1

    # the next episode reverts: the provider replaces the container, so the last episode's files are gone
    first = env.provider.container.id
    env.reset(task_config={**SORT_TASK, "id": "harness-infeasible", "config": [],
                           "evaluator": {"func": "infeasible"}})
    assert env.provider.container.id != first
    assert shell(env, "ls ~/Data 2>&1") != "in.txt\nout.txt\n"
    env.step("FAIL")
    assert env.evaluate() == 1  # an infeasible task is passed by saying so


def test_every_controller_call_answers_as_the_vms(env: Any) -> None:
    python = env.controller
    assert python.get_vm_platform() == "Linux"
    assert python.get_vm_screen_size() == {"width": 1920, "height": 1080}
    assert Image.open(io.BytesIO(python.get_screenshot())).size == (1920, 1080)
    assert python.execute_python_command("print(pyautogui.size())")["output"] == "Size(width=1920, height=1080)\n"
    assert python.run_python_script("print(6 * 7)")["output"] == "42\n"
    assert python.run_bash_script("echo $((6 * 7)) > ~/answer.txt; whoami")["output"].strip() == "user"
    assert python.get_file("/home/user/answer.txt") == b"42\n"
    assert python.get_file("/home/user/absent.txt") is None
    python.execute_action({"action_type": "MOVE_TO", "parameters": {"x": 300, "y": 200}})
    cursor = requests.get(f"http://{env.vm_ip}:{env.server_port}/cursor_position", timeout=30).json()
    assert cursor == [300, 200]
    tree = python.get_accessibility_tree()
    assert tree is not None and tree.lstrip().startswith("<")
    assert python.get_vm_desktop_path() == "/home/user/Desktop"
    shell(env, "mkdir -p ~/Desktop/notes && touch ~/Desktop/notes/a.txt")
    tree_of = python.get_vm_directory_tree("/home/user/Desktop")
    assert tree_of["name"] == "Desktop" and tree_of["children"][0]["name"] == "notes"

    env.setup_controller.setup([{"type": "launch", "parameters": {"command": ["xterm", "-T", "term"]}}])
    assert wait_until(lambda: "term" in window_names(env), 60)
    assert python.get_vm_window_size("XTerm")["width"] > 200
    env.setup_controller.setup([{"type": "activate_window", "parameters": {"window_name": "term"}}])
    python.execute_python_command("pyautogui.typewrite('echo harness-$((6*7))\\n')")
    # gnome-terminal's text is what OSWorld's server reads; ours is the focused xterm's own log
    assert wait_until(lambda: "harness-42" in (python.get_terminal_output() or ""), 30)
    env.setup_controller.setup([{"type": "close_window", "parameters": {"window_name": "term", "strict": True}}])

    python.start_recording()
    python.execute_action({"action_type": "MOVE_TO", "parameters": {"x": 900, "y": 500}})
    time.sleep(1.5)  # a recording of some length: ffmpeg writes frames at 10 per second
    video = Path(env.cache_dir_base) / "recording.mp4"
    python.end_recording(str(video))
    assert video.read_bytes()[4:8] == b"ftyp", "not an MP4"


def test_every_offline_setup_step_type(env: Any, tmp_path: Path) -> None:
    setup = env.setup_controller
    local = tmp_path / "notes.txt"
    local.write_text("uploaded\n")
    picture = io.BytesIO()
    Image.new("RGB", (64, 40), (30, 90, 200)).save(picture, format="PNG")
    (tmp_path / "wall.png").write_bytes(picture.getvalue())
    assert setup.setup([
        {"type": "execute", "parameters": {"command": "echo {CLIENT_PASSWORD} | sudo -S mkdir /opt/harness",
                                           "shell": True}},  # the image's real sudo, as on OSWorld's VM
        {"type": "command", "parameters": {"command": ["python", "-c", "import pyautogui; print(pyautogui.size())"],
                                           "stdout": "size.txt"}},
        {"type": "sleep", "parameters": {"seconds": 0.2}},
        {"type": "upload_file", "parameters": {"files": [
            {"local_path": str(local), "path": "/home/user/Documents/notes.txt"},
            {"local_path": str(tmp_path / "wall.png"), "path": "/home/user/Pictures/wall.png"}]}},
        {"type": "change_wallpaper", "parameters": {"path": "/home/user/Pictures/wall.png"}},
    ]) is True
    assert shell(env, "stat -c %U /opt/harness").strip() == "root"
    assert (Path(setup.cache_dir) / "size.txt").read_text() == "Size(width=1920, height=1080)\n"
    assert env.controller.get_vm_wallpaper() == picture.getvalue()

    # download: the controller fetches on this host (from a real HTTP server on loopback) and uploads
    (tmp_path / "sheet.csv").write_text("fruit,count\napple,3\n")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/sheet.csv"
        assert setup.setup([{"type": "download", "parameters": {"files": [
            {"url": url, "path": "/home/user/Documents/sheet.csv"}]}}]) is True
    finally:
        server.shutdown()
        server.server_close()
    assert env.controller.get_file("/home/user/Documents/sheet.csv") == b"fruit,count\napple,3\n"

    # open: returns once a window titled with the file's name shows (LibreOffice Calc, as on the VM)
    assert setup.setup([{"type": "open", "parameters": {"path": "/home/user/Documents/sheet.csv"}}]) is True
    assert any("sheet.csv" in name for name in window_names(env))
    setup.setup([{"type": "close_window", "parameters": {"window_name": "sheet.csv", "strict": False}}])


def test_chrome_tabs_over_the_published_devtools_port(env: Any) -> None:
    """The suite's own Chrome start (``google-chrome --remote-debugging-port=1337`` and ``socat`` from 9222), reached
    from this host through the port the provider published for the container's 9222."""
    shell(env, "for n in one two; do echo \"<title>$n</title>\" > ~/$n.html; done")
    pages = ["file:///home/user/one.html", "file:///home/user/two.html"]
    setup = env.setup_controller
    assert setup.setup([
        {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
        {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
    ]) is True

    def tabs() -> list[str]:
        try:
            with urllib.request.urlopen(f"http://{env.vm_ip}:{env.chromium_port}/json/list", timeout=10) as answer:
                return sorted(t["url"] for t in json.load(answer) if t.get("type") == "page")
        except OSError:
            return []

    assert wait_until(lambda: tabs() != [], 90), "Chrome's DevTools did not answer on the published port"
    assert setup.setup([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": pages}}]) is True
    assert wait_until(lambda: set(pages) <= set(tabs()), 30), tabs()
    assert setup.setup([{"type": "chrome_close_tabs", "parameters": {"urls_to_close": pages[:1]}}]) is True
    assert wait_until(lambda: pages[0] not in tabs() and pages[1] in tabs(), 30), tabs()


def test_the_tag_never_hides_osworlds_own_image_and_its_backend_refuses_ours(docker_host: str,
                                                                            minimal_image: str) -> None:
    from core.errors import ScaleCUAError
    from environments.containers.osworld_docker import OSWorldDockerBackend, OSWorldDockerOptions

    assert osworld_harness.is_ours("podman", osworld_harness.OSWORLD_DOCKER_IMAGE)
    someone_elses = "localhost/scalecua/test-not-ours:latest"
    subprocess.run(["podman", "tag", minimal_image, someone_elses], check=True)
    try:
        with pytest.raises(ScaleCUAError, match="is already here and is not ScaleCUA's"):
            osworld_harness.build_image("minimal", runtime="runc", tag=someone_elses)
        assert not osworld_harness.is_ours("podman", someone_elses)
    finally:
        subprocess.run(["podman", "rmi", someone_elses], capture_output=True, check=False)
    options = OSWorldDockerOptions(hosts=[docker_host], vm_path=__file__, allow_no_kvm=True,
                                   image=osworld_harness.OSWORLD_DOCKER_IMAGE)
    with pytest.raises(ScaleCUAError, match="not OSWorld's VM runner"):
        OSWorldDockerBackend(options)
