"""What a non-root user needs to build and run our images: subordinate id ranges and newuidmap/newgidmap."""

from __future__ import annotations

import pwd

from environments.containers import rootless


def test_subordinate_ids_add_up_the_users_ranges_by_name_or_id(tmp_path):
    (tmp_path / "subuid").write_text("alice:100000:65536\nbob:200000:1000\n1234:300000:500\nbroken line\n"
                                     "alice:400000:10\n")
    assert rootless.subordinate_ids(tmp_path / "subuid", "alice", 1001) == 65546
    assert rootless.subordinate_ids(tmp_path / "subuid", "carol", 1234) == 500
    assert rootless.subordinate_ids(tmp_path / "subuid", "dave", 9) == 0
    assert rootless.subordinate_ids(tmp_path / "missing", "alice", 1001) == 0


def test_root_needs_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(rootless.os, "geteuid", lambda: 0)
    assert rootless.rootless_problem(tmp_path) is None


def test_a_user_without_ranges_is_told_what_to_add(monkeypatch, tmp_path):
    uid = 65534
    name = pwd.getpwuid(uid).pw_name
    monkeypatch.setattr(rootless.os, "geteuid", lambda: uid)
    monkeypatch.setattr(rootless.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    (tmp_path / "subuid").write_text(f"{name}:100000:65536\n")
    (tmp_path / "subgid").write_text(f"{name}:100000:1000\n")
    problem = rootless.rootless_problem(tmp_path)
    assert problem is not None and f"subgid grants {name} 1000 ids (needs 65536)" in problem
    assert "subuid grants" not in problem and f"--add-subgids 100000-165535 {name}" in problem
    (tmp_path / "subgid").write_text(f"{name}:100000:65536\n")
    assert rootless.rootless_problem(tmp_path) is None
    monkeypatch.setattr(rootless.shutil, "which", lambda tool: None)
    assert "newuidmap is not installed (apt-get install uidmap)" in rootless.rootless_problem(tmp_path)
