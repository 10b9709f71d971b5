"""Settings metrics (:mod:`environments.judges.apps`) against OSWorld's own on the same generated inputs:
``check_json_settings`` and ``is_extension_installed`` (vscode.py; 7 and 6 tasks) and
``check_thunderbird_prefs`` (thunderbird.py; 4). Scores must agree to 1e-6. Hypothesis draws VS Code settings
files (objects, other JSON, broken JSON) against the suite's ``expected`` dicts, ``code --list-extensions``
outputs, and ``prefs.js`` files against the suite's ``expect``/``unexpect`` rules (``re.S``, ``re``, ``eq``).
Where upstream raises (no command output; a preference that is not JSON; JSON that is not an object) ours
scores 0, checked by hand below.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.judges import apps as ours
from tests.judges.upstream import metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas", "PyPDF2")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def upstream(module: str, name: str) -> Any:
    return getattr(metrics_module(module, STUBS), name)


def same(mine: float, theirs: float) -> None:
    assert abs(float(mine) - float(theirs)) <= 1e-6, (mine, theirs)


# -- check_json_settings ---------------------------------------------------------------------------------

#: the suite's expected settings (9d425400, 6ed0a554, e2b5e914, 276cc624, 9439a27b, 70745df8, c6bf789c)
EXPECTED = [{"workbench.editor.wrapTabs": True}, {"folders": [{"path": "project"}, {"path": "data1"}]},
            {"python.analysis.diagnosticSeverityOverrides": {"reportMissingImports": "none"}},
            {"editor.wordWrapColumn": 50}, {"debug.focusEditorOnBreak": False},
            {"files.autoSave": "afterDelay", "files.autoSaveDelay": 500}, {"files.exclude": {"**/__pycache__": True}}, {}]
KEYS = sorted({k for e in EXPECTED for k in e} | {"editor.fontSize"})
VALUES = st.sampled_from([True, False, 1, 0, 50, 50.0, 500, "afterDelay", "none", None,
                          {"reportMissingImports": "none"}, {"**/__pycache__": True}, [{"path": "project"}, {"path": "data1"}]])
SETTINGS_JSON = (st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4).map(json.dumps)
                 | st.sampled_from(['["files.autoSave"]', '"editor.wordWrapColumn"', "5", "null", "{// comment\n}",
                                    "", '{"a": 1,}', '\ufeff{"editor.wordWrapColumn": 50}']))


@SETTINGS
@given(text=SETTINGS_JSON, expected=st.sampled_from(EXPECTED))
def test_check_json_settings_scores_as_osworld(text: str, expected: dict[str, Any]) -> None:
    theirs = upstream("vscode", "check_json_settings")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "settings.json"
        path.write_text(text, encoding="utf-8")
        rules = {"expected": expected}
        try:
            their_score = theirs(str(path), rules)
        except TypeError:  # JSON that is not an object, tested with a key upstream cannot look up
            their_score = 0.0
        same(ours.check_json_settings(str(path), rules), their_score)


def test_check_json_settings_without_a_file(tmp_path: Path) -> None:
    theirs = upstream("vscode", "check_json_settings")
    for result in (None, "", str(tmp_path / "missing.json")):
        same(ours.check_json_settings(result, {"expected": {"a": 1}}), theirs(result, {"expected": {"a": 1}}))


# -- is_extension_installed -----------------------------------------------------------------------------

EXTENSIONS = ["mattn.lisp", "ms-python.python", "undefined_publisher.test", "njpwerner.autodocstring", "test.py",
              "project.code-workspace", "ms-python.pylint"]


@SETTINGS
@given(listed=st.lists(st.sampled_from(EXTENSIONS) | st.text(max_size=8), max_size=4).map("\n".join),
       expected=st.sampled_from(EXTENSIONS + ["", "python"]), kind=st.sampled_from(["contain", "not_contain"]))
def test_is_extension_installed_scores_as_osworld(listed: str, expected: str, kind: str) -> None:
    rules = {"type": kind, "expected": expected}
    same(ours.is_extension_installed(listed, rules), upstream("vscode", "is_extension_installed")(listed, rules))


def test_is_extension_installed_without_output() -> None:
    """No output (the command could not run): upstream raises, whichever the rule type; ours scores 0."""
    for kind in ("contain", "not_contain"):
        with pytest.raises(TypeError):
            upstream("vscode", "is_extension_installed")(None, {"type": kind, "expected": "x"})
        assert ours.is_extension_installed(None, {"type": kind, "expected": "x"}) == 0.0


# -- check_thunderbird_prefs -----------------------------------------------------------------------------

PREF_VALUES = {
    "mail.identity.id1.htmlSigText": ["Anonym\nXYZ Lab", "Anonym XYZ Lab", "anonym\nxyz lab", "Anonym\n\nXYZ Lab"],
    "mail.identity.id1.auto_quote": [True, False, 0],
    "extensions.activeThemeID": ["firefox-compact-dark@mozilla.org", "default-theme@mozilla.org", "Dark"],
    "mail.server.default.applyIncomingFilters": [True, False],
    "mail.imap.use_status_for_biff": [True, False, "false"],
    "mail.server.server1.login_at_startup": [True, False],
}
RULES = {
    "mail.identity.id1.htmlSigText": [{"method": "re.S", "ref": "Anonym\\nXYZ Lab"}, {"method": "re", "ref": "Anonym.XYZ"},
                                      {"method": "re.S.I", "ref": "anonym.xyz"}],
    "mail.identity.id1.auto_quote": [{"method": "eq", "ref": False}, {"method": "eq", "ref": True}],
    "extensions.activeThemeID": [{"method": "re", "ref": "dark"}],
    "mail.server.default.applyIncomingFilters": [{"method": "eq", "ref": True}],
    "mail.imap.use_status_for_biff": [{"method": "eq", "ref": False}],
    "mail.server.server1.login_at_startup": [{"method": "eq", "ref": True}, {"method": "ne", "ref": True}],
}
PREF_LINE = st.sampled_from(sorted(PREF_VALUES)).flatmap(
    lambda key: st.sampled_from(PREF_VALUES[key]).map(lambda v: f'user_pref("{key}", {json.dumps(v)});'))
PREFS = st.lists(PREF_LINE | st.sampled_from(["// Mozilla User Preferences", "", "  ", "/* comment */"]),
                 max_size=8).map(lambda lines: "\n".join(lines) + "\n")
RULE_SET = st.dictionaries(st.sampled_from(sorted(RULES)), st.integers(0, 2), max_size=3).map(
    lambda picks: {k: RULES[k][i % len(RULES[k])] for k, i in picks.items()})


@SETTINGS
@given(prefs=PREFS, expect=RULE_SET, unexpect=RULE_SET)
def test_check_thunderbird_prefs_scores_as_osworld(prefs: str, expect: dict[str, Any], unexpect: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "prefs.js"
        path.write_text(prefs, encoding="utf-8")
        for rules in ({"expect": expect}, {"unexpect": unexpect}, {"expect": expect, "unexpect": unexpect}):
            same(ours.check_thunderbird_prefs(str(path), rules),
                 upstream("thunderbird", "check_thunderbird_prefs")(str(path), rules))


def test_check_thunderbird_prefs_where_upstream_raises(tmp_path: Path) -> None:
    theirs = upstream("thunderbird", "check_thunderbird_prefs")
    rules = {"expect": {"a": {"method": "eq", "ref": 1}}}
    same(ours.check_thunderbird_prefs(None, rules), theirs(None, rules))
    broken = tmp_path / "prefs.js"
    broken.write_text('user_pref("b", not json);\nuser_pref("a", 1);\n')
    with pytest.raises(ValueError):
        theirs(str(broken), rules)
    assert ours.check_thunderbird_prefs(str(broken), rules) == 1.0  # the broken line is skipped
    with pytest.raises(FileNotFoundError):
        theirs(str(tmp_path / "missing.js"), rules)
    assert ours.check_thunderbird_prefs(str(tmp_path / "missing.js"), rules) == 0.0
