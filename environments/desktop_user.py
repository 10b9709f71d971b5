"""The unprivileged user a desktop's applications, commands and agent shell run as when the trainer is root.

Without it, a trainer running as root (CI, containers, most GPU machines) would hand the agent a root shell
on the training host. With it (local-desktop's ``desktop_user``, default ``scalecua-desktop``, created once
with ``useradd --system`` when missing), everything the agent or a task's setup can start runs as that
user: its home is the desktop's home (owned by it, recreated each episode), ``/root`` and the run
directory are closed to it (the run directory becomes 0700), and nothing else of the host is writable to it.
The probe itself stays with the trainer's user, so judges read homes as before. ``desktop_user: null`` runs
desktops as the trainer's own user (the only choice when the trainer is not root).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import structlog

from core.errors import ScaleCUAError

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class DesktopUser:
    name: str
    uid: int
    gid: int

    def popen_kwargs(self) -> dict[str, Any]:
        """``subprocess.Popen`` arguments that start a child as this user (no supplementary groups)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def child_env(self, env: dict[str, str], home: str) -> dict[str, str]:
        """``env`` for a child running as this user: its home and names, and a ``PATH`` of only the directories
        it can search (:func:`searchable_path`)."""
        path = searchable_path(env.get("PATH", os.defpath), self)
        return {**env, "HOME": home, "USER": self.name, "LOGNAME": self.name, "PATH": path}


def searchable_path(path: str, user: DesktopUser) -> str:
    """``path`` (a ``PATH`` value) without the directories ``user`` cannot search, nor empty entries.

    A root trainer's ``PATH`` often starts under ``/root`` (``~/.cargo/bin``, pyenv's shims), closed to the
    user: an exec search that meets such a directory first reports ``Permission denied`` instead of ``not
    found``, so a program probing for an optional tool (pyautogui's ``dconf read`` on every click) crashes
    where it would have gone on without it. Checked by the user itself, so its groups and every ancestor count.
    """
    entries = [entry for entry in dict.fromkeys(path.split(os.pathsep)) if entry]
    probe = 'for d in "$@"; do [ -d "$d" ] && [ -x "$d" ] && printf "%s\\0" "$d"; done; exit 0'
    try:
        proc = subprocess.run(["/bin/sh", "-c", probe, "sh", *entries], capture_output=True, timeout=30, cwd="/",
                              **user.popen_kwargs())
    except (OSError, subprocess.SubprocessError):
        return path  # cannot tell: leave it as it was
    reachable = set(proc.stdout.decode(errors="replace").split("\0"))
    return os.pathsep.join(entry for entry in entries if entry in reachable)


def lookup(name: str) -> DesktopUser:
    entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        raise ScaleCUAError(f"desktop_user {name!r} is root (uid 0): name an unprivileged user, or null")
    return DesktopUser(name, entry.pw_uid, entry.pw_gid)


def resolve(name: str | None) -> DesktopUser | None:
    """The user desktops run as: None when the trainer is not root (it is unprivileged itself) or when
    ``name`` is None (an explicit choice to run them as root); the user is created when missing."""
    if os.geteuid() != 0:
        return None
    if name is None:
        log.warning("desktops run as root (desktop_user: null): the agent's shell is a root shell on this host")
        return None
    try:
        return lookup(name)
    except KeyError:
        pass
    proc = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                           "--shell", "/bin/sh", name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ScaleCUAError(f"local-desktop: cannot create the desktop user {name!r} (useradd: "
                            f"{proc.stderr.strip() or proc.returncode}); create it yourself (useradd --system {name}), "
                            "name an existing unprivileged user in desktop_user, or set desktop_user: null")
    log.info("desktop user created", user=name)
    return lookup(name)


def chown_tree(root: Path, user: DesktopUser) -> None:
    """Give ``root`` and everything under it (symlinks themselves, not their targets) to ``user``."""
    os.lchown(root, user.uid, user.gid)
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(directory, name), user.uid, user.gid)


def check_reachable(directory: Path, user: DesktopUser) -> None:
    """The user can reach ``directory`` (every ancestor searchable), else an error naming the fix."""
    proc = subprocess.run(["test", "-x", str(directory)], cwd="/", **user.popen_kwargs())
    if proc.returncode != 0:
        raise ScaleCUAError(f"local-desktop: the desktop user {user.name} cannot reach {directory} (a directory above "
                            "it is closed to other users): set work_dir to a directory it can reach (e.g. under /tmp) "
                            "or leave work_dir unset")


_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def filesystem_identity(user: DesktopUser | None) -> Iterator[None]:
    """File operations of the calling thread check permissions as ``user`` and create files it owns.

    Linux's setfsuid/setfsgid act on one thread (glibc does not broadcast them), so a probe request thread
    writing an upload or an agent's ``write_file`` can neither write where the user cannot nor leave files
    in the home that the user's applications cannot save over. Capabilities that bypass file permissions
    drop while the filesystem uid is not 0 and return with it.
    """
    if user is None:
        yield
        return
    previous_gid = _libc.setfsgid(user.gid)
    previous_uid = _libc.setfsuid(user.uid)
    if _libc.setfsuid(-1) != user.uid:  # -1 changes nothing and answers the current value
        _libc.setfsgid(previous_gid)
        raise OSError(f"setfsuid({user.uid}) did not take effect")
    try:
        yield
    finally:
        _libc.setfsuid(previous_uid)
        _libc.setfsgid(previous_gid)
