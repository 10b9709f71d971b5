"""``info_from_website`` and ``gotoRecreationPage_and_get_html_content`` on a real local desktop's Chromium.

The live sites (scholar.google.com, www.recreation.gov) are not reachable here, so a real HTTP server on loopback
serves pages that reproduce the element structure behind every selector the OSWorld tasks use (multi_apps
5990457f: Google Scholar's ``#gsc_prf_in``, ``#gsc_rsb_st`` table, ``#gsc_a_b`` rows and the citation page's
``#gsc_oci_title_gg``; chrome b4f95342: recreation.gov's ``input#hero-search-input``, ``button.nav-search-button``,
``.search-result-highlight--success`` opening the campground in a new tab, ``button.next-available`` and the
``camp-sortable-column-header`` cells). The pages are written by scripts after a delay, react only to a real
typed query and a real click, and hold hidden text, so a getter that read the HTML source, did not wait, did not
type or click, or confused ``innerText`` with ``textContent`` gets other answers. Expected values follow
upstream's rules by hand (upstream's getters need Playwright and OSWorld's VM; see environments/judges/web_pages.py).
No browser runs at first: the getter launches one, as upstream does."""

from __future__ import annotations

import asyncio
import http.server
import types
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import pytest

from core.types import Task
from environments.judges.web_pages import (get_gotoRecreationPage_and_get_html_content, get_info_from_website)
from tests.environments.desktops import closed_port, one_desktop, serving

pytestmark = pytest.mark.desktop

LATER = "<script>setTimeout(() => { document.getElementById('root').innerHTML = %s; }, 400);</script>"
PROFILE = """<div id="gsc_prf_in">Yann LeCun<span style="display:none"> (hidden)</span></div>
<table id="gsc_rsb_st"><thead><tr><th></th><th>All</th><th>Since 2019</th></tr></thead><tbody>
<tr><td class="gsc_rsb_sc1"><a>Citations</a></td><td class="gsc_rsb_std">345074</td>
  <td class="gsc_rsb_std">250000</td></tr>
<tr><td class="gsc_rsb_sc1"><a>h-index</a></td><td class="gsc_rsb_std">147</td><td class="gsc_rsb_std">110</td></tr>
<tr><td class="gsc_rsb_sc1"><a>i10-index</a></td><td class="gsc_rsb_std">372</td><td class="gsc_rsb_std">300</td></tr>
</tbody></table>
<table id="gsc_a_t"><tbody id="gsc_a_b">
<tr class="gsc_a_tr"><td class="gsc_a_t"><a class="gsc_a_at"
  href="/citations?view_op=view_citation&hl=en&user=WLN3QrAAAAAJ&citation_for_view=WLN3QrAAAAAJ:dl">Deep learning</a>
  <div class="gs_gray">Y LeCun, Y Bengio, G Hinton</div></td><td class="gsc_a_c">80000</td></tr>
<tr class="gsc_a_tr"><td class="gsc_a_t"><a class="gsc_a_at" href="/citations?view_op=view_citation&x=2">Gradient-based
  learning applied to document recognition</a></td><td class="gsc_a_c">70000</td></tr>
</tbody></table>"""
CITATION = """<div id="gsc_oci_title_gg"><div class="gsc_oci_title_ggi">
  <a href="https://hal.science/hal-04206682/document" data-clk="hl=en"
    ><span class="gsc_vcd_title_ggt">[PDF]</span> from hal.science</a></div>
  <div class="gsc_oci_title_ggi"><a href="https://example.org/other.pdf">[PDF] other</a></div></div>
<div id="gsc_oci_title"><a class="gsc_oci_title_link" href="https://www.nature.com/articles/nature14539">
  Deep learning</a></div>"""
HOME = """<form class="hero-search" onsubmit="return false">
<input id="hero-search-input" type="text" placeholder="Search">
<button class="nav-search-button" type="button">Search</button></form>
<script>document.querySelector(".nav-search-button").addEventListener("click", (e) => {
  const query = document.getElementById("hero-search-input").value;
  if (e.isTrusted) location.href = "/search?q=" + encodeURIComponent(query);
});</script>"""
RESULTS = """<div class="search-result-card"><a href="/camping/campgrounds/232089" target="_blank">
  <h2><span class="search-result-highlight--success">Diamond</span> Lake Campground</h2></a></div>
<div class="search-result-card"><a href="/camping/campgrounds/1" target="_blank"><h2>Black
  <span class="search-result-highlight">Diamond</span> Group Site</h2></a></div>"""
TABLE = ("<table><thead><tr><th class='camp-sortable-column-header'>Site</th>"
         "<th class='camp-sortable-column-header'>Loop</th><th class='camp-sortable-column-header'>"
         "<span style='display:none'>Sort by </span>Type of Use</th></tr></thead></table>")
CAMPGROUND = """<h1>Diamond Lake Campground</h1><div id="availability"></div>
<button class="sarsaparilla-button next-available" type="button">Next Available</button>
<script>document.querySelector(".next-available").addEventListener("click", (e) => {
  if (e.isTrusted) document.getElementById("availability").innerHTML = %s;
});</script>""" % repr(TABLE)


def _page(title: str, body: str) -> bytes:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>".encode()


class Site(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/citations" and query.get("view_op") == ["view_citation"]:
            body = _page("Deep learning", '<div id="root"></div>' + LATER % repr(CITATION))
        elif url.path == "/citations":
            body = _page("Yann LeCun - Google Scholar", '<div id="root"></div>' + LATER % repr(PROFILE))
        elif url.path == "/":
            body = _page("Recreation.gov", HOME)
        elif url.path == "/search":
            found = RESULTS if query.get("q") == ["Diamond"] else "<p>No results</p>"
            body = _page("Search", '<div id="root"></div>' + LATER % repr(found))
        elif url.path == "/camping/campgrounds/232089":
            body = _page("Diamond Lake", CAMPGROUND)
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def site() -> Iterator[str]:
    with serving(Site) as url:
        yield url


SCHOLAR_INFOS = [  # the task's own infos, then one after the URL changed (the tab must go back first)
    {"action": "inner_text", "selector": "#gsc_prf_in"},
    {"action": "inner_text", "selector": "#gsc_rsb_st > tbody > tr:nth-child(1) > td:nth-child(2)"},
    {"action": "inner_text", "selector": "#gsc_rsb_st > tbody > tr:nth-child(2) > td:nth-child(2)"},
    {"action": "inner_text", "selector": "#gsc_rsb_st > tbody > tr:nth-child(3) > td:nth-child(2)"},
    {"action": "inner_text", "selector": "#gsc_a_b > tr:nth-child(1) > td.gsc_a_t > a"},
    {"action": "click_and_attribute", "attribute": "href",
     "selector": ["#gsc_a_b > tr:nth-child(1) > td.gsc_a_t > a", "#gsc_oci_title_gg > div:nth-child(1) > a"]},
    {"action": "click_and_inner_text",
     "selector": ["#gsc_a_b > tr:nth-child(1) > td.gsc_a_t > a", "#gsc_oci_title_gg > div:nth-child(1) > a"]},
    {"action": "attribute", "selector": "#gsc_a_b > tr:nth-child(2) > td.gsc_a_t > a", "attribute": "class"},
    {"action": "attribute", "selector": "#gsc_prf_in", "attribute": "data-missing"},
]
BACKUPS = ["Yann LeCun", "345074", "147", "372", "Deep learning", "https://hal.science/hal-04206682/document"]


def test_both_getters_read_the_live_pages(tmp_path: Path, site: str) -> None:
    task = Task.model_validate({"id": "web-pages", "instruction": "test", "config": [],
                                "evaluator": {"func": "exact_match"}})
    scholar = f"{site}/citations?user=WLN3QrAAAAAJ&hl=en"
    fast = {"urls": [f"http://127.0.0.1:{closed_port()}/", f"{site}/"], "pauses_s": [0.5, 0.5, 0.2], "timeout_s": 10}

    async def body() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with one_desktop(tmp_path) as (pool, env):
            await env.reset(task)
            view = types.SimpleNamespace(client=env.client)
            got["scholar"] = await get_info_from_website(view, {"url": scholar, "infos": SCHOLAR_INFOS,
                                                                "backups": BACKUPS})
            got["tabs"] = await env.client.devtools({"action": "tabs", "wait_s": 10})
            got["missing"] = await get_info_from_website(view, {"url": scholar, "backups": BACKUPS, "infos": [
                {"selector": "#gsc_prf_in"}, {"action": "inner_text", "selector": "#gsc_prf_nothing"}]})
            got["unreachable"] = await get_info_from_website(view, {
                "url": f"http://127.0.0.1:{closed_port()}/", "infos": [{"selector": "body"}]})
            got["ordered"] = await get_gotoRecreationPage_and_get_html_content(view, {
                "selector": "class", "class": "camp-sortable-column-header", "order": "2", **fast})
            got["first"] = await get_gotoRecreationPage_and_get_html_content(view, {
                "selector": "class", "class": "camp-sortable-column-header", **fast})
            got["beyond"] = await get_gotoRecreationPage_and_get_html_content(view, {
                "selector": "class", "class": "camp-sortable-column-header", "order": 3, **fast})
            got["failed"] = await get_gotoRecreationPage_and_get_html_content(view, {
                "selector": "class", "class": "camp-sortable-column-header", "order": "2", **fast,
                "urls": [f"http://127.0.0.1:{closed_port()}/"]})
            got["after"] = await env.client.devtools({"action": "tabs", "wait_s": 10})
            return got

    got = asyncio.run(body())
    assert got["scholar"] == ["Yann LeCun", "345074", "147", "372", "Deep learning",
                              "https://hal.science/hal-04206682/document", "[PDF] from hal.science", "gsc_a_at", None]
    assert got["missing"] == BACKUPS  # one element never appears: all of it is the backups
    assert got["unreachable"] is None  # no backups given
    assert got["ordered"] == {"expected": {"camp-sortable-column-header": "Sort by Type of Use"}}  # textContent
    assert got["first"] == {"expected": {"camp-sortable-column-header": "Site"}}
    assert got["beyond"] == {"expected": {"camp-sortable-column-header": "__EVALUATION_FAILED__"}}
    failed = got["failed"]["expected"]
    assert failed["error"] == "__EVALUATION_FAILED__"
    assert failed["error_message"].startswith("Failed after 3 attempts: ")
    assert "ERR_CONNECTION_REFUSED" in failed["error_message"]
    # the getters' own tabs and contexts are gone: the user's tabs are as they were
    assert [tab["id"] for tab in got["after"]] == [tab["id"] for tab in got["tabs"]]
    assert not any("/citations" in tab["url"] or "/camping" in tab["url"] for tab in got["after"])


@pytest.mark.parametrize("getter, config, message", [
    (get_info_from_website, {"infos": []}, "needs 'url'"),
    (get_info_from_website, {"url": "http://x/", "infos": [{"action": "hover", "selector": "a"}]}, "unknown action"),
    (get_info_from_website, {"url": "http://x/", "infos": [{"action": "click_and_inner_text", "selector": "a"}]},
     "as a list of CSS selectors"),
    (get_info_from_website, {"url": "http://x/", "infos": [{"action": "attribute", "selector": "a"}]},
     "needs 'attribute'"),
    (get_gotoRecreationPage_and_get_html_content, {"selector": "xpath", "class": "c"}, "must be \"class\""),
    (get_gotoRecreationPage_and_get_html_content, {"selector": "class"}, "needs 'class'"),
    (get_gotoRecreationPage_and_get_html_content, {"selector": "class", "class": "c", "order": "second"},
     "'order' must be an integer"),
])
def test_bad_configs_name_the_problem(getter: Any, config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        asyncio.run(getter(types.SimpleNamespace(client=None), config))
