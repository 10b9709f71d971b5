"""OSWorld's Chrome tabs on real local desktops: ``google-chrome`` (Chromium behind the probe's shim) opened
by a task's ``launch`` step with OSWorld's fixed DevTools port, ``chrome_open_tabs`` opening pages served by a
real HTTP server on loopback, ``open_tabs_info`` + ``is_expected_tabs`` judging them. Two desktops run the
same task side by side (with OSWorld's socat forward of port 9222 to 1337, as every Chrome task has): the shim gives
each browser its own port, so neither sees the other's tabs."""

from __future__ import annotations

import asyncio
import functools
import http.server
import threading
import types
from pathlib import Path

import pytest

from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.types import JudgementStatus, Task
from environments.judges import chrome
from environments.judges.browser import (
    compare_urls, is_expected_bookmarks, is_expected_tabs, is_expected_url_pattern_match,
)
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions

pytestmark = pytest.mark.desktop


@pytest.fixture()
def site(tmp_path: Path):  # type: ignore[no-untyped-def]
    for name in ("alpha", "beta"):  # beta.html is also served for beta.html?q=...
        (tmp_path / f"{name}.html").write_text(f"<html><head><title>{name}</title></head><body>{name}</body></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_two_desktops_open_and_judge_their_own_tabs(tmp_path: Path, site: str) -> None:
    urls = [f"{site}/alpha.html", f"{site}/beta.html?q=cats&lang=en"]
    task = Task.model_validate({
        "id": "chrome-tabs", "instruction": "test",
        "config": [
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": urls}},
        ],
        "evaluator": {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                      "expected": {"type": "rule", "rules": {"type": "url", "urls": urls}}},
    })
    wrong = task.model_copy(deep=True)
    wrong.evaluator.expected["rules"]["urls"] = [urls[0]]  # type: ignore[index]
    judge = JudgeServices.of(load_plugins())

    async def one(pool: LocalDesktopBackend) -> tuple[float, float, list[str]]:
        env = await pool.acquire()
        try:
            await env.reset(task)
            right = await pool.evaluate(env, task, judge=judge, last_action=None)
            assert right.status == JudgementStatus.OK, right.error
            missed = await pool.evaluate(env, wrong, judge=judge, last_action=None)
            # the tab opened last is the active one
            view = types.SimpleNamespace(client=env.client)
            assert await chrome.get_active_url_from_accessTree(view, {"goto_prefix": "http://"}) == urls[1]
            info = await chrome.get_active_tab_info(view, {"goto_prefix": "http://"})
            assert info is not None and info["title"] == "beta" and "<body>beta</body>" in info["content"]
            parsed = await chrome.get_active_tab_url_parse(
                view, {"goto_prefix": "http://", "parse_keys": ["q", "lang"], "replace": {"q": "query"}})
            assert parsed == {"lang": "en", "query": "cats"}
            part = {"goto_prefix": "http://", "partIndex": 3, "needDeleteId": True, "returnType": "json", "key": "page"}
            assert await chrome.get_url_dashPart(view, part) == {"page": "beta.html"}
            assert await chrome.get_url_dashPart(view, {**part, "partIndex": 9}) is None
            profile = env.home_dir / ".config" / "google-chrome"
            return right.score, missed.score, sorted(p.name for p in profile.iterdir())
        finally:
            await pool.release(env, discard=True)

    async def body() -> list[tuple[float, float, list[str]]]:
        pool = LocalDesktopBackend(LocalDesktopOptions(work_dir=str(tmp_path / "envs"), max_environments=2,
                                                       desktop_user=None, settle_s=0.1))
        try:
            return await asyncio.gather(one(pool), one(pool))
        finally:
            await pool.close()

    for right, missed, profile in asyncio.run(body()):
        assert (right, missed) == (1.0, 0.0)
        assert "DevToolsActivePort" in profile  # Chrome's profile directory, a port of its own


def test_url_rules_as_upstream() -> None:
    assert compare_urls("airbnb.com", "https://www.airbnb.com.sg/") is False  # the scheme still counts
    assert compare_urls("http://airbnb.com", "http://www.airbnb.com.sg/")
    assert compare_urls("https://maps.google.com/x?q=1", "https://maps.google.co.uk/x?q=1")
    assert not compare_urls("https://maps.google.com/x?q=1", "https://maps.google.com/x?q=2")
    assert compare_urls(None, None) and not compare_urls(None, "http://a.com")
    tabs = [{"title": "a", "url": "http://a.com/"}, {"title": "b", "url": "http://www.b.com"}]
    assert is_expected_tabs(tabs, {"type": "url", "urls": ["http://b.com", "http://a.com"]}) == 1.0
    assert is_expected_tabs(tabs, {"type": "url", "urls": ["http://a.com"]}) == 0.0
    assert is_expected_tabs([], {"type": "url", "urls": []}) == 0.0
    found = {"url": "https://x.com/search?q=cats"}
    assert is_expected_url_pattern_match(found, {"expected": [r"q=cats", r"x\.com"]}) == 1.0
    assert is_expected_url_pattern_match("https://x.com/", {"expected": [r"q=cats"]}) == 0.0


def test_bookmark_rules_as_upstream() -> None:
    def link(url: str) -> dict:
        return {"type": "url", "url": url, "name": url}

    roots = {"bookmark_bar": {"children": [
        {"type": "folder", "name": "Liked Authors", "children": [link("https://a.org/x"), link("https://b.org/y")]},
        {"type": "folder", "name": "Work", "children": []},
        link("https://news.example"),
    ]}}
    assert is_expected_bookmarks(roots, {"type": "bookmark_bar_folders_names", "names": ["Work", "Liked Authors"]}) == 1
    assert is_expected_bookmarks(roots, {"type": "bookmark_bar_folders_names", "names": ["Work"]}) == 0.0
    assert is_expected_bookmarks(roots, {"type": "bookmark_bar_websites_urls", "urls": ["https://news.example"]}) == 1
    liked = {"type": "liked_authors_websites_urls", "urls": [["https://a.org/x", "https://a.org/z"], "https://b.org/y"]}
    assert is_expected_bookmarks(roots, liked) == 1.0
    assert is_expected_bookmarks(roots, {**liked, "urls": ["https://a.org/z", "https://b.org/y"]}) == 0.0
    assert is_expected_bookmarks([], liked) == 0.0
    with pytest.raises(ValueError, match="not supported"):
        is_expected_bookmarks(roots, {"type": "reading_list"})
