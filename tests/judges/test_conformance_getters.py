"""Getters (:mod:`environments.judges.getters`) against OSWorld's own on the same configs, both asking a real HTTP
server on loopback that speaks the endpoints of OSWorld's in-VM server they use (:class:`VMServer`): upstream
through ``requests`` and its own ``PythonController``, ours through :class:`environments.client.EnvironmentClient`.

``vm_command_line`` (general.py; 36 tasks) on the suite's command forms (argv lists, shell strings, ``shell:
"true"``, a failing command, a program that does not exist); ``cache_file`` (file.py; 9); ``vlc_config``
(vlc.py; 7); ``gimp_config_file`` (gimp.py; 4, present, empty and missing); ``accessibility_tree`` (misc.py; 3,
given and refused). The answers must be equal (paths compared relative to each cache, with the bytes there).
Hand-derived: a ``cache_file`` missing or ``vlc_config`` without a vlcrc raise :class:`FileNotFoundError` here
(upstream: AssertionError, TypeError).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from environments.client import EnvironmentClient
from environments.judges import getters as ours
from tests.judges.upstream import getters_module

TREE = '<desktop-frame name="main"><application name="gimp"/></desktop-frame>'


class VMServer:
    """OSWorld's ``POST /execute`` (``{command, shell}``: run to completion as the server's ``subprocess.run``
    does, a 200 with ``{status: success, output, error, returncode}`` whatever the exit code, a 500 ``{status:
    error, message}`` when it cannot run), ``POST /file`` (``~`` is the VM's home; 404 when missing) and ``GET
    /accessibility`` (``{"AT": xml}``, or a 500 when ``tree`` is None) for a VM whose home is ``home``."""

    def __init__(self, home: Path):
        self.home, self.tree = home, TREE
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def _answer(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/accessibility" and server.tree is not None:
                    self._answer(200, json.dumps({"AT": server.tree}).encode())
                else:
                    self._answer(500, json.dumps({"error": "no accessibility bus"}).encode())

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/file":
                    from urllib.parse import parse_qs

                    asked = parse_qs(body.decode())["file_path"][0]
                    path = Path(str(server.home) + asked[1:] if asked.startswith("~") else asked)
                    if not path.is_file():
                        self._answer(404, b'{"error": "File not found"}')
                    else:
                        self._answer(200, path.read_bytes())
                    return
                self._answer(*server.execute(json.loads(body)))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.port = self.httpd.server_address[1]

    def execute(self, data: dict[str, Any]) -> tuple[int, bytes]:
        shell = data.get("shell", False)
        command = data.get("command", "" if shell else [])
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        if isinstance(command, list):
            command = [str(self.home) + a[1:] if a.startswith("~/") else a for a in command]
        env = {"HOME": str(self.home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "LANG": "C.UTF-8"}
        try:
            done = subprocess.run(command, shell=bool(shell), capture_output=True, text=True, timeout=60, check=False, env=env,
                                  cwd=self.home)
        except Exception as exc:  # noqa: BLE001 - the in-VM server answers every failure so
            return 500, json.dumps({"status": "error", "message": str(exc)}).encode()
        return 200, json.dumps({"status": "success", "output": done.stdout, "error": done.stderr,
                                "returncode": done.returncode}).encode()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VMServer]:
    home = tmp_path_factory.mktemp("home")
    (home / "Desktop").mkdir()
    (home / "Desktop" / "test.py").write_text("print(1)\n")
    (home / "eval.sh").write_text("echo 'Evaluation successful.'\necho oops >&2\n")
    server = VMServer(home)
    yield server
    server.close()


def upstream_env(vm: VMServer, cache: Path) -> Any:
    from desktop_env.controllers.python import PythonController

    controller = PythonController("127.0.0.1", vm.port, pkgs_prefix="{command}")  # no pyautogui without a display
    controller.retry_interval = 0
    return types.SimpleNamespace(vm_ip="127.0.0.1", server_port=vm.port, controller=controller, cache_dir=str(cache),
                                 vm_platform="Linux")


def theirs(vm: VMServer, cache: Path, module: str, name: str, config: dict[str, Any]) -> Any:
    return getattr(getters_module(module, ("pandas",)), name)(upstream_env(vm, cache), config)


def mine(vm: VMServer, cache: Path, name: str, config: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with EnvironmentClient(f"http://127.0.0.1:{vm.port}") as client:
            return await getattr(ours, name)(types.SimpleNamespace(client=client, cache_dir=str(cache)), config)

    return asyncio.run(main())


def in_cache(answer: Any, cache: Path) -> Any:
    if isinstance(answer, str) and os.path.isabs(answer) and Path(answer).is_relative_to(cache):
        return os.path.relpath(answer, cache), Path(answer).read_bytes() if Path(answer).is_file() else "a folder"
    return answer


def both(vm: VMServer, tmp_path: Path, module: str, name: str, config: dict[str, Any]) -> tuple[Any, Any]:
    (tmp_path / "ours").mkdir(exist_ok=True), (tmp_path / "theirs").mkdir(exist_ok=True)
    return (in_cache(mine(vm, tmp_path / "ours", name, config), tmp_path / "ours"),
            in_cache(theirs(vm, tmp_path / "theirs", module, name, config), tmp_path / "theirs"))


COMMANDS: dict[str, dict[str, Any]] = {
    "argv with a pipe as an argument (is_extension_installed)": {"command": ["ls", "/nonexistent", "|", "grep", "x"]},
    "argv ls of the Desktop": {"command": ["ls", "~/Desktop"]},
    "bash -c script": {"command": ["/bin/bash", "-c", ('output=$(cat ~/.bash_history | grep "[c]ode "); '
                                   'if [ -z "$output" ]; then echo "false"; else echo "true"; fi')]},
    "shell string": {"command": "bash eval.sh", "shell": True},
    "shell as the string true": {"command": "[ -f ~/Desktop/test.py ] && echo 'File exists.'", "shell": "true"},
    "string without shell (split)": {"command": "echo 'a  b'"},
    "a failing command": {"command": "exit 3", "shell": True},
    "a program that does not exist": {"command": ["no-such-program-anywhere"]},
    "a multi-line script": {"command": "X=1\necho $X\nfalse", "shell": True},
}


@pytest.mark.parametrize("config", COMMANDS.values(), ids=COMMANDS.keys())
def test_vm_command_line_answers_as_osworld(vm: VMServer, tmp_path: Path, config: dict[str, Any]) -> None:
    ours_answer, their_answer = both(vm, tmp_path, "general", "get_vm_command_line", config)
    assert ours_answer == their_answer


def test_the_commands_cover_output_and_none(vm: VMServer, tmp_path: Path) -> None:
    answers = [theirs(vm, tmp_path, "general", "get_vm_command_line", c) for c in COMMANDS.values()]
    assert None in answers and "" in answers and "Evaluation successful.\n" in answers


@pytest.mark.parametrize("name", ["wmctrl.out", "sub/emails.bak.ls", "folder"])
def test_cache_file_answers_as_osworld(vm: VMServer, tmp_path: Path, name: str) -> None:
    for side in ("ours", "theirs"):
        target = tmp_path / side / name
        if name == "folder":
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("line\n")
    mine_answer, their_answer = both(vm, tmp_path, "file", "get_cache_file", {"path": name})
    assert mine_answer == their_answer


def test_cache_file_missing(vm: VMServer, tmp_path: Path) -> None:
    (tmp_path / "theirs").mkdir()
    with pytest.raises(AssertionError):
        theirs(vm, tmp_path / "theirs", "file", "get_cache_file", {"path": "gone.out"})
    with pytest.raises(FileNotFoundError):
        mine(vm, tmp_path, "get_cache_file", {"path": "gone.out"})


def test_vlc_config_answers_as_osworld(vm: VMServer, tmp_path: Path) -> None:
    vlcrc = vm.home / ".config" / "vlc" / "vlcrc"
    vlcrc.parent.mkdir(parents=True, exist_ok=True)
    vlcrc.write_bytes(b"[qt]\nqt-minimal-view=1\n")
    try:
        ours_answer, their_answer = both(vm, tmp_path, "vlc", "get_vlc_config", {"dest": "vlcrc"})
        assert ours_answer == their_answer == ("vlcrc", b"[qt]\nqt-minimal-view=1\n")
    finally:
        vlcrc.unlink()
    with pytest.raises(TypeError):  # upstream writes None
        theirs(vm, tmp_path / "theirs", "vlc", "get_vlc_config", {"dest": "vlcrc"})
    with pytest.raises(FileNotFoundError):
        mine(vm, tmp_path / "ours", "get_vlc_config", {"dest": "vlcrc"})


@pytest.mark.parametrize("content", [b"(restore-session yes)\n", b"", None], ids=["present", "empty", "missing"])
@pytest.mark.parametrize("file_name", ["gimprc", "sessionrc"])
def test_gimp_config_file_answers_as_osworld(vm: VMServer, tmp_path: Path, file_name: str,
                                             content: bytes | None) -> None:
    config_file = vm.home / ".config" / "GIMP" / "2.10" / file_name
    config_file.parent.mkdir(parents=True, exist_ok=True)
    if content is not None:
        config_file.write_bytes(content)
    try:
        ours_answer, their_answer = both(vm, tmp_path, "gimp", "get_gimp_config_file",
                                         {"file_name": file_name, "dest": file_name})
        assert ours_answer == their_answer
    finally:
        config_file.unlink(missing_ok=True)


@pytest.mark.parametrize("tree", [TREE, None], ids=["given", "refused"])
def test_accessibility_tree_answers_as_osworld(vm: VMServer, tmp_path: Path, tree: str | None) -> None:
    vm.tree = tree
    try:
        ours_answer, their_answer = both(vm, tmp_path, "misc", "get_accessibility_tree", {})
        assert ours_answer == their_answer == tree
    finally:
        vm.tree = TREE
