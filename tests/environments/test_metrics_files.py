"""File, archive and editor-configuration checks on real files, zip and tar archives."""

from __future__ import annotations

import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from environments.judges import files as f


def folder(root: Path, contents: dict[str, str]) -> Path:
    for name, text in contents.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_archives_compare_member_by_member(tmp_path: Path) -> None:
    notes = {"notes/a.txt": "alpha\n", "notes/b.txt": "beta\n"}
    gold = shutil.make_archive(str(tmp_path / "gold"), "zip", folder(tmp_path / "g", notes))
    same = shutil.make_archive(str(tmp_path / "same"), "gztar", folder(tmp_path / "s", notes))
    half = shutil.make_archive(str(tmp_path / "half"), "zip",
                               folder(tmp_path / "h", {"notes/a.txt": "alpha\n", "notes/b.txt": "gamma\n"}))
    fewer = shutil.make_archive(str(tmp_path / "fewer"), "zip", folder(tmp_path / "f", {"notes/a.txt": "alpha\n"}))
    assert f.compare_archive(same, gold, file_path="notes") == 1.0  # a tar against a zip: members count
    assert f.compare_archive(half, gold, file_path="notes") == 0.5
    assert f.compare_archive(fewer, gold, file_path="notes") == 0.0
    assert f.compare_archive(None, gold) == 0.0
    with pytest.raises(ValueError, match="file_type 'audio' is not supported here"):
        f.compare_archive(same, gold, file_type="audio")


def test_a_tar_member_escaping_the_folder_is_refused(tmp_path: Path) -> None:
    evil = tmp_path / "evil.tar"
    payload = tmp_path / "payload.txt"
    payload.write_text("x", encoding="utf-8")
    with tarfile.open(evil, "w") as tar:
        tar.add(payload, arcname="../../escaped.txt")
    gold = shutil.make_archive(str(tmp_path / "gold"), "zip", folder(tmp_path / "g", {"a.txt": "x"}))
    assert f.compare_archive(str(evil), gold) == 0.0
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_zip_files_compare_bytes(tmp_path: Path) -> None:
    def make(name: str, members: dict[str, bytes]) -> str:
        with zipfile.ZipFile(tmp_path / name, "w") as archive:
            for member, data in members.items():
                archive.writestr(member, data)
        return str(tmp_path / name)

    gold = make("gold.zip", {"a.txt": b"1", "b/c.txt": b"2"})
    assert f.compare_zip_files(make("same.zip", {"b/c.txt": b"2", "a.txt": b"1"}), gold) == 1.0
    assert f.compare_zip_files(make("diff.zip", {"a.txt": b"1", "b/c.txt": b"3"}), gold) == 0.0
    assert f.compare_zip_files(make("less.zip", {"a.txt": b"1"}), gold) == 0.0
    (tmp_path / "bad.zip").write_bytes(b"nope")
    assert f.compare_zip_files(str(tmp_path / "bad.zip"), gold) == 0.0


def test_text_checks(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("12:00:01 start\nno time here\n23:59:60 leap\n24:00:00 invalid\n", encoding="utf-8")
    assert f.file_contains(str(log), {"expected": ["start", "leap"]}) == 1.0
    assert f.file_contains(str(log), {"expected": ["start", "stop"]}) == 0.0
    assert f.check_line_number(str(log), {"expected": "2"}) == 1.0
    assert f.check_line_number(str(log), {"expected": 3}) == 0.0
    assert f.compare_terminal_and_txt(str(log), log.read_text()) == 1.0
    assert f.compare_terminal_and_txt(str(log), "other") == 0.0

    mine, gold = tmp_path / "mine.py", tmp_path / "gold.py"
    mine.write_text("#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\ndef f():\n\treturn 1   \n\n", encoding="utf-8")
    gold.write_text("def f():\n    return 1\n", encoding="utf-8")
    assert f.compare_python_pure_text(str(mine), str(gold)) == 1.0
    gold.write_text("```python\ndef f():\n    return 1\n```\n", encoding="utf-8")
    assert f.compare_python_pure_text(str(mine), str(gold)) == 0.0


def test_editor_configuration(tmp_path: Path) -> None:
    binding = {"key": "ctrl+j", "command": "workbench.action.togglePanel"}
    keys = tmp_path / "keybindings.json"
    keys.write_text("// Place your key bindings in this file\n" + json.dumps([binding]), encoding="utf-8")
    assert f.check_json_keybindings(str(keys), {"expected": binding}) == 1.0
    assert f.check_json_keybindings(str(keys), {"expected": {**binding, "key": "ctrl+k"}}) == 0.0
    keys.write_text(json.dumps({"not": "a list"}), encoding="utf-8")
    assert f.check_json_keybindings(str(keys), {"expected": binding}) == 0.0

    config = tmp_path / "settings.conf"
    config.write_text("a=1\n", encoding="utf-8")
    assert f.compare_config(str(config), {"expected": "a=1\n"}) == 1.0
    assert f.compare_config(str(config), {"expected": "a=2\n"}) == 0.0
    assert f.compare_answer("42", {"expected": "42"}) == 1.0
    assert f.compare_answer("", {"expected": ""}) == 0.0


def test_mp3_tags(tmp_path: Path) -> None:
    from mutagen.easyid3 import EasyID3

    song = tmp_path / "Cheng Xiang - Missing You.mp3"
    song.write_bytes(b"\xff\xfb\x90\x00" + bytes(413))  # one silent MPEG frame header and padding
    assert f.check_mp3_meta(str(song), {"title": {"method": "eq", "ref": "Missing You"}}) == 0.0  # no ID3 yet
    tags = EasyID3()
    tags["title"], tags["artist"] = "Missing You", ["Cheng Xiang", "Guest"]
    tags.save(str(song))
    assert f.check_mp3_meta(str(song), {"title": {"method": "eq", "ref": "Missing You"},
                                        "artist": {"method": "eq", "ref": "Cheng Xiang,Guest"}}) == 1.0
    assert f.check_mp3_meta(str(song), {"album": {"method": "eq", "ref": ""}}) == 1.0  # a missing tag reads ""
    assert f.check_mp3_meta(str(song), {"artist": {"method": "eq", "ref": "Cheng Xiang"}}) == 0.0
