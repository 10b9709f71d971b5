"""Chrome profile judges on real local desktops (:mod:`environments.judges.chrome_profile`).

The getters read what Chrome keeps in ``~/.config/google-chrome`` (real SQLite databases and JSON files written
into a live desktop's home, read back through its probe) and pages served by a real HTTP server on loopback.
With a real browser (``google-chrome``: Chromium behind the probe's shim), a task's ``update_browse_history``
seeds the history before the browser starts, ``chrome_open_tabs`` / ``chrome_close_tabs`` open three pages and
close one, and the browser then keeps the seeded history and adds its own visits to it (so it took the
database that the step wrote)."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import time
import types
from contextlib import closing
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.types import JudgementStatus, Task
from environments.client import EnvironmentClient
from environments.judges import chrome_profile as cp
from environments.judges.browser import is_expected_tabs
from environments.judges.evaluate import EvaluationEnv
from tests.environments.desktops import one_desktop, serving_directory
from tests.environments.desktop_fixtures import DesktopSession, desktop  # noqa: F401 (fixture)
from tests.judges.test_chrome_profile import COOKIES_SCHEMA, VISITS

pytestmark = pytest.mark.desktop

TASK = Task(id="chrome-profile", instruction="-", evaluator={"func": "exact_match"})


def call(desktop: DesktopSession, cache: Path, body: Callable[[EvaluationEnv], Awaitable[Any]]) -> Any:
    async def main(client: EnvironmentClient) -> Any:
        env = types.SimpleNamespace(client=client, env_id=desktop.env_id, screen_size=(1280, 800))
        return await body(EvaluationEnv(env, TASK, cache))  # type: ignore[arg-type]

    return desktop.run(main)


@pytest.fixture()
def site(tmp_path: Path):  # type: ignore[no-untyped-def]
    root = tmp_path / "www"
    root.mkdir()
    for name in ("alpha", "beta", "gamma"):
        (root / f"{name}.html").write_text(f"<html><head><title> {name}\n page </title></head><body>{name}</body></html>")
    with serving_directory(root) as url:
        yield url


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def test_profile_getters_read_what_chrome_keeps(desktop: DesktopSession, tmp_path: Path, site: str) -> None:
    profile = desktop.home / ".config" / "google-chrome"
    getters = {"history": {"dest": "history.sqlite"}, "cookie_data": {"dest": "Cookies"}, "chrome_font_size": {},
               "enabled_experiments": {}, "find_installed_extension_name": {}}
    for name, config in getters.items():  # a profile Chrome never ran with: the evaluation scores 0
        with pytest.raises(FileNotFoundError, match="google-chrome"):
            call(desktop, tmp_path, lambda env, name=name, config=config: cp.GETTERS[name](env, config))

    (profile / "Default").mkdir(parents=True)
    (profile / "Default" / "History").write_bytes(cp.write_browse_history(None, VISITS, time.time()))
    with closing(sqlite3.connect(profile / "Default" / "Cookies")) as db:
        db.execute(COOKIES_SCHEMA)
        db.execute("INSERT INTO cookies VALUES (1, '.amazon.com', '', 'session-id', '1', x'', '/', 0, 1, 0, 0, 0, 1, "
                   "1, 0, 2, 443, 0, 0, 0)")
        db.commit()
    extensions = profile / "Default" / "Extensions"
    write_json(extensions / "aaaa" / "1.2_0" / "manifest.json",
               {"name": "__MSG_appName__", "default_locale": "de", "version": "1.2"})
    write_json(extensions / "aaaa" / "1.2_0" / "_locales" / "de" / "messages.json", {"APPNAME": {"message": "Übersetzer"}})
    write_json(extensions / "aaaa" / "1.2_0" / "_locales" / "en" / "messages.json",
               {"appName": {"message": "Google Translate"}})
    write_json(desktop.home / "unpacked" / "manifest.json", {"name": "My Unpacked", "version": "1"})
    write_json(profile / "Default" / "Preferences", {
        "webkit": {"webprefs": {"default_font_size": 24, "minimum_font_size": 6}},
        "extensions": {"settings": {
            "pdf": {"path": "/usr/lib/chromium/resources/pdf", "manifest": {"name": "Chromium PDF Viewer"}},
            "aaaa": {"path": "aaaa/1.2_0", "location": 1},
            "bbbb": {"path": str(desktop.home / "unpacked"), "location": 4},
            "cccc": {"path": "cccc/9.9_0"},  # its files are gone: no name to read
        }},
    })
    write_json(profile / "Local State", {"browser": {"enabled_labs_experiments": ["chrome-refresh-2023@2"]}})
    desktop_dir = desktop.home / "Desktop"
    (desktop_dir / "folder.desktop").mkdir(parents=True)
    (desktop_dir / "notes.txt").write_text("Name=2048\n")
    (desktop_dir / "2048.desktop").write_text("[Desktop Entry]\nName=2048\nExec=/usr/bin/chromium --app-id=x\n")

    got = {name: call(desktop, tmp_path, lambda env, name=name, config=config: cp.GETTERS[name](env, config))
           for name, config in getters.items()}
    history = [(url, title) for url, title, _ in got["history"]]
    assert history == [(v["url"], v["title"]) for v in VISITS] and (tmp_path / "history.sqlite").is_file()
    assert [row[1] for row in got["cookie_data"]] == [".amazon.com"]
    assert got["chrome_font_size"] == {"default_font_size": 24, "minimum_font_size": 6, "default_fixed_font_size": 13}
    assert got["enabled_experiments"] == ["chrome-refresh-2023@2"]
    assert got["find_installed_extension_name"] == ["Chromium PDF Viewer", "Google Translate", "My Unpacked"]
    shortcuts = call(desktop, tmp_path, lambda env: cp.get_shortcuts_on_desktop(env, {}))
    assert shortcuts == {"2048.desktop": "[Desktop Entry]\nName=2048\nExec=/usr/bin/chromium --app-id=x\n"}

    assert cp.check_history_deleted(got["history"], {"type": "keywords", "keywords": ["youtube"]}) == 0.0
    assert cp.check_history_deleted(got["history"], {"type": "keywords", "keywords": ["vimeo"]}) == 1.0
    assert cp.is_cookie_deleted(got["cookie_data"], {"type": "domains", "domains": ["amazon.com"]}) == 0.0
    assert cp.check_font_size(got["chrome_font_size"], {"type": "range", "min": 16, "max": 99999}) == 1.0
    assert cp.check_enabled_experiments(got["enabled_experiments"], {"type": "names", "names": []}) == 0.0
    assert cp.is_shortcut_on_desktop(shortcuts, {"type": "name", "name": "2048"}) == 1.0
    assert cp.is_expected_installed_extensions(got["find_installed_extension_name"],
                                               {"expected": ["Google Translate", "My Unpacked"]}) == 1.0
    (profile / "Default" / "Cookies").write_text("not a database")
    with pytest.raises(ValueError, match="SQLite"):
        call(desktop, tmp_path, lambda env: cp.get_cookie_data(env, {}))

    page = call(desktop, tmp_path, lambda env: cp.get_page_info(env, {"url": f"{site}/beta.html"}))
    assert page["title"] == "beta page" and page["url"] == f"{site}/beta.html" and "<body>beta</body>" in page["content"]
    assert cp.is_added_to_steam_cart(page, {"items": ["beta"]}) == 1.0
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}/cart/"
    assert call(desktop, tmp_path, lambda env: cp.get_page_info(env, {"url": dead})) == {
        "title": "Connection failed", "url": dead, "content": ""}
    with pytest.raises(ValueError, match="'url'"):
        call(desktop, tmp_path, lambda env: cp.get_page_info(env, {}))


def test_browser_keeps_seeded_history_and_closes_tabs(tmp_path: Path, site: str) -> None:
    urls = [f"{site}/{name}.html" for name in ("alpha", "beta", "gamma")]
    task = Task.model_validate({
        "id": "chrome-history", "instruction": "test",
        "config": [
            {"type": "update_browse_history", "parameters": {"history": VISITS}},
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": urls}},
            {"type": "chrome_close_tabs", "parameters": {"urls_to_close": [urls[2]]}},
        ],
        "evaluator": {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                      "expected": {"type": "rule", "rules": {"type": "url", "urls": urls[:2]}}},
    })

    async def body() -> tuple[float, list[tuple]]:
        async with one_desktop(tmp_path) as (pool, env):
            await env.reset(task)
            verdict = await pool.evaluate(env, task, judge=JudgeServices.of(load_plugins()), last_action=None)
            assert verdict.status == JudgementStatus.OK, verdict.error
            view = EvaluationEnv(env, task, tmp_path / "cache")  # type: ignore[arg-type]
            deadline = time.monotonic() + 60  # Chrome commits its history every few seconds
            while True:
                rows = await cp.get_history(view, {"dest": "History"})
                if any(row[0] == urls[0] for row in rows) or time.monotonic() > deadline:
                    return verdict.score, rows
                await asyncio.sleep(1)

    (tmp_path / "cache").mkdir()
    score, rows = asyncio.run(body())
    assert score == 1.0  # gamma's tab was closed, alpha and beta are open
    assert is_expected_tabs([{"url": u} for u in urls[:2]], {"type": "url", "urls": urls}) == 0.0
    visited = [row[0] for row in rows]
    assert visited[:len(VISITS)] == [v["url"] for v in VISITS]  # the seeded history, kept by the browser
    assert urls[0] in visited  # and the browser's own visit after it
    assert cp.check_history_deleted(rows, {"type": "keywords", "keywords": ["youtube"]}) == 0.0
