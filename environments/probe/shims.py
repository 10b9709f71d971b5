"""What an OSWorld task's setup expects of its VM, on a desktop that is not that VM.

OSWorld's setups run ``python -c "import pyautogui; ..."`` (52 commands in the public suite) and
``echo {CLIENT_PASSWORD} | sudo -S ...`` (7). The probe puts a directory first on its children's
``PATH`` (setup commands, launched apps, the agent's terminal) with

* ``python`` and ``python3``: the probe's own interpreter (``--python``; it carries pyautogui where the ``osworld``
  or ``dev`` extra is installed), as OSWorld's VM has one ``python`` with pyautogui. Where the desktop's user cannot
  run that interpreter (a virtual environment under root's 0700 home), the system's ``python3`` with a copy of
  pyautogui's pure-Python files from the probe's environment on its path (:func:`copy_pyautogui`);
* ``sudo``: runs the command as the desktop's own user, never with more privilege: on a local desktop sudo would
  be root on the shared host. ``-S`` consumes the password line as sudo would; asking for another user (``-u``)
  fails with the reason, and a command that fails says that it ran without root and where tasks that need root run
  (container-desktop's ``osworld`` image, whose user has a real sudo: there the probe leaves it in place,
  ``system_sudo``);
* ``google-chrome`` (where only Chromium is installed): Chromium with Chrome's profile directory and a free
  DevTools port (:data:`GOOGLE_CHROME`);
* ``xterm`` (and ``x-terminal-emulator`` where that is xterm): xterm logging what it shows into a directory of the
  desktop's user (:data:`XTERM`), where the probe's ``/terminal`` reads the active terminal's text;

and points ``XAUTHORITY`` at a file there whose one entry names no display (:func:`write_xauthority`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import structlog

from core.errors import ScaleCUAError

log = structlog.get_logger(__name__)

SUDO = """#!/bin/sh
# ScaleCUA desktop: sudo without privileges (environments/probe/shims.py). The command runs as this user.
password=0
while [ $# -gt 0 ]; do
  case "$1" in
    -S|--stdin) password=1; shift ;;
    -u|--user)
      if [ "$2" != "$(id -un)" ] && [ "$2" != "#$(id -u)" ]; then
        echo "sudo: this desktop cannot switch to user $2 (ScaleCUA's sudo runs commands as $(id -un))" >&2
        exit 1
      fi
      shift 2 ;;
    -g|--group|-p|--prompt|-C|--close-from|-h|--host|-D|--chdir) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ "$password" = 1 ]; then IFS= read -r _ || true; fi
[ $# -eq 0 ] && exit 0
"$@"
status=$?
if [ "$status" -ne 0 ]; then
  echo "sudo: no root on this desktop: ScaleCUA's sudo ran $1 as $(id -un), without privileges, and it failed (exit \
$status). A local desktop shares its host, where sudo would be root on the host; tasks that need root run on \
container-desktop with the osworld image (a real sudo, password 'password')." >&2
fi
exit "$status"
"""

#: the pyautogui OSWorld's setups import (``python -c "import pyautogui; ..."``)
PYAUTOGUI = "pyautogui"
#: its dependencies not copied beside a system interpreter (see :func:`copy_pyautogui`)
LEFT_OUT = frozenset({"mouseinfo"})


GOOGLE_CHROME = """#!/bin/sh
# ScaleCUA desktop: google-chrome is Chromium here (environments/probe/shims.py), with Chrome's profile
# directory, so OSWorld's tasks and getters find ~/.config/google-chrome. A fixed DevTools port becomes 0 (a free
# one, written to DevToolsActivePort in the profile): desktops sharing this host never collide on it.
for arg in "$@"; do
  shift
  case "$arg" in
    --remote-debugging-port=*) set -- "$@" --remote-debugging-port=0 ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec {chromium} --user-data-dir="$HOME/.config/google-chrome" --no-sandbox --test-type --no-first-run \
  --password-store=basic --disable-gpu "$@"
"""


XTERM = """#!/bin/sh
# ScaleCUA desktop: xterm logs what it shows (environments/probe/shims.py), so the probe's /terminal can read the
# active terminal's text, as OSWorld's server reads gnome-terminal's through AT-SPI (xterm has no accessibility).
exec {xterm} -l -lf {logs}/xterm-$$.log "$@"
"""
#: the directory (in the shims' directory) where the shimmed xterms log, one ``xterm-PID.log`` each
TERMINAL_LOGS = "terminals"
#: an X authority entry's family for a host's local connections (Xauth.h's FamilyLocal)
FAMILY_LOCAL = 256


def write_xauthority(path: Path) -> None:
    """An X authority file with one entry, for a host no display is on (``scalecua.invalid``).

    python-xlib (under pyautogui) prints ``Xlib.xauth: warning, no xauthority details available`` to stdout for a
    file without entries: that put two lines before every pyautogui command's own output, so OSWorld's
    ``get_vm_platform()`` never read ``Linux``. An entry that matches nothing keeps both python-xlib and libX11
    sending no credentials, which an Xvfb started without ``-auth`` (this project's displays) accepts. Some file
    is needed: python-xlib cannot connect without a readable one, and the desktop's user cannot read the probe's.
    """
    def counted(data: bytes) -> bytes:
        return struct.pack(">H", len(data)) + data

    entry = struct.pack(">H", FAMILY_LOCAL) + b"".join(
        counted(part) for part in (b"scalecua.invalid", b"0", b"MIT-MAGIC-COOKIE-1", bytes(16)))
    path.write_bytes(entry)
    path.chmod(0o644)


def _install_xterm(root: Path, owner: Any | None) -> list[str]:
    """The xterm shims and their log directory (owned by ``owner``, the desktop's user, who runs the xterms)."""
    xterm = shutil.which("xterm")
    if xterm is None:
        return []
    logs = root / TERMINAL_LOGS
    logs.mkdir(mode=0o700, exist_ok=True)
    if owner is not None:
        os.chown(logs, owner.uid, owner.gid)
    names = ["xterm"]
    emulator = shutil.which("x-terminal-emulator")
    if emulator and os.path.realpath(emulator) == os.path.realpath(xterm):
        names.append("x-terminal-emulator")
    script = XTERM.replace("{xterm}", shlex.quote(xterm)).replace("{logs}", shlex.quote(str(logs)))
    for name in names:
        (root / name).write_text(script)
    return names


def child_python(python: str, user: Any | None) -> str:
    """The interpreter for the desktop's ``python`` and ``/run_python``: the probe's own when the desktop's user
    can run it, else the system's ``python3`` (e.g. a virtual environment under root's 0700 home)."""
    if user is None:
        return python
    for candidate in dict.fromkeys((python, "/usr/bin/python3", shutil.which("python3") or "/usr/bin/python3")):
        try:
            subprocess.run([candidate, "-c", "pass"], check=True, capture_output=True, timeout=60,
                           cwd="/", **user.popen_kwargs())
            if candidate != python:
                log.warning("the desktop user cannot run the probe's interpreter; the desktop's python is the "
                            "system's, with pyautogui's pure-Python files copied from the probe's environment",
                            probe_python=python, python=candidate)
            return candidate
        except (OSError, subprocess.SubprocessError):
            continue
    raise ScaleCUAError(f"the desktop user {user.name} can run neither {python} nor a system python3: make the "
                        "interpreter readable by other users, or set local-desktop's desktop_user: null")


def copy_pyautogui(site: Path) -> bool:
    """Copy pyautogui and its dependencies' pure-Python files from the probe's environment into ``site`` (for an
    interpreter of the system's that lacks them). Left out: compiled ones such as Pillow (pyautogui imports without
    them, and uses the system's where it has one) and MouseInfo (a tkinter window no setup opens, whose import
    exits the interpreter where tkinter is missing). False when the probe's environment has no pyautogui."""
    from environments.containers import build  # its distribution helpers; only here (the probe runs without them)

    try:
        dists = build.distribution_closure([PYAUTOGUI])
    except ScaleCUAError:
        log.warning("pyautogui is not installed with the probe, so the desktop's python lacks it (install the "
                    "osworld or dev extra)")
        return False
    wanted = [d for d in dists if not build._is_compiled(d) and d.metadata["Name"].lower() not in LEFT_OUT]
    build.copy_distributions(wanted, site, suite="")
    for path in [site, *site.rglob("*")]:  # readable by the desktop's user whatever the umask
        path.chmod(0o755 if path.is_dir() else 0o644)
    return True


def install_shims(directory: str | Path, python: str, *, system_sudo: bool = False,
                  with_pyautogui: bool = False, user: Any | None = None) -> dict[str, str]:
    """Write the shims into ``directory``; returns the environment changes for the probe's children.
    ``system_sudo``: no sudo shim (the image's user has a real sudo); ``with_pyautogui``: ``python`` is not the
    probe's interpreter, so pyautogui is copied beside it (:func:`copy_pyautogui`); ``user``: the desktop's user
    (a :class:`environments.desktop_user.DesktopUser`), whose xterms write their logs here."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    path = ""
    if with_pyautogui and copy_pyautogui(root / "site"):
        path = f"export PYTHONPATH={shlex.quote(str(root / 'site'))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
    names = ["python", "python3"]
    for name in names:
        (root / name).write_text(f"#!/bin/sh\n{path}exec {shlex.quote(python)} \"$@\"\n")
    if not system_sudo:
        (root / "sudo").write_text(SUDO)
        names.append("sudo")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium and not shutil.which("google-chrome"):  # a real Chrome is used as it is
        (root / "google-chrome").write_text(GOOGLE_CHROME.replace("{chromium}", shlex.quote(chromium)))
        names.append("google-chrome")
    names += _install_xterm(root, user)
    for name in names:
        (root / name).chmod(0o755)
    xauthority = root / "Xauthority"
    write_xauthority(xauthority)
    return {"PATH": f"{root}{os.pathsep}{os.environ.get('PATH', os.defpath)}", "XAUTHORITY": str(xauthority)}
