"""What OSWorld's setups expect of their VM, on local-desktop (environments/probe/shims.py).

On a real local desktop run as the backend's default unprivileged user (when the tests run as root), as the
agent's shell and a task's setup commands run: ``python`` and ``python3`` import pyautogui and move the pointer,
``google-chrome`` is Chromium, ``echo {CLIENT_PASSWORD} | sudo -S`` runs a command that needs no root, and one that
needs root fails the task's setup with the reason (no root on a shared host) and the fix (the osworld image).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from core.types import Task
from environments.probe.shims import install_shims
from environments.setup import SetupError
from tests.environments.desktops import one_desktop

POINTER = "import pyautogui; pyautogui.moveTo({x}, {y}); print(tuple(pyautogui.position()))"


def task(*commands: str) -> Task:
    return Task.model_validate({"id": "osworld-conventions", "instruction": "-", "evaluator": {"func": "infeasible"},
                                "config": [{"type": "execute", "parameters": {"command": c, "shell": True}}
                                           for c in commands]})


@pytest.mark.desktop
def test_local_desktop_offers_python_with_pyautogui_google_chrome_and_an_unprivileged_sudo(tmp_path: Path) -> None:
    async def body() -> dict[str, dict]:
        # the backend's default desktop user (a root trainer's desktops run as scalecua-desktop; work_dir None:
        # its homes live where that user reaches them)
        async with one_desktop(tmp_path, desktop_user="scalecua-desktop", work_dir=None) as (pool, env):
            await env.reset(task("echo {CLIENT_PASSWORD} | sudo -S mkdir ~/Desktop/todo_list_Jan_1"))
            results = {"user": pool.user.name if pool.user else None}
            for name, command in {
                "whoami": "id -un",
                "python": f"python -c '{POINTER.format(x=321, y=234)}'",
                "python3": f"python3 -c '{POINTER.format(x=123, y=432)}'",
                "chrome": "command -v google-chrome && google-chrome --version",
                "todo": "ls -d ~/Desktop/todo_list_Jan_1",
            }.items():
                results[name] = await env.client.execute(command, shell=True, timeout=60)
            with pytest.raises(SetupError) as info:
                await env.reset(task("echo {CLIENT_PASSWORD} | sudo -S touch /etc/scalecua-sudo-check"))
            results["sudo_root"] = {"error": str(info.value)}
            return results

    results = asyncio.run(body())
    if os.geteuid() == 0:
        assert results["user"] == "scalecua-desktop"
        assert results["whoami"]["output"].strip() == "scalecua-desktop"
    for name, expected in (("python", "(321, 234)"), ("python3", "(123, 432)")):
        assert results[name]["returncode"] == 0, results[name]
        assert results[name]["output"] == expected + "\n"  # and nothing else: python-xlib finds an Xauthority entry
    if shutil.which("chromium") or shutil.which("google-chrome"):
        assert results["chrome"]["returncode"] == 0, results["chrome"]
        assert "chrom" in results["chrome"]["output"].lower()
    assert results["todo"]["returncode"] == 0  # the unprivileged sudo ran it as the desktop's user
    error = results["sudo_root"]["error"]
    assert not Path("/etc/scalecua-sudo-check").exists()
    assert "no root on this desktop" in error and "sudo would be root on the host" in error
    assert "container-desktop with the osworld image" in error


def test_the_sudo_shim_names_why_a_command_failed_and_steps_aside_for_a_real_sudo(tmp_path: Path) -> None:
    env = {**os.environ, **install_shims(tmp_path / "shims", "/usr/bin/python3")}
    failed = subprocess.run("echo password | sudo -S sh -c 'echo denied >&2; exit 3'", shell=True, env=env,
                            capture_output=True, text=True)
    assert failed.returncode == 3
    assert failed.stderr.startswith("denied\n") and "no root on this desktop" in failed.stderr
    assert "container-desktop with the osworld image (a real sudo, password 'password')" in failed.stderr
    assert len(failed.stderr) < 400  # whole in a setup error, which shows the last 400 characters of stderr
    ok = subprocess.run("echo password | sudo -S sh -c 'read -r line || echo stdin-consumed'", shell=True, env=env,
                        capture_output=True, text=True)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "stdin-consumed\n", "")
    install_shims(tmp_path / "image", "/usr/bin/python3", system_sudo=True)
    assert not (tmp_path / "image" / "sudo").exists()  # the osworld image's real sudo is used as it is
    assert (tmp_path / "image" / "python3").read_text() == (tmp_path / "image" / "python").read_text()


def test_an_interpreter_without_pyautogui_gets_a_copy_of_its_pure_python_files(tmp_path: Path) -> None:
    install_shims(tmp_path, "/usr/bin/python3", with_pyautogui=True)
    site = tmp_path / "site"
    assert (site / "pyautogui" / "__init__.py").is_file() and (site / "Xlib").is_dir()
    assert not list(site.rglob("*.so")) and not (site / "mouseinfo").exists()  # compiled ones and MouseInfo stay out
    assert f"export PYTHONPATH={site}" in (tmp_path / "python").read_text()
    assert all(oct(p.stat().st_mode)[-3:] in ("755", "644") for p in site.rglob("*"))


def test_the_xauthority_holds_one_entry_that_names_no_display(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from Xlib import xauth

    install_shims(tmp_path, "/usr/bin/python3")
    entries = list(xauth.Xauthority(str(tmp_path / "Xauthority")))
    assert capfd.readouterr().out == ""  # an empty file made python-xlib print a warning to stdout
    assert len(entries) == 1 and entries[0][1] == b"scalecua.invalid"


def test_the_desktop_user_gets_only_the_path_entries_it_can_search(tmp_path: Path) -> None:
    from environments import desktop_user

    if os.geteuid() != 0:
        pytest.skip("a desktop user exists only for a root trainer")
    user = desktop_user.resolve("scalecua-desktop")
    assert user is not None
    closed = tmp_path / "closed"  # pytest's tmp_path sits under a 0700 directory of root's
    closed.mkdir()
    env = user.child_env({"PATH": f"{closed}:/usr/bin::/bin:/no/such/dir"}, "/tmp")
    assert env["PATH"] == "/usr/bin:/bin"
