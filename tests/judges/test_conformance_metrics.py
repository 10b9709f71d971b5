"""General metrics (:mod:`environments.judges.metrics`) against OSWorld's own on the same generated inputs:
``check_include_exclude`` (general.py; 20 tasks), ``check_list`` (general.py; 7), ``compare_text_file``
(vscode.py; 6) and ``compare_csv`` (table.py; 4). Scores must agree to 1e-6; hypothesis draws command outputs,
text files (blank runs, tabs, carriage returns, case, trailing blank lines) and regex rules in the forms the
public suite's tasks use. Inputs upstream raises on (a missing file, a file that is not UTF-8 for the text
metrics, a result that holds nothing) score 0 here and are checked by hand below.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.judges import metrics as ours
from tests.judges.upstream import metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def upstream(module: str, name: str) -> Any:
    return getattr(metrics_module(module, STUBS), name)


def same(mine: float, theirs: float) -> None:
    assert abs(float(mine) - float(theirs)) <= 1e-6, (mine, theirs)


def write(folder: Path, name: str, data: str | bytes) -> str:
    path = folder / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return str(path)


# -- check_include_exclude: command output against include/exclude strings --------------------------------

#: phrases as the tasks' eval scripts print them (and pieces of them, so include/exclude overlap)
PHRASES = ["use terminal", "use no terminal", "true", "false", "error", "not found", "spotify", "killed from terminal",
           "not killed from terminal", "Success: file1 exists in dir1.\n", "Large text enabled", "43 132", ""]
OUTPUT = st.lists(st.sampled_from(PHRASES) | st.text(max_size=12), max_size=5).map("\n".join)
NEEDLES = st.lists(st.sampled_from(PHRASES) | st.text(max_size=4), max_size=3)


@SETTINGS
@given(output=OUTPUT | st.none(), include=NEEDLES | st.none(), exclude=NEEDLES | st.none())
def test_check_include_exclude_scores_as_osworld(output: str | None, include: Any, exclude: Any) -> None:
    rules = {k: v for k, v in (("include", include), ("exclude", exclude)) if v is not None}
    same(ours.check_include_exclude(output, rules), upstream("general", "check_include_exclude")(output, rules))


def test_check_include_exclude_on_lists_and_what_upstream_raises_on() -> None:
    theirs = upstream("general", "check_include_exclude")
    for result in (["vlc.desktop", "x"], ["vlc"]):  # a list: membership, not substrings
        same(ours.check_include_exclude(result, {"include": ["vlc"]}), theirs(result, {"include": ["vlc"]}))
    with pytest.raises(TypeError):
        theirs(3, {"include": ["3"]})
    assert ours.check_include_exclude(3, {"include": ["3"]}) == 0.0


# -- text files ----------------------------------------------------------------------------------------

TEXT = st.text(st.sampled_from(list("abcAB \t\n\r\x0b\x0c\u2028\xa0é,;")), max_size=30)


@SETTINGS
@given(actual=TEXT, gold=TEXT, ignore_blanks=st.booleans(), ignore_case=st.booleans())
def test_compare_text_file_scores_as_osworld(actual: str, gold: str, ignore_blanks: bool, ignore_case: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        a, b = write(Path(folder), "a.txt", actual), write(Path(folder), "b.txt", gold)
        options = {"ignore_blanks": ignore_blanks, "ignore_case": ignore_case}
        same(ours.compare_text_file(a, b, **options), upstream("vscode", "compare_text_file")(a, b, **options))
        same(ours.compare_text_file(a, a, **options), 1.0)


def test_compare_text_file_where_upstream_raises(tmp_path: Path) -> None:
    theirs = upstream("vscode", "compare_text_file")
    gold = write(tmp_path, "gold.txt", "x")
    one, other = write(tmp_path, "one.txt", b"x\xff"), write(tmp_path, "other.txt", b"x\xfe")
    for result, expected in ((str(tmp_path / "missing"), gold), (one, other), (gold, None)):
        with pytest.raises((OSError, UnicodeDecodeError, TypeError)):
            theirs(result, expected)
        assert ours.compare_text_file(result, expected) == 0.0  # never 1 for two different undecodable files
    same(ours.compare_text_file(None, gold), theirs(None, gold))


#: the rule forms of the suite's check_list tasks (wmctrl, gsettings, ls and diff outputs)
PATTERNS = [r"\bCOMPANY\.msf\b", r"\bCOMPANY/?(?!\.msf)", r"Orchis", r".+", r"^a", r"b$", r"a\s$", r"\n", r"\r",
            r"openjdk-\d+-(jre|jdk)", r"\u6b61.*\.eml", r"^$", r"\s", r"x{0}"]
LIST_TEXT = st.lists(st.sampled_from(["COMPANY.msf", "COMPANY", "Orchis-dark", "openjdk-17-jre", "a ", "b", "",
                                      "\u6b61\u8fce x.eml", "ab\r", "\x0cb", "c\u2028a"]), max_size=5)


@SETTINGS
@given(lines=LIST_TEXT, newline=st.sampled_from(["\n", "\r\n", "\r"]), end=st.booleans(),
       expect=st.lists(st.sampled_from(PATTERNS), max_size=3), unexpect=st.lists(st.sampled_from(PATTERNS), max_size=2))
def test_check_list_scores_as_osworld(lines: list[str], newline: str, end: bool, expect: list[str],
                                      unexpect: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), "list.out", newline.join(lines) + (newline if end and lines else ""))
        for rules in ({"expect": expect}, {"unexpect": unexpect}, {"expect": expect, "unexpect": unexpect}):
            same(ours.check_list(path, rules), upstream("general", "check_list")(path, rules))


def test_check_list_without_a_file(tmp_path: Path) -> None:
    same(ours.check_list(None, {"expect": ["x"]}), upstream("general", "check_list")(None, {"expect": ["x"]}))
    with pytest.raises(FileNotFoundError):
        upstream("general", "check_list")(str(tmp_path / "missing"), {"unexpect": [".+"]})
    assert ours.check_list(str(tmp_path / "missing"), {"unexpect": [".+"]}) == 0.0


# -- compare_csv: one gold file or several (3680a5ee gives a multi cloud_file) ----------------------------

CSV_LINE = st.sampled_from(["name,team", "Ada,Core", " Ada,Core ", "ada,core", "", "Linus,Kernel", "é,ü"])
CSV = st.tuples(st.lists(CSV_LINE, max_size=4), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans(),
                st.sampled_from(["utf-8", "latin-1", "utf-8-sig"]))


def csv_bytes(drawn: tuple[list[str], str, bool, str]) -> bytes:
    lines, newline, end, encoding = drawn
    return (newline.join(lines) + (newline if end else "")).encode(encoding)


@SETTINGS
@given(result=CSV, golds=st.lists(CSV, min_size=1, max_size=3), strict=st.booleans(), ignore_case=st.booleans(),
       as_list=st.booleans())
def test_compare_csv_scores_as_osworld(result: Any, golds: list[Any], strict: bool, ignore_case: bool,
                                       as_list: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        actual = write(Path(folder), "out.csv", csv_bytes(result))
        paths = [write(Path(folder), f"gold{i}.csv", csv_bytes(g)) for i, g in enumerate(golds)]
        expected: Any = paths if as_list else paths[0]
        options = {"strict": strict, "ignore_case": ignore_case}
        same(ours.compare_csv(actual, expected, **options), upstream("table", "compare_csv")(actual, expected, **options))


def test_compare_csv_with_files_missing(tmp_path: Path) -> None:
    theirs = upstream("table", "compare_csv")
    gold = write(tmp_path, "gold.csv", "a,b\n")
    missing = str(tmp_path / "missing.csv")
    for result, expected in ((None, gold), (missing, gold), (gold, missing), (gold, [missing, gold])):
        same(ours.compare_csv(result, expected), theirs(result, expected))
    with pytest.raises(TypeError):  # a multi getter's None for a missing gold
        theirs(gold, [None, gold])
    assert ours.compare_csv(gold, [None, gold]) == 1.0
