"""The ``osworld`` image variant: OSWorld's apps and its VM's conventions (environments/containers/build.py).

The variant's definition and build context are checked without building. The image itself is built (or found
cached by content hash) by the same code users run, like the other image tests' ``minimal`` image, and one
container of it must answer as OSWorld's VM: user ``user`` at ``/home/user`` with sudo (password ``password``),
``python`` with pyautogui on the desktop's display, ``google-chrome``, LibreOffice, GIMP, VLC and Thunderbird.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from core.pluginmanager import Plugins
from core.types import Task
from environments.containers import build
from environments.containers.podman_service import PodmanService
from tests.containers.conftest import ULIMITS

OSWORLD = build.VARIANTS["osworld"]


def test_the_osworld_variant_carries_the_suites_apps_and_its_vm_conventions() -> None:
    packages = set(OSWORLD.packages)
    assert {"libreoffice-calc", "libreoffice-writer", "libreoffice-impress", "gimp", "vlc", "thunderbird",
            "chromium"} <= packages
    # what the suite's setups call: sudo -S, python (+ pyautogui's tkinter), socat 9222 -> 1337, pip, curl, unzip
    assert {"sudo", "python-is-python3", "python3-tk", "socat", "python3-pip", "curl", "unzip", "xsel"} <= packages
    assert set(build.COMMON_PACKAGES) <= packages and OSWORLD.window_manager in packages
    assert OSWORLD.base == "apt"  # derived images can apt-get install
    assert "pyautogui" in OSWORLD.distributions and OSWORLD.user_password == "password"
    assert OSWORLD.build_args() == {"WINDOW_MANAGER": "openbox", "USER_PASSWORD": "password", "SYSTEM_SUDO": "1",
                                    "GOOGLE_CHROME": "1", "SYSTEM_PIP": "1"}
    # the other variants keep the probe's unprivileged sudo and google-chrome shims
    assert build.VARIANTS["full"].build_args()["SYSTEM_SUDO"] == "0"
    assert build.VARIANTS["minimal"].build_args()["USER_PASSWORD"] == ""
    containerfile = (build.IMAGE_DIR / "Containerfile").read_text()
    for arg in OSWORLD.build_args():
        assert f"ARG {arg}" in containerfile
    assert "usermod -aG sudo user" in containerfile and "--home-dir /home/user" in containerfile
    assert "SCALECUA_SYSTEM_SUDO=${SYSTEM_SUDO}" in containerfile


def test_the_build_context_holds_the_google_chrome_wrapper_and_pyautogui(tmp_path: Path) -> None:
    digest = build.prepare_context(tmp_path, containerfile=build.IMAGE_DIR / "Containerfile", suite="bookworm",
                                   distributions=(*build.PROBE_DISTRIBUTIONS, *OSWORLD.distributions))
    assert (tmp_path / "site" / "pyautogui" / "__init__.py").is_file()
    assert (tmp_path / "site" / "Xlib").is_dir()
    wrapper = tmp_path / "google-chrome"
    assert os.access(wrapper, os.X_OK)
    # the wrapper, run against a stand-in chromium: Chrome's profile directory, the task's DevTools port kept
    stub = tmp_path / "chromium"
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    stub.chmod(0o755)
    wrapper.write_text(wrapper.read_text().replace("/usr/bin/chromium", str(stub)))
    argv = subprocess.run([str(wrapper), "--remote-debugging-port=1337", "https://example.com"],
                          env={"HOME": "/home/user", "PATH": os.defpath}, capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert argv[0] == "--user-data-dir=/home/user/.config/google-chrome"
    assert argv[-2:] == ["--remote-debugging-port=1337", "https://example.com"]
    (tmp_path / "again").mkdir()
    again = build.prepare_context(tmp_path / "again", containerfile=build.IMAGE_DIR / "Containerfile",
                                  suite="bookworm", distributions=build.PROBE_DISTRIBUTIONS)
    assert again != digest  # the image's hash follows the Python distributions it carries


@pytest.fixture(scope="session")
def osworld_image() -> str:
    return build.build_image("osworld", runtime="runc").image


#: what OSWorld's setups and an agent's shell run, through the probe (its PATH and environment) as the desktop's
#: user; name -> shell command
CHECKS = {
    "user": "id -un; echo $HOME; pwd",
    "sudo": "echo password | sudo -S -p '' id -u",
    "sudo_wrong_password": "echo wrong | sudo -S -p '' true",
    "pyautogui": "python -c 'import pyautogui; pyautogui.moveTo(321, 234); print(tuple(pyautogui.position()))'",
    "python3": "python3 -c 'import pyautogui, tkinter; print(tuple(pyautogui.size()))'",
    "google-chrome": "command -v google-chrome && google-chrome --version",
    "soffice": "soffice --version",
    "gimp": "gimp --version",
    "vlc": "vlc --version",
    "thunderbird": "thunderbird --version",
    "socat": "socat -V | grep -m1 'socat version'",
    "pip": "pip --version",
    "jq": "echo '{\"a\": 1}' | jq -c '. + {b: 2}'",
    "launcher": "grep -m1 '^Exec=' /usr/share/applications/google-chrome.desktop",
    "profile": "cat ~/.config/google-chrome/Default/Preferences",
    "video_player": "xdg-mime query default video/mp4",
}


@pytest.mark.containers
@pytest.mark.slow
def test_an_osworld_container_answers_as_osworlds_vm(plugins: Plugins, podman_service: PodmanService,
                                                     osworld_image: str) -> None:
    backend = plugins.registry("environment").create("container-desktop", {
        "hosts": [podman_service.url], "image": osworld_image, "ulimits": ULIMITS, "runtime": "runc",
        "max_environments": 1, "warm": 0, "startup_timeout_s": 120})
    task = Task.model_validate({"id": "osworld-sudo", "instruction": "-", "evaluator": {"func": "infeasible"},
                                "config": [{"type": "execute", "parameters": {
                                    "command": "echo {CLIENT_PASSWORD} | sudo -S touch /etc/osworld-root-was-here",
                                    "shell": True}}]})

    async def body() -> dict[str, Any]:
        try:
            env = await backend.acquire()
            try:
                await env.reset(task)  # a setup step that needs root, as OSWorld's apt-get installs do
                results: dict[str, Any] = {}
                for name, command in {**CHECKS, "root_file": "stat -c %U /etc/osworld-root-was-here"}.items():
                    results[name] = await env.client.execute(command, shell=True, timeout=120)
                return results
            finally:
                await backend.release(env, discard=True)
        finally:
            await backend.close()

    results = asyncio.run(asyncio.wait_for(body(), 600))
    out = {name: (r.get("returncode"), str(r.get("output") or "").strip()) for name, r in results.items()}
    assert out["user"] == (0, "user\n/home/user\n/home/user"), results["user"]
    assert out["root_file"] == (0, "root"), results["root_file"]
    assert out["sudo"] == (0, "0"), results["sudo"]
    assert out["sudo_wrong_password"][0] != 0, results["sudo_wrong_password"]  # the password is required
    assert out["pyautogui"][0] == 0 and out["pyautogui"][1].splitlines()[-1] == "(321, 234)", results["pyautogui"]
    assert out["python3"][0] == 0 and out["python3"][1].splitlines()[-1] == "(1280, 800)", results["python3"]
    assert out["google-chrome"][0] == 0, results["google-chrome"]
    assert out["google-chrome"][1].splitlines()[0] == "/usr/local/bin/google-chrome"
    assert "Chromium" in out["google-chrome"][1]
    for check, expected in (("soffice", "LibreOffice"), ("gimp", "GNU Image Manipulation Program"), ("vlc", "VLC"),
                            ("thunderbird", "Thunderbird"), ("socat", "socat version"), ("pip", "pip"),
                            ("jq", '{"a":1,"b":2}'), ("launcher", "Exec=google-chrome"), ("profile", "{}"),
                            ("video_player", "org.gnome.Totem.desktop")):
        assert out[check][0] == 0 and expected in out[check][1], (check, results[check])
