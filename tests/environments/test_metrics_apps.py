"""OSWorld's settings-file metrics (VS Code settings.json, extension lists, Thunderbird prefs.js) and
``compare_docx_tables`` on real files written by python-docx."""

from __future__ import annotations

from pathlib import Path

import pytest
from docx import Document

from environments.judges.apps import (
    check_json_settings, check_thunderbird_filter, check_thunderbird_prefs, is_extension_installed, thunderbird_filters,
)
from environments.judges.documents import compare_docx_tables
from environments.judges.rules import match_value


def test_json_settings_need_every_expected_key_with_its_value(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"workbench.editor.wrapTabs": true, "editor.fontSize": 14}')
    assert check_json_settings(str(settings), {"expected": {"workbench.editor.wrapTabs": True}}) == 1.0
    assert check_json_settings(str(settings), {"expected": {"editor.fontSize": 16}}) == 0.0
    assert check_json_settings(str(settings), {"expected": {"files.autoSave": "afterDelay"}}) == 0.0
    settings.write_text('{// VS Code allows comments, plain JSON does not\n"a": 1}')
    assert check_json_settings(str(settings), {"expected": {"a": 1}}) == 0.0  # as upstream
    assert check_json_settings(str(tmp_path / "missing.json"), {"expected": {"a": 1}}) == 0.0
    with pytest.raises(ValueError, match="expected {'expected': ...}"):
        check_json_settings(str(settings), {"expect": {"a": 1}})


def test_extension_lists_contain_or_lack_the_extension() -> None:
    listed = "ms-python.python\nmattn.lisp\n"
    assert is_extension_installed(listed, {"type": "contain", "expected": "mattn.lisp"}) == 1.0
    assert is_extension_installed(listed, {"type": "not_contain", "expected": "mattn.lisp"}) == 0.0
    assert is_extension_installed(None, {"type": "not_contain", "expected": "x"}) == 0.0  # no output: upstream raises
    with pytest.raises(ValueError, match="use contain or not_contain"):
        is_extension_installed(listed, {"type": "equals", "expected": "x"})


PREFS = '''// Mozilla User Preferences
user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");
user_pref("mail.spam.manualMark", true);
user_pref("mailnews.default_sort_order", 2);
'''


def test_thunderbird_prefs_match_value_rules_including_regex_flags(tmp_path: Path) -> None:
    prefs = tmp_path / "prefs.js"
    prefs.write_text(PREFS)
    signature = {"mail.identity.id1.htmlSigText": {"method": "re.S", "ref": "Anonym.XYZ Lab"}}  # . spans \n
    assert check_thunderbird_prefs(str(prefs), {"expect": signature}) == 1.0
    assert check_thunderbird_prefs(str(prefs), {"expect": {"mail.identity.id1.htmlSigText": {
        "method": "re", "ref": "Anonym.XYZ Lab"}}}) == 0.0
    assert check_thunderbird_prefs(str(prefs), {"expect": {"mail.spam.manualMark": {"method": "eq", "ref": True},
                                                           "mailnews.default_sort_order": {"method": "eq", "ref": 2}}}) == 1.0
    assert check_thunderbird_prefs(str(prefs), {"expect": {"not.set": {"method": "eq", "ref": 1}}}) == 0.0
    assert check_thunderbird_prefs(str(prefs), {"unexpect": {"mail.spam.manualMark": {"method": "eq", "ref": True}}}) == 0.0
    with pytest.raises(ValueError, match="'SX' is not a regex flag"):
        match_value("x", {"method": "re.SX", "ref": "x"})


def _docx(path: Path, cells: list[list[str]]) -> str:
    doc = Document()
    doc.add_paragraph("Prices")
    table = doc.add_table(rows=len(cells), cols=len(cells[0]))
    for i, row in enumerate(cells):
        for j, text in enumerate(row):
            table.cell(i, j).text = text
    doc.save(path)
    return str(path)


def test_docx_tables_compare_cell_by_cell(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", [["item", "price"], ["tea", "3"]])
    assert compare_docx_tables(_docx(tmp_path / "same.docx", [["item ", "price"], ["tea", " 3"]]), gold) == 1.0
    assert compare_docx_tables(_docx(tmp_path / "cell.docx", [["item", "price"], ["tea", "4"]]), gold) == 0.0
    assert compare_docx_tables(_docx(tmp_path / "row.docx", [["item", "price"]]), gold) == 0.0
    junk = tmp_path / "junk.docx"
    junk.write_bytes(b"no zip")
    assert compare_docx_tables(str(junk), gold) == 0.0 and compare_docx_tables(None, gold) == 0.0


FILTERS = '''version="9"
logging="no"
name="Urgent \\"mail\\""
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Urgent"
condition="AND (subject,contains,urgent) AND (from,is,\\"boss, the\\")"
name="Spam"
enabled="no"
type="17"
action="Delete"
condition="ALL"
'''


def test_thunderbird_filters_expected_and_unexpected(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rules_file = tmp_path / "msgFilterRules.dat"
    rules_file.write_text(FILTERS, encoding="utf-8")
    filters = thunderbird_filters(FILTERS)
    assert [f["name"] for f in filters] == ['Urgent "mail"', "Spam"]
    assert filters[0]["condition"] == ["AND (subject,contains,urgent)", 'AND (from,is,"boss, the")']
    assert filters[1]["condition"] == ["ALL"]
    urgent = {"name": 'Urgent "mail"', "action": "Move to folder", "condition": ["AND (subject,contains,urgent)",
                                                                                 'AND (from,is,"boss, the")']}
    assert check_thunderbird_filter(str(rules_file), {"expect": [urgent]}) == 1.0
    assert check_thunderbird_filter(str(rules_file), {"expect": [{**urgent, "action": "Delete"}]}) == 0.0
    assert check_thunderbird_filter(str(rules_file), {"expect": [urgent], "unexpect": [{"name": "Spam"}]}) == 0.0
    assert check_thunderbird_filter(str(tmp_path / "missing.dat"), {"expect": [urgent]}) == 0.0
