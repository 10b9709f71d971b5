"""The home a desktop starts from: restored exactly, and its removal never touches what lies above it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from environments import home_template


def test_a_dying_app_writing_into_the_home_leaves_the_desktop_root_reachable(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """CI once saw a task's setup fail with 'Permission denied' on the desktop's root: an app still dying wrote
    into the home while it was removed, and the retry loosened the home's *parent* to 0700, locking the
    unprivileged desktop user out. The app is simulated here by a file written into the home just before the
    first removal of the home directory itself."""
    template = home_template.write_default_template(tmp_path / "template")
    desk = tmp_path / "desk"
    home = desk / "home"
    home_template.restore_home(template, home)
    desk.chmod(0o755)
    (home / "Documents" / "report.txt").write_text("agent's work", encoding="utf-8")

    real_rmdir = os.rmdir
    writes = []

    def app_writes_once(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if os.path.abspath(path) == str(home) and not writes:
            (home / "late.log").write_text("written while dying", encoding="utf-8")
            writes.append(path)
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", app_writes_once)
    home_template.restore_home(template, home)

    assert writes, "the simulated app never wrote (rmtree no longer removes the home with os.rmdir?)"
    assert stat.S_IMODE(desk.stat().st_mode) == 0o755
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == sorted(
        p.relative_to(template) for p in template.rglob("*"))


def test_read_only_entries_inside_the_tree_are_removed(tmp_path: Path) -> None:
    top = tmp_path / "top"
    locked = top / "a" / "b"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x", encoding="utf-8")
    (locked / "f").chmod(0o400)
    locked.chmod(0o500)
    tmp_path.chmod(0o755)
    home_template.remove_tree(top)
    assert not top.exists()
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755



def test_runs_of_one_name_in_different_output_dirs_keep_their_desktops(tmp_path: Path) -> None:
    """Two evaluations of one checkpoint started in the same second get the same run name in two output
    directories; the second once removed the first's desktops as "left by a killed attempt" (its episodes then
    failed with FileNotFoundError). A later attempt of the *same* run still removes what the first left."""
    first_run, other_run = tmp_path / "a" / "eval-iter_000560-20261207-104912", tmp_path / "b" / "eval-iter_000560-20261207-104912"
    first, _ = home_template.run_work_dir(first_run)
    other, _ = home_template.run_work_dir(other_run)
    try:
        assert first.is_dir() and other.is_dir() and first != other
        again, busy = home_template.run_work_dir(first_run)  # the first run resumed: its old directory goes
        assert not first.exists() and other.is_dir() and busy == []
        assert again.name.startswith(f"scalecua-desktops-{first_run.name}-")
    finally:
        for path in (first, other, locals().get("again")):
            if path is not None and path.exists():
                path.rmdir()
