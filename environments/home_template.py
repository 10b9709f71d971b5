"""The clean home directory every local desktop starts from (and returns to on reset).

Besides the usual folders it carries first-run settings that would otherwise
put dialogs in front of the task on every (fresh-profile) start: LibreOffice's
tip of the day and "keep current format?" question, Chromium's first-run page.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterable

import structlog

log = structlog.get_logger(__name__)

FOLDERS = ("Desktop", "Documents", "Downloads", "Pictures", "Music", "Videos", ".config", ".local/share", ".cache")

_LIBREOFFICE_SETTINGS = {
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay"): "false",
    ("/org.openoffice.Office.Common/Misc", "FirstRun"): "false",
    ("/org.openoffice.Setup/Office", "ooSetupInstCompleted"): "true",
    ("/org.openoffice.Setup/Product", "ooSetupLastVersion"): "99.0",  # no "what's new" bar
    ("/org.openoffice.Office.Common/Save/Document", "WarnAlienFormat"): "false",  # ctrl+s on .xlsx just saves
    ("/org.openoffice.Office.Recovery/RecoveryInfo", "Enabled"): "false",
    ("/org.openoffice.Office.Recovery/AutoSave", "Enabled"): "false",
}


def _libreoffice_registry() -> str:
    items = "\n".join(
        f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse"><value>{value}</value></prop></item>'
        for (path, name), value in _LIBREOFFICE_SETTINGS.items()
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
        f"{items}\n</oor:items>\n"
    )


def write_default_template(path: Path) -> Path:
    """Create the default home template at ``path`` (replacing what is there)."""
    if path.exists():
        shutil.rmtree(path)
    for folder in FOLDERS:
        (path / folder).mkdir(parents=True, exist_ok=True)
    lo_user = path / ".config/libreoffice/4/user"
    lo_user.mkdir(parents=True)
    (lo_user / "registrymodifications.xcu").write_text(_libreoffice_registry(), encoding="utf-8")
    chromium = path / ".config/chromium"
    chromium.mkdir(parents=True)
    (chromium / "First Run").write_text("", encoding="utf-8")
    return path


def restore_home(template: Path, home: Path) -> None:
    """Make ``home`` an exact copy of ``template`` (the previous contents are deleted)."""
    for attempt in range(4):
        if not home.exists():
            break
        try:
            remove_tree(home)
        except OSError:
            if attempt == 3:
                raise
            time.sleep(0.25 * (attempt + 1))  # a dying app was still writing into it
    shutil.copytree(template, home, symlinks=True)


def remove_tree(top: Path) -> None:
    """``shutil.rmtree(top)``, making read-only files and unwritable directories inside ``top`` writable where
    a removal fails. Nothing outside ``top`` is touched: were the failing entry ``top`` itself (a dying app
    wrote into it again), loosening its parent's mode would lock the desktop user out of it (a desktop's
    root directory belongs to the trainer; at 0700 the user can no longer reach the home inside it)."""
    top_str = os.path.abspath(top)

    def writable_and_retry(func, path, _exc_info) -> None:  # type: ignore[no-untyped-def]
        path = os.path.abspath(path)
        try:
            for entry in (path, os.path.dirname(path)):
                if entry == top_str or entry.startswith(top_str + os.sep):
                    os.chmod(entry, 0o700)
            func(path)
        except FileNotFoundError:
            pass

    shutil.rmtree(top, onerror=writable_and_retry)


def remove_stale_work_dirs(prefix: str, *, only: Iterable[Path] | None = None) -> list[Path]:
    """Delete ``$TMPDIR/<prefix>*`` directories (or just ``only``) no live process has its home or working
    directory in; returns those still in use (a SIGKILLed attempt's desktops may not have exited yet)."""
    root = Path(tempfile.gettempdir())
    stale = [d for d in (root.glob(f"{prefix}*") if only is None else only) if d.is_dir()]
    if not stale:
        return []
    in_use: set[Path] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            in_use.add(Path(os.readlink(f"/proc/{pid}/cwd")))
        except OSError:
            continue
    busy = []
    for directory in stale:
        if any(directory == p or directory in p.parents for p in in_use):
            busy.append(directory)
            continue
        shutil.rmtree(directory, ignore_errors=True)
        log.info("removed the desktops a previous attempt of this run left", path=str(directory))
    return busy


def run_work_dir(run_dir: Path | None) -> tuple[Path, list[Path]]:
    """A fresh ``$TMPDIR/scalecua-desktops-<run name>-<path hash>-*`` directory for a run's desktops, and the
    directories a SIGKILLed attempt of this run left that are still in use (those no process uses are removed).

    The name shows which run owns the desktops; the hash of the run directory's absolute path is the same for
    every attempt of one run and keeps apart runs of one name in different output directories (two evaluations
    of one checkpoint started in the same second), so one never removes the other's desktops."""
    stale: list[Path] = []
    owner = ""
    if run_dir is not None:
        tag = hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:8]
        owner = f"{Path(run_dir).name}-{tag}-"
        stale = remove_stale_work_dirs(f"scalecua-desktops-{owner}")
    return Path(tempfile.mkdtemp(prefix=f"scalecua-desktops-{owner}")), stale
