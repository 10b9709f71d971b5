"""The OS checks of :mod:`environments.judges.system` against OSWorld's own functions (``desktop-env``) on the
same inputs: timedatectl and gsettings outputs, directory trees, real SQLite files made here, tab URLs, clipboard
text; and upstream's Macy's URL parse (its getter module loaded with the browser/Drive packages as stubs and its
address-bar reader replaced by the URL under test). Every case must score the same. Where upstream crashes
(``None`` outputs, short outputs) ours scores 0: those cases are hand-derived.

``xlsx_last_row`` has no conformance test: upstream reads the sheet with pandas, which is not installed here;
its cases are derived by hand from pandas' documented ``read_excel`` conversion (openpyxl engine)."""

from __future__ import annotations

import sqlite3
import types
from datetime import datetime
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from environments.judges import system
from tests.judges.upstream import getters_module, metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")

TIMEDATECTL = """               Local time: Thu 2024-01-25 12:56:06 {abbr}
           Universal time: Thu 2024-01-25 12:56:06 UTC
                 RTC time: Thu 2024-01-25 12:56:05
                Time zone: {zone}
System clock synchronized: yes
              NTP service: inactive
          RTC in local TZ: no
"""


def upstream(module: str) -> Any:
    return metrics_module(module, STUBS)


def upstream_getters_chrome() -> types.ModuleType:
    """``desktop_env/evaluators/getters/chrome.py`` with playwright and pydrive stubbed (never called here)."""
    return getters_module("chrome", ("playwright", "pydrive"))


def same(ours: Any, theirs: Any) -> None:
    assert float(ours) == pytest.approx(float(theirs), abs=1e-9)


@pytest.mark.parametrize("zone,score", [
    ("Atlantic/Faroe (WET, +0000)", 1.0), ("Etc/UTC (UTC, +0000)", 1.0), ("Asia/Hong_Kong (HKT, +0800)", 0.0),
    ("America/St_Johns (NST, -0330)", 0.0), ("Etc/UTC (UTC, +0000) ", 0.0),
])
def test_is_utc_0_as_upstream(zone: str, score: float) -> None:
    text = TIMEDATECTL.format(abbr="WET", zone=zone)
    assert system.is_utc_0(text) == score
    same(system.is_utc_0(text), upstream("basic_os").is_utc_0(text))


def test_is_utc_0_without_a_time_zone_line() -> None:
    """Hand-derived: upstream indexes a missing line (IndexError) or splits None; ours scores 0."""
    assert system.is_utc_0("System has not been booted with systemd as init system (PID 1). Can't operate.\n") == 0
    assert system.is_utc_0(None) == 0.0
    assert system.is_utc_0("") == 0.0


def tree(*names: str) -> dict[str, Any]:
    return {"type": "directory", "name": "cpjpg", "children": [{"type": "file", "name": n} for n in names]}


@pytest.mark.parametrize("names,score", [
    (("a.jpg", "b.jpg"), 1.0), (("b.jpg", "a.jpg"), 1.0), (("a.jpg",), 0.0), (("a.jpg", "b.jpg", "c.png"), 0.0),
    (("a.jpg", "a.jpg"), 0.0), ((), 0.0),
])
def test_check_moved_jpgs_as_upstream(names: tuple[str, ...], score: float) -> None:
    rule = {"expected": ["a.jpg", "b.jpg"]}
    assert system.check_moved_jpgs(tree(*names), rule) == score
    same(system.check_moved_jpgs(tree(*names), rule), upstream("basic_os").check_moved_jpgs(tree(*names), rule))


def test_check_moved_jpgs_edges() -> None:
    assert system.check_moved_jpgs(tree(), {"expected": []}) == 1.0
    assert system.check_moved_jpgs(None, {"expected": ["a.jpg"]}) == 0.0  # upstream: TypeError
    with pytest.raises(ValueError, match="'expected'"):
        system.check_moved_jpgs(tree("a.jpg"), {"names": ["a.jpg"]})


@pytest.mark.parametrize("output,score", [
    ("['google-chrome.desktop', 'thunderbird.desktop']\n", 1.0),
    ("['thunderbird.desktop', 'google-chrome.desktop']", 1.0),
    ("['thunderbird.desktop', 'vim.desktop', 'google-chrome.desktop']\n", 0.0),
    ("['thunderbird.desktop']\n", 0.0),
    ("['thunderbird.desktop', 'thunderbird.desktop']\n", 0.0),
])
def test_check_gnome_favorite_apps_as_upstream(output: str, score: float) -> None:
    rule = {"expected": ["google-chrome.desktop", "thunderbird.desktop"]}
    assert system.check_gnome_favorite_apps(output, rule) == score
    same(system.check_gnome_favorite_apps(output, rule), upstream("basic_os").check_gnome_favorite_apps(output, rule))


def test_check_gnome_favorite_apps_never_evaluates_code(tmp_path: Path) -> None:
    """Hand-derived: upstream ``eval``s the output (and crashes on gsettings' ``@as []`` or an error)."""
    marker = tmp_path / "ran"
    hostile = f"[__import__('pathlib').Path({str(marker)!r}).touch()]"
    assert system.check_gnome_favorite_apps(hostile, {"expected": [None]}) == 0.0
    assert not marker.exists()
    assert system.check_gnome_favorite_apps("@as []\n", {"expected": []}) == 1.0
    assert system.check_gnome_favorite_apps("", {"expected": []}) == 0.0
    assert system.check_gnome_favorite_apps(None, {"expected": ["vim.desktop"]}) == 0.0


@pytest.fixture
def gloda(tmp_path: Path) -> str:
    """A database shaped like Thunderbird's global-messages-db: messages 1-3 in folder 13, starred (58) 1, 2."""
    path = tmp_path / "global-messages-db.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("create table messages (id integer primary key, folderID integer)")
        db.execute("create table messageAttributes (attributeID integer, value integer, messageID integer)")
        db.executemany("insert into messages values (?, ?)", [(1, 13), (2, 13), (3, 13), (4, 7)])
        db.executemany("insert into messageAttributes values (58, 1, ?)", [(1,), (2,)])
    db.close()
    return str(path)


STARRED = ("select sum(1) > 0 from messageAttributes where attributeID = 58 and value = 1 and messageID in "
           "(select id from messages where folderID = {folder});")


@pytest.mark.parametrize("sql", [
    STARRED.format(folder=13), STARRED.format(folder=7),
    "select count(*) = 3 from messages where folderID = 13", "select count(*) = 2 from messages where folderID = 13",
    "select sum(value) from messageAttributes where attributeID = 99",  # NULL
])
def test_run_sqlite3_as_upstream(gloda: str, sql: str) -> None:
    ours, theirs = system.run_sqlite3(gloda, {"sql": sql}), upstream("general").run_sqlite3(gloda, {"sql": sql})
    same(ours, theirs)
    assert ours == (1.0 if sql in (STARRED.format(folder=13), "select count(*) = 3 from messages where folderID = 13")
                    else 0.0)


def test_run_sqlite3_edges(gloda: str, tmp_path: Path) -> None:
    """Hand-derived: upstream crashes on a missing file (after creating it), no row, or a non-database."""
    missing = tmp_path / "missing.sqlite"
    assert system.run_sqlite3(str(missing), {"sql": "select 1"}) == 0.0 and not missing.exists()
    assert system.run_sqlite3(None, {"sql": "select 1"}) == 0.0
    assert system.run_sqlite3(gloda, {"sql": "select 1 from messages where id = 99"}) == 0.0
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    assert system.run_sqlite3(str(junk), {"sql": "select 1 from messages"}) == 0.0
    assert system.run_sqlite3(gloda, {"sql": "select 1 from tableThatIsNot"}) == 0.0
    with pytest.raises(ValueError, match="not valid SQL"):
        system.run_sqlite3(gloda, {"sql": "selec 1 frm messages"})
    with pytest.raises(ValueError, match="'sql'"):
        system.run_sqlite3(gloda, {"query": "select 1"})


SEARCH = {"expect": {"pattern": r"(?i)https?://(?:www\.)?google\.com/search\?q=nereida(?:&|$|#).*"}}


@pytest.mark.parametrize("url,score", [
    ("https://www.google.com/search?q=Nereida&sca_esv=1", 1.0), ("https://google.com/search?q=nereida", 1.0),
    ("https://www.google.com/search?q=nereidas", 0.0), ("https://www.bing.com/search?q=nereida", 0.0),
])
def test_is_expected_search_query_as_upstream(url: str, score: float) -> None:
    info = {"title": "t", "url": url, "content": ""}
    assert system.is_expected_search_query(info, SEARCH) == score
    same(system.is_expected_search_query(info, SEARCH), upstream("chrome").is_expected_search_query(info, SEARCH))
    same(system.is_expected_search_query(None, SEARCH), upstream("chrome").is_expected_search_query(None, SEARCH))


def test_is_expected_search_query_bad_rules() -> None:
    with pytest.raises(ValueError, match="'pattern'"):
        system.is_expected_search_query({"url": "x"}, {"expected": "x"})
    with pytest.raises(ValueError, match="not a regex"):
        system.is_expected_search_query({"url": "x"}, {"expect": {"pattern": "(unclosed"}})


@pytest.mark.parametrize("rule,clipboard,score", [
    ({"expected": "/home/user/Data3/List3/secret.docx"}, "/home/user/Data3/List3/secret.docx", 1.0),
    ({"expected": "/home/user/Data3/List3/secret.docx"}, "copied: /home/user/Data3/List3/secret.docx\n", 1.0),
    ({"expected": "/home/user/Data3/List3/secret.docx"}, "/home/user/secret.docx", 0.0),
    ({"expected": ["alpha", "beta"]}, "beta then alpha", 1.0),
    ({"expected": ["alpha", "beta"]}, "alpha only", 0.0),
    ({"expected": []}, "", 1.0),
])
def test_is_in_vm_clickboard_as_upstream(rule: dict[str, Any], clipboard: str, score: float) -> None:
    assert system.is_in_vm_clickboard(rule, clipboard) == score
    same(system.is_in_vm_clickboard(rule, clipboard), upstream("basic_os").is_in_vm_clickboard(rule, clipboard))


def test_is_in_vm_clickboard_edges() -> None:
    assert system.is_in_vm_clickboard({"expected": "x"}, None) == 0.0  # no clipboard tool: upstream TypeError
    with pytest.raises(ValueError, match="'expected'"):
        system.is_in_vm_clickboard("/home/user/secret.docx", "/home/user/secret.docx")


MACYS = [
    "https://www.macys.com/shop/mens-clothing/mens-casual-shirts/Men_regular_size_t,Price_discount_range,"
    "Sleeve_length/L,50_PERCENT_%20off%20%26%20more,Short%20Sleeve?id=20627",
    "https://www.macys.com/shop/mens-clothing/shirts/Men_regular_size_t,Price_discount_range/L,"
    "50_PERCENT_%20off%20%26%20more%7C30_PERCENT_%20off%20%26%20more",
    "https://www.macys.com/shop/mens-clothing/mens-casual-shirts/Product_department,Sleeve_length/Shirts,"
    "short-sleeve",
    "https://www.macys.com/shop/womens-clothing/dresses/Size,Price_discount_range/M,",
    "https://www.macys.com/shop/mens-clothing/shirts/Men_regular_size_t/L",
    "https://www.macys.com/",
]
KEYS = ["mens_clothing", "shirts", "Men_regular_size_t", "Price_discount_range", "short_sleeve"]


@pytest.mark.parametrize("url", MACYS)
@pytest.mark.parametrize("keys", [KEYS, ["Sleeve_length", "Size"], []])
def test_macys_url_fields_as_upstream(url: str, keys: list[str]) -> None:
    module = upstream_getters_chrome()
    original = module.get_active_url_from_accessTree
    module.get_active_url_from_accessTree = lambda env, config: url
    try:
        theirs = module.get_url_path_parse(None, {"parse_keys": keys})
    finally:
        module.get_active_url_from_accessTree = original
    assert system.macys_url_fields(url, keys) == theirs


def test_macys_url_fields_for_the_task() -> None:
    wanted = {"mens_clothing": True, "shirts": True, "Men_regular_size_t": "L",
              "Price_discount_range": "50_PERCENT_ off & more", "short_sleeve": True}
    assert system.macys_url_fields(MACYS[0], KEYS) == wanted
    assert system.macys_url_fields(MACYS[1], KEYS)["Price_discount_range"] == "not_50_PERCENT_ off & more"


def sheet(path: Path, rows: list[list[Any]]) -> str:
    book = openpyxl.Workbook()
    for row in rows:
        book.active.append(row)
    book.save(path)
    return str(path)


def test_xlsx_last_row_as_pandas_writes_it(tmp_path: Path) -> None:
    """Hand-derived from pandas' read_excel: an integral column stays int64, a gap makes it float64."""
    header = ["Name", "Citations", "h-index", "i10", "Title", "Link"]
    rows = [header, ["Geoffrey Hinton", 900000, 190, None, "Deep learning", "https://a.example/1"],
            ["Yann LeCun", 345074, 147, 372, "Deep learning", "https://hal.science/hal-04206682/document"],
            [None, None, None, None, None, None], [None] * 3]  # trailing empty rows are dropped
    path = sheet(tmp_path / "researchers.xlsx", rows)
    assert system.xlsx_last_row(path) == ["Yann LeCun", "345074", "147", "372.0", "Deep learning",
                                          "https://hal.science/hal-04206682/document"]


def test_xlsx_last_row_types(tmp_path: Path) -> None:
    rows = [["text", "num", "mixed", "flag", "when", "na", "float"],
            ["a", 1, "x", True, datetime(2024, 1, 2), "x", 1.5],
            ["b", 2, 3, False, None, "NA", 2.0]]
    path = sheet(tmp_path / "types.xlsx", rows)
    assert system.xlsx_last_row(path) == ["b", "2", "3", "False", "NaT", "nan", "2.0"]
    assert system.xlsx_last_row(sheet(tmp_path / "header.xlsx", [["only", "a", "header"]])) == []
    assert system.xlsx_last_row(sheet(tmp_path / "short.xlsx", [["a", "b"], ["x"], ["y", 7]])) == ["y", "7.0"]
    assert system.xlsx_last_row(sheet(tmp_path / "ragged.xlsx", [["a", "b"], ["x", 1], ["y"]])) == ["y", "nan"]


def test_getters_are_named_as_upstream() -> None:
    assert sorted(system.GETTERS) == ["content_from_vm_file", "default_video_player", "url_path_parse",
                                      "vm_terminal_output", "vm_wallpaper"]
    for name in system.METRICS:
        assert callable(getattr(system, name))
