"""Chrome profile judges (:mod:`environments.judges.chrome_profile`): every metric against OSWorld's own function
(``desktop_env/evaluators/metrics/chrome.py``) on the same inputs — history and cookie rows read from real SQLite
databases in Chrome's schema, font settings, experiments, shortcut files, extension names, page contents — plus
the cases upstream cannot take (it crashes on ``None`` and on unknown rule types), and the ``History`` that the
``update_browse_history`` setup step writes (hand-derived: upstream's step cannot be imported here, it needs
playwright, pydrive and requests_toolbelt, and downloads its empty template from the network)."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from environments.judges import chrome_profile as cp
from tests.judges.upstream import metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")
NOW = 1_700_000_000.0
#: Chrome's ``cookies`` table (Chrome 156, version 24)
COOKIES_SCHEMA = (
    "CREATE TABLE cookies(creation_utc INTEGER NOT NULL,host_key TEXT NOT NULL,top_frame_site_key TEXT NOT NULL,"
    "name TEXT NOT NULL,value TEXT NOT NULL,encrypted_value BLOB NOT NULL,path TEXT NOT NULL,expires_utc INTEGER "
    "NOT NULL,is_secure INTEGER NOT NULL,is_httponly INTEGER NOT NULL,last_access_utc INTEGER NOT NULL,has_expires "
    "INTEGER NOT NULL,is_persistent INTEGER NOT NULL,priority INTEGER NOT NULL,samesite INTEGER NOT NULL,"
    "source_scheme INTEGER NOT NULL,source_port INTEGER NOT NULL,last_update_utc INTEGER NOT NULL,source_type "
    "INTEGER NOT NULL,has_cross_site_ancestor INTEGER NOT NULL)"
)
VISITS = [
    {"url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ", "title": "Rick", "visit_time_from_now_in_seconds": 3600},
    {"url": "https://www.nytimes.com/", "title": "The New York Times", "visit_time_from_now_in_seconds": 300},
    {"url": "https://www.youtube.com/watch?v=9bZkp7q19f0", "title": "PSY", "visit_time_from_now_in_seconds": 1631.5},
    {"url": "https://www.bbc.co.uk/", "title": "BBC", "visit_time_from_now_in_seconds": 1500},
]


@pytest.fixture(scope="module")
def theirs() -> Any:
    return metrics_module("chrome", STUBS)


def history_rows(tmp_path: Path, entries: list[dict[str, Any]]) -> list[tuple]:
    path = tmp_path / f"History{len(list(tmp_path.iterdir()))}"
    path.write_bytes(cp.write_browse_history(None, entries, NOW))
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT url, title, last_visit_time FROM urls").fetchall()


def cookie_rows(tmp_path: Path, hosts: list[str]) -> list[tuple]:
    with closing(sqlite3.connect(tmp_path / "Cookies")) as db:
        db.execute("DROP TABLE IF EXISTS cookies")
        db.execute(COOKIES_SCHEMA)
        for index, host in enumerate(hosts):
            db.execute("INSERT INTO cookies VALUES (?, ?, '', ?, 'v', x'', '/', 0, 1, 0, 0, 0, 1, 1, 0, 2, 443, 0, 0, "
                       "0)", (13_300_000_000_000_000 + index, host, f"c{index}"))
        db.commit()
        return db.execute("SELECT * FROM cookies").fetchall()


def same(ours: Any, upstream: Any, result: Any, rules: Any, expected: float) -> None:
    mine, theirs = ours(result, rules), upstream(result, rules)
    assert mine == pytest.approx(theirs, abs=1e-9), (ours.__name__, result, rules)
    assert mine == expected, (ours.__name__, result, rules)


def test_history_and_cookie_rules_as_upstream(tmp_path: Path, theirs: Any) -> None:
    full = history_rows(tmp_path, VISITS)
    without = history_rows(tmp_path, [v for v in VISITS if "youtube" not in v["url"]])
    empty = history_rows(tmp_path, [])
    for rows, keywords, expected in ((full, ["youtube"], 0.0), (without, ["youtube"], 1.0), (empty, ["youtube"], 1.0),
                                     (full, ["vimeo", "bbc.co"], 0.0), (full, ["vimeo"], 1.0), (full, [], 1.0)):
        same(cp.check_history_deleted, theirs.check_history_deleted, rows, {"type": "keywords", "keywords": keywords},
             expected)
    rule = {"type": "domains", "domains": [".amazon.com"]}
    for hosts, expected in (([".amazon.com", ".google.com"], 0.0), (["www.amazon.com"], 0.0), ([".google.com"], 1.0),
                            (["amazon.co.uk"], 0.0), (["smile.amazon.com"], 1.0), ([], 1.0)):
        same(cp.is_cookie_deleted, theirs.is_cookie_deleted, cookie_rows(tmp_path, hosts), rule, expected)
    same(cp.is_cookie_deleted, theirs.is_cookie_deleted, cookie_rows(tmp_path, [".ebay.com", "x.org"]),
         {"type": "domains", "domains": ["google.com", "ebay.com"]}, 0.0)


def test_preference_rules_as_upstream(theirs: Any) -> None:
    for size, rules, expected in (
        (20, {"type": "range", "min": 16, "max": 99999}, 1.0), (16, {"type": "range", "min": 16, "max": 99999}, 0.0),
        (99999, {"type": "range", "min": 16, "max": 99999}, 0.0), (16, {"type": "value", "value": 16}, 1.0),
        (17, {"type": "value", "value": 16}, 0.0), (16.0, {"type": "value", "value": 16}, 1.0),
    ):
        font = {**cp.FONT_DEFAULTS, "default_font_size": size}
        same(cp.check_font_size, theirs.check_font_size, font, rules, expected)
    names = {"type": "names", "names": ["chrome-refresh-2023", "chrome-webui-refresh-2023"]}
    for experiments, expected in ((["chrome-refresh-2023@2", "chrome-webui-refresh-2023@1"], 1.0),
                                  (["chrome-refresh-2023", "chrome-webui-refresh-2023"], 1.0),
                                  (["chrome-webui-refresh-2023@1", "chrome-refresh-2023@2"], 0.0),  # order counts
                                  (["chrome-refresh-2023@2"], 0.0), ([], 0.0)):
        same(cp.check_enabled_experiments, theirs.check_enabled_experiments, experiments, names, expected)
    same(cp.check_enabled_experiments, theirs.check_enabled_experiments, [], {"type": "names", "names": []}, 1.0)


def test_shortcut_extension_and_cart_rules_as_upstream(theirs: Any) -> None:
    app = "/opt/google/chrome/google-chrome --profile-directory=Default --app-id=poahllcmmahlafplfhgjomkjmeblpapf"
    shortcut = f"[Desktop Entry]\nVersion=1.0\nName=2048 game\nExec={app}\nIcon=chrome-app\n"
    for shortcuts, rules, expected in (
        ({"a.desktop": shortcut}, {"type": "exec", "exec": app}, 1.0),
        ({"a.desktop": shortcut}, {"type": "name", "name": "2048 game"}, 1.0),
        ({"a.desktop": shortcut}, {"type": "name", "name": "2048"}, 0.0),
        ({"a.desktop": shortcut.rstrip("\n")}, {"type": "name", "name": "Icon"}, 0.0),
        ({"a.desktop": f"Name=x\nExec={app}"}, {"type": "exec", "exec": app}, 0.0),  # no newline after it
        ({"a.desktop": "Name=x\n", "b.desktop": shortcut}, {"type": "exec", "exec": app}, 1.0),
        ({}, {"type": "exec", "exec": app}, 0.0),
    ):
        same(cp.is_shortcut_on_desktop, theirs.is_shortcut_on_desktop, shortcuts, rules, expected)
    wanted = {"expected": ["Momentum", "Google Translate"]}
    for installed, expected in ((["Chromium PDF Viewer", "Google Translate", "Momentum"], 1.0),
                                (["Momentum"], 0.0), ([], 0.0), (["Momentum", "Google Translate"], 1.0)):
        same(cp.is_expected_installed_extensions, theirs.is_expected_installed_extensions, installed, wanted, expected)
    cart = {"title": "Shopping Cart", "url": "https://store.steampowered.com/cart/",
            "content": "<div class='cart_item'>The Dota 2 Official Soundtrack</div><div>Dota 2 - Artifact</div>"}
    for items, expected in ((["The Dota 2 Official Soundtrack"], 1.0),
                            (["The Dota 2 Official Soundtrack", "Dota 2 - Artifact"], 1.0),
                            (["The Dota 2 Official Soundtrack", "Dota 2 Player Profiles"], 0.0), ([], 1.0)):
        same(cp.is_added_to_steam_cart, theirs.is_added_to_steam_cart, cart, {"items": items}, expected)


def test_what_upstream_cannot_take() -> None:
    """Upstream raises on a missing result (it indexes into ``None``); ours scores 0. Unknown rule types are an
    error in both (upstream's TypeError, our ValueError naming what the rule needs)."""
    assert cp.check_history_deleted(None, {"type": "keywords", "keywords": ["x"]}) == 0.0
    assert cp.is_cookie_deleted(None, {"type": "domains", "domains": ["x.com"]}) == 0.0
    assert cp.check_font_size(None, {"type": "value", "value": 16}) == 0.0
    assert cp.check_font_size({"minimum_font_size": 6}, {"type": "value", "value": 16}) == 0.0
    assert cp.check_enabled_experiments(None, {"type": "names", "names": []}) == 0.0
    assert cp.is_shortcut_on_desktop(None, {"type": "name", "name": "x"}) == 0.0
    assert cp.is_expected_installed_extensions(None, {"expected": []}) == 0.0
    assert cp.is_added_to_steam_cart(None, {"items": []}) == 0.0
    for metric, rules in ((cp.check_history_deleted, {"type": "domains"}), (cp.is_cookie_deleted, {"type": "names"}),
                          (cp.check_font_size, {"type": "max"}), (cp.check_enabled_experiments, None),
                          (cp.is_shortcut_on_desktop, {"type": "url", "url": "x"}),
                          (cp.is_expected_installed_extensions, {"names": []}), (cp.is_added_to_steam_cart, {})):
        with pytest.raises(ValueError, match=metric.__name__):
            metric([], rules)


def test_page_title_is_document_title() -> None:
    page = "<html><head><title>\n  Shopping   Cart </title></head><body>x</body></html>"
    assert cp.page_title(page) == "Shopping Cart"
    assert cp.page_title("<title>first</title><svg><title>second</title></svg>") == "first"
    assert cp.page_title("<p>no title</p>") == ""


def read_history(data: bytes, tmp_path: Path) -> tuple[list[tuple], list[tuple], set[str]]:
    path = tmp_path / "read.sqlite"
    path.write_bytes(data)
    with closing(sqlite3.connect(path)) as db:
        urls = db.execute("SELECT id, url, title, visit_count, typed_count, last_visit_time, hidden "
                          "FROM urls").fetchall()
        visits = db.execute("SELECT url, visit_time, from_visit, transition, segment_id, visit_duration "
                            "FROM visits ORDER BY id").fetchall()
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    path.unlink()
    return urls, visits, tables


def test_browse_history_holds_exactly_the_entries(tmp_path: Path) -> None:
    """As upstream: one ``urls`` row per entry (a URL listed twice is two rows), visited once, never typed, at
    now minus the entry's seconds in Chrome's microseconds since 1601-01-01 UTC; one link visit per row."""
    entries = [*VISITS, VISITS[0]]
    urls, visits, tables = read_history(cp.write_browse_history(None, entries, NOW), tmp_path)
    chrome_now = (int(NOW) + 11_644_473_600) * 1_000_000
    ago = [int(e["visit_time_from_now_in_seconds"] * 10**6) for e in entries]
    assert urls == [(i + 1, e["url"], e["title"], 1, 0, chrome_now - ago[i], 0) for i, e in enumerate(entries)]
    assert urls[0][5] == 13_344_470_000_000_000  # 2023-11-14 21:13:20 UTC, an hour before NOW
    assert visits == [(row[0], row[5], 0, 805_306_368, 0, 0) for row in urls]
    assert {"meta", "urls", "visits"} <= tables

    # the profile's own History is the template: emptied (every table but meta), its schema and extra tables kept
    template = tmp_path / "template.sqlite"
    template.write_bytes(cp.write_browse_history(None, VISITS, NOW - 86_400))
    with closing(sqlite3.connect(template)) as db:
        db.execute("CREATE TABLE keyword_search_terms (keyword_id INTEGER NOT NULL, url_id INTEGER NOT NULL, "
                   "term LONGVARCHAR NOT NULL, normalized_term LONGVARCHAR NOT NULL)")
        db.execute("INSERT INTO keyword_search_terms VALUES (1, 1, 'Cats', 'cats')")
        db.execute("INSERT INTO meta VALUES ('early_expiration_threshold', '13300000000000000')")
        db.commit()
    rewritten = cp.write_browse_history(template.read_bytes(), VISITS[1:2], NOW)
    urls, visits, tables = read_history(rewritten, tmp_path)
    assert [row[1:3] for row in urls] == [("https://www.nytimes.com/", "The New York Times")]
    assert len(visits) == 1 and visits[0][0] == urls[0][0]
    path = tmp_path / "again.sqlite"
    path.write_bytes(rewritten)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT COUNT(*) FROM keyword_search_terms").fetchone() == (0,)
        assert dict(db.execute("SELECT key, value FROM meta")) == {
            "version": "70", "last_compatible_version": "16", "early_expiration_threshold": "13300000000000000"}

    # a History that is not Chrome's database: a fresh one
    urls, _, _ = read_history(cp.write_browse_history(b"not a database" * 100, VISITS[:1], NOW), tmp_path)
    assert [row[1] for row in urls] == [VISITS[0]["url"]]


@pytest.mark.parametrize("step, needs", [
    ({"type": "update_browse_history", "parameters": {"history": [{"url": "https://a.org/", "title": "A"}]}},
     "visit_time_from_now_in_seconds"),
    ({"type": "update_browse_history", "parameters": {}}, "'history'"),
    ({"type": "chrome_close_tabs", "parameters": {"urls_to_close": []}}, "'urls_to_close'"),
    ({"type": "chrome_close_tabs", "parameters": {"urls_to_close": "https://a.org/"}}, "'urls_to_close'"),
])
def test_setup_steps_refuse_bad_parameters_before_touching_the_desktop(step: dict[str, Any], needs: str) -> None:
    """The steps check their parameters first, so no desktop (``client=None``) is ever reached."""
    from environments.setup import SetupError, run_setup

    with pytest.raises(SetupError, match=needs) as caught:
        asyncio.run(run_setup(None, [step]))  # type: ignore[arg-type]
    assert caught.value.step_type == step["type"]
