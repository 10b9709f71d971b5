"""The setup runner on a real desktop: OSWorld step types, placeholders, local and http files, errors."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import threading
from pathlib import Path

import pytest

from core.types import SetupStep
from environments.client import EnvironmentClient
from environments.setup import SetupContext, SetupError, check_steps, run_setup, substitute
from tests.environments.desktop_fixtures import DesktopSession, desktop, wait_until  # noqa: F401 (fixture)

pytestmark = pytest.mark.desktop


@pytest.fixture
def http_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real HTTP server on loopback serving ``tmp_path/www``."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run(desktop: DesktopSession, steps: list[dict], context: SetupContext | None = None) -> list:
    async def body(client: EnvironmentClient) -> list:
        return await run_setup(client, steps, context or SetupContext(home=str(desktop.home)))

    return desktop.run(body)


def test_files_arrive_from_this_host_and_from_http(desktop: DesktopSession, tmp_path: Path, http_server) -> None:  # type: ignore[no-untyped-def]
    www, base = http_server
    (www / "table.csv").write_text("a,b\n1,2\n")
    (tmp_path / "local.txt").write_text("from file url")
    task_dir = tmp_path / "task"
    (task_dir / "data").mkdir(parents=True)
    (task_dir / "data" / "rel.txt").write_text("relative")
    steps = [
        {"type": "download", "parameters": {"files": [
            {"url": f"{base}/table.csv", "path": "~/Desktop/table.csv"},
            {"url": (tmp_path / "local.txt").as_uri(), "path": "{HOME}/Desktop/local.txt"},
            {"url": "data/rel.txt", "path": "~/Desktop/rel.txt"},
        ]}},
        {"type": "upload_file", "parameters": {"files": [{"local_path": "data/rel.txt", "path": "~/copy.txt"}]}},
    ]
    results = run(desktop, steps, SetupContext(home=str(desktop.home), task_dir=task_dir))
    assert [r.type for r in results] == ["download", "upload_file"]
    assert (desktop.home / "Desktop" / "table.csv").read_text() == "a,b\n1,2\n"
    assert (desktop.home / "Desktop" / "local.txt").read_text() == "from file url"
    assert (desktop.home / "Desktop" / "rel.txt").read_text() == "relative"
    assert (desktop.home / "copy.txt").read_text() == "relative"


def test_commands_placeholders_and_sleep(desktop: DesktopSession) -> None:
    steps = [
        {"type": "execute", "parameters": {"command": "echo {SCREEN_WIDTH}x{SCREEN_HEIGHT} {CLIENT_PASSWORD} > ~/size.txt",
                                           "shell": True}},
        {"type": "command", "parameters": {"command": ["python3", "-c", "import json; print(json.dumps({'k': 1}))"]}},
        {"type": "execute_with_verification", "parameters": {
            "command": "touch ~/ready", "shell": True, "verification": {"command_success": "test -f ~/ready"}}},
        {"type": "sleep", "parameters": {"seconds": 0.2}},
    ]
    results = run(desktop, steps, SetupContext(screen_size=(1280, 800), client_password="pw", home=str(desktop.home)))
    assert (desktop.home / "size.txt").read_text() == "1280x800 pw\n"
    assert results[1].detail["output"] == '{"k": 1}\n'  # JSON braces are not placeholders
    assert results[3].detail == 0.2


def test_launch_activate_and_close_windows(desktop: DesktopSession) -> None:
    steps = [
        {"type": "launch", "parameters": {"command": ["xterm", "-T", "setup-term"]}},
        {"type": "execute_with_verification", "parameters": {
            "command": "true", "verification": {"window_exists": "setup-term"}, "max_wait_time": 60,
            "check_interval": 0.2}},
        {"type": "activate_window", "parameters": {"window_name": "setup-term", "strict": True}},
        {"type": "close_window", "parameters": {"window_name": "setup-term"}},
        {"type": "close_window", "parameters": {"window_name": "already-gone"}},  # not found: ignored, as OSWorld
    ]
    results = run(desktop, steps)
    assert results[2].detail == "Window activated successfully"
    assert results[4].detail == "Window already-gone not found; nothing closed"  # a 200, as OSWorld's server
    assert wait_until(lambda: "setup-term" not in subprocess.run(["pgrep", "-af", "xterm"], capture_output=True,
                                                                text=True).stdout, 60), "xterm did not exit"


def test_open_waits_for_the_application_window(desktop: DesktopSession) -> None:
    (desktop.home / "todo.txt").write_text("buy milk\n")
    results = run(desktop, [{"type": "open", "parameters": {"path": "~/todo.txt"}}])
    assert "todo.txt" in results[0].detail
    desktop.run(lambda client: client.close_window("mousepad", by_class=True))


@pytest.mark.parametrize(
    ("steps", "index", "message"),
    [
        ([{"type": "googledrive", "parameters": {}}], 0, "unsupported offline; supported: activate_window"),
        ([{"type": "sleep", "parameters": {}}, {"type": "googledrive", "parameters": {}}], 1, "unsupported"),
        ([{"type": "download", "parameters": {"files": [{"url": "/no/such/file", "path": "~/x"}]}}], 0,
         "no such file on this host"),
        ([{"type": "download", "parameters": {"files": [{"url": "rel/path.txt", "path": "~/x"}]}}], 0,
         "needs a task directory"),
        ([{"type": "download", "parameters": {}}], 0, "needs 'files'"),
        ([{"type": "launch", "parameters": {"command": ["gimp"]}}], 0, "not allowed; allowed apps: xterm"),
        ([{"type": "launch", "parameters": {}}], 0, "needs 'command'"),
        ([{"type": "execute", "parameters": {"command": "false", "check": True}}], 0, "'false' failed (returncode 1)"),
        # any command that fails fails the reset (the environment's setup_failures: fail, the default)
        ([{"type": "sleep", "parameters": {"seconds": 0}},
          {"type": "command", "parameters": {"command": "echo no such package >&2; exit 3", "shell": True}}], 1,
         "failed (returncode 3): no such package"),
        ([{"type": "execute", "parameters": {"command": ["sleep", "30"], "timeout": 0.5}}], 0,
         "command timed out after 0.5 s"),
        ([{"type": "execute", "parameters": {"command": ["no-such-program-here", "-x"]}}], 0,
         "command not found: no-such-program-here"),
        ([{"type": "sleep", "parameters": {"seconds": 9999}}], 0, "'seconds' must be a number"),
        ([{"type": "open", "parameters": {"path": "~/no-such.docx"}}], 0, "the probe refused"),
        ([{"type": "execute_with_verification", "parameters": {
            "command": "true", "verification": {"command_success": "false"}, "max_wait_time": 0.3,
            "check_interval": 0.1}}], 0, "verification failed"),
    ],
)
def test_failures_name_the_step(desktop: DesktopSession, steps: list[dict], index: int, message: str) -> None:
    context = SetupContext(home=str(desktop.home), allowed_apps=["xterm"])
    with pytest.raises(SetupError) as info:
        run(desktop, steps, context)
    assert info.value.index == index and message in str(info.value)


def test_osworld_setups_find_python_with_pyautogui_and_a_sudo_without_privileges(desktop: DesktopSession) -> None:
    """OSWorld's ``python -c "import pyautogui ..."`` and ``echo {CLIENT_PASSWORD} | sudo -S ...`` steps run
    (environments/probe/shims.py): ``python`` is the probe's interpreter, ``sudo`` runs as the desktop's user."""
    steps = [
        {"type": "execute", "parameters": {"command": "echo {CLIENT_PASSWORD} | sudo -S sh -c 'id -u > ~/sudo.txt'",
                                           "shell": True}},
        {"type": "execute", "parameters": {"command": ["python", "-c", "import pyautogui; pyautogui.moveTo(321, 234); "
                                                       "print(tuple(pyautogui.position()))"]}},
    ]
    results = run(desktop, steps)
    assert (desktop.home / "sudo.txt").read_text().strip() == str(os.getuid())
    assert results[1].detail["output"] == "(321, 234)\n"  # nothing before it (python-xlib used to warn there)
    with pytest.raises(SetupError, match="cannot switch to user nobody-else"):
        run(desktop, [{"type": "execute", "parameters": {"command": "sudo -u nobody-else true", "shell": True}}])


def test_warn_mode_runs_on_past_a_failing_command(desktop: DesktopSession) -> None:
    """``setup_failures: warn`` (OSWorld's own harness) logs a failing command and runs the next step."""
    steps = [{"type": "execute", "parameters": {"command": "exit 4", "shell": True}},
             {"type": "execute", "parameters": {"command": "touch ~/after", "shell": True}}]
    results = run(desktop, steps, SetupContext(home=str(desktop.home), command_failures="warn"))
    assert results[0].detail["returncode"] == 4 and (desktop.home / "after").exists()
    with pytest.raises(SetupError, match="returncode 4"):  # a step that says check: true fails even so
        run(desktop, [{"type": "execute", "parameters": {"command": "exit 4", "shell": True, "check": True}}],
            SetupContext(home=str(desktop.home), command_failures="warn"))


def test_step_types_are_checked_before_anything_runs() -> None:
    with pytest.raises(SetupError, match="step 2 \\(proxy\\)"):
        check_steps([SetupStep(type="sleep"), {"type": "execute", "parameters": {"command": "x"}},
                     {"type": "proxy", "parameters": {}}])


def test_substitute_reaches_nested_values() -> None:
    value = {"a": ["{SCREEN_WIDTH}", {"b": "{X} {unknown}"}], "n": 3}
    assert substitute(value, {"{SCREEN_WIDTH}": "1280", "{X}": "y"}) == {"a": ["1280", {"b": "y {unknown}"}], "n": 3}
