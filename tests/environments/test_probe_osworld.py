"""The probe driven by OSWorld's own, unmodified client (``desktop_env.controllers.python.PythonController``) and by
requests shaped as OSWorld's ``SetupController`` sends them (the controller itself drives the probe in
test_probe_osworld_setup.py), on a real desktop run as a root trainer's are (the unprivileged desktop user).

Each test checks one place where the probe used to answer differently from OSWorld's in-VM server.
"""

from __future__ import annotations

import io
import json
import os
import time
from typing import Any

import pytest
import requests
from PIL import Image

from tests.environments.desktop_fixtures import DESKTOP_USER, DesktopSession, osworld_desktop  # noqa: F401 (fixture)

PythonController = pytest.importorskip("desktop_env.controllers.python").PythonController

pytestmark = pytest.mark.desktop

#: OSWorld's most common first setup step (52 commands of the public suite are of this kind)
FIRST_CLICK = "import pyautogui; import time; pyautogui.click(640, 400); time.sleep(0.5);"


def controller(session: DesktopSession) -> Any:
    python = PythonController("127.0.0.1", session.port)
    python.retry_interval = 0  # its failures are retried three times; no need to wait 5 s between them here
    return python


def post(session: DesktopSession, path: str, payload: dict | None = None, **kwargs: Any) -> requests.Response:
    """A request as OSWorld's SetupController sends it: a JSON body, no token."""
    if payload is not None:
        kwargs.update(data=json.dumps(payload), headers={"Content-Type": "application/json"})
    return requests.post(f"http://127.0.0.1:{session.port}{path}", timeout=120, **kwargs)


def test_pyautogui_commands_print_only_their_own_output(osworld_desktop: DesktopSession) -> None:
    python = controller(osworld_desktop)
    assert python.get_vm_platform() == "Linux"  # what 20 of OSWorld's getters and the browse-history setup test
    assert python.execute_python_command("print(pyautogui.size())")["output"] == "Size(width=1280, height=800)\n"


def test_the_first_setup_step_of_osworld_runs_as_the_desktop_user(osworld_desktop: DesktopSession) -> None:
    answer = post(osworld_desktop, "/setup/execute", {"command": ["python", "-c", FIRST_CLICK], "shell": False})
    result = answer.json()
    assert answer.status_code == 200 and result["returncode"] == 0, result
    assert result["error"] == "", result  # pyautogui's `dconf read` found no dconf: no PermissionError
    listing = post(osworld_desktop, "/execute", {"command": "id -un; echo $PATH", "shell": True}).json()["output"]
    who, search_path = listing.splitlines()
    if os.geteuid() == 0:
        assert who == DESKTOP_USER
        assert "/root" not in search_path  # the trainer's own PATH entries are closed to the desktop's user


@pytest.mark.parametrize("endpoint", ["/setup/execute", "/execute"])
def test_shell_given_as_the_string_true_runs_through_a_shell(osworld_desktop: DesktopSession, endpoint: str) -> None:
    answer = post(osworld_desktop, endpoint, {"command": "mkdir -p ~/Data1/List1 && ls ~/Data1", "shell": "true"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"] == "List1\n"


def test_window_size_desktop_path_and_wallpaper(osworld_desktop: DesktopSession) -> None:
    python = controller(osworld_desktop)
    assert python.get_vm_window_size("no-such-class") is None
    assert post(osworld_desktop, "/window_size", data={}).json() == {
        "status": "error", "error": "app_class_name is required", "message": "app_class_name is required"}
    post(osworld_desktop, "/setup/launch", {"command": ["xterm", "-T", "sized", "-geometry", "80x24"]})
    deadline = time.monotonic() + 60
    while (size := python.get_vm_window_size("XTerm")) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert size is not None and size["width"] > 200 and size["height"] > 100, size
    post(osworld_desktop, "/setup/close_window", {"window_name": "sized", "strict": True, "by_class": False})

    assert python.get_vm_desktop_path() is None  # no ~/Desktop yet: 404, as OSWorld
    post(osworld_desktop, "/execute", {"command": ["mkdir", "~/Desktop"], "shell": False})
    assert python.get_vm_desktop_path() == f"{osworld_desktop.home}/Desktop"

    picture = io.BytesIO()
    Image.new("RGB", (64, 40), (200, 30, 90)).save(picture, format="PNG")
    upload = post(osworld_desktop, "/setup/upload", data={"file_path": "~/Pictures/wall.png"},
                  files={"file_data": ("wall.png", picture.getvalue())})
    assert upload.status_code == 200, upload.text
    assert post(osworld_desktop, "/setup/change_wallpaper", {"path": "~/Pictures/missing.png"}).status_code == 404
    changed = post(osworld_desktop, "/setup/change_wallpaper", {"path": "~/Pictures/wall.png"})
    assert changed.status_code == 200, changed.text
    assert python.get_vm_wallpaper() == picture.getvalue()


def test_failures_answer_osworlds_status_codes_and_keys(osworld_desktop: DesktopSession) -> None:
    missing = post(osworld_desktop, "/execute", {"command": ["no-such-program-q"], "shell": False})
    assert missing.status_code == 500 and "not found" in missing.json()["message"]
    slow = post(osworld_desktop, "/execute", {"command": "sleep 5", "shell": True, "timeout": 0.5})
    assert slow.status_code == 500 and "timed out" in slow.json()["message"]
    bash = post(osworld_desktop, "/run_bash_script", {"script": "sleep 5", "timeout": 0.5, "working_dir": None})
    assert bash.status_code == 500 and bash.json() == {
        "status": "error", "output": "Script execution timed out after 0.5 seconds", "error": "", "returncode": -1}
    launched = post(osworld_desktop, "/setup/launch", {"command": ["no-such-program-q"], "shell": False})
    assert launched.status_code == 500 and "no-such-program-q" in launched.json()["message"]
    for endpoint in ("/setup/activate_window", "/setup/close_window"):  # OSWorld does not check wmctrl's result
        answer = post(osworld_desktop, endpoint, {"window_name": "no such window", "strict": False, "by_class": False})
        assert answer.status_code == 200 and "not found" in answer.text
    absent = post(osworld_desktop, "/file", data={"file_path": "~/absent.txt"})
    assert absent.status_code == 404 and absent.json()["error"] == "File not found"
    bad = post(osworld_desktop, "/execute", data=b"{not json", headers={"Content-Type": "application/json"})
    body = bad.json()  # every other error: the reason under both keys OSWorld's clients read
    assert bad.status_code == 400 and "not valid JSON" in body["error"] and body["message"] == body["error"]


def test_run_python_answers_as_osworld(osworld_desktop: DesktopSession) -> None:
    python = controller(osworld_desktop)
    ran = python.run_python_script("print(6 * 7)")
    assert ran == {"status": "success", "message": "42\n", "need_more": False, "output": "42\n", "error": "",
                   "return_code": 0}
    refused = python.run_python_script("   ")  # its client reads the error body's 'error'
    assert refused["status"] == "error" and "empty" in refused["error"]


def test_open_file_waits_for_the_files_name_in_a_window_title(osworld_desktop: DesktopSession) -> None:
    """A window of the application without the file's name (mousepad's for a folder named like a text file; in
    OSWorld's case LibreOffice's document recovery dialog) is not the file open."""
    post(osworld_desktop, "/execute", {"command": "mkdir ~/notes.txt && echo step one > ~/plan.txt", "shell": True})
    folder = post(osworld_desktop, "/setup/open_file", {"path": "~/notes.txt", "timeout_seconds": 8})
    titles = [w["name"] for w in windows(osworld_desktop)]
    assert folder.status_code == 500 and "notes.txt" in folder.json()["message"], folder.text
    assert "Mousepad" in titles, titles  # the app's window was up, and did not count
    opened = post(osworld_desktop, "/setup/open_file", {"path": "~/plan.txt"})  # as SetupController sends it
    assert opened.status_code == 200, opened.text
    assert any("plan.txt" in w["name"] for w in windows(osworld_desktop))
    for _ in range(5):
        if "not found" in post(osworld_desktop, "/setup/close_window", {"window_name": "mousepad",
                                                                        "by_class": True}).text:
            break
        time.sleep(0.5)


def windows(session: DesktopSession) -> list[dict[str, str]]:
    """Visible windows' titles, as the desktop's xdotool lists them."""
    listing = post(session, "/execute", {"command": "for w in $(xdotool search --onlyvisible --name .); do "
                                                    "xdotool getwindowname $w; done", "shell": True})
    return [{"name": line} for line in listing.json()["output"].splitlines()]
