"""The address-bar getters against OSWorld's own on a real Chromium's accessibility tree.

Upstream's ``active_url_from_accessTree`` (``desktop_env/evaluators/getters/chrome.py``; also behind
``active_tab_url_parse``, ``url_dashPart`` and ``active_tab_info``) answers ``goto_prefix`` + the text of
Chrome's "Address and search bar" entry in the desktop's AT-SPI tree. Ours answers ``goto_prefix`` + the
active tab's URL as DevTools lists it, formatted the way the address bar shows it
(:mod:`environments.judges.address_bar`). Here both read the same live browser.

Real parts: a desktop (Xvfb, openbox, our probe) with AT-SPI on (``--accessibility``) and Debian's Chromium on it
(with a window, ``--force-renderer-accessibility``), offline: every host resolves to nothing, and the address
bar shows the URL of a page that did not load as it shows a loaded one. Upstream's getter is given our probe's
``/accessibility`` tree with one change: its selector names the application ``Google Chrome`` on x86
(``Chromium`` on arm), and Debian's browser calls itself ``Chromium``, so that name is swapped in the XML.

Facts established (each URL shown in the only tab, the bar's text read from the tree): the suite's URLs; a
leading ``www.`` and the scheme of http(s) hidden, other subdomains kept; user and password hidden; a port kept;
``file://`` hidden; a ``chrome://`` page's bare ``/`` hidden; punycode hosts in Unicode; percent escapes of
letters, digits, ``-._~`` and UTF-8 characters shown decoded, every other escape kept (reserved characters, a
space, an invalid sequence, bidirectional controls, default-ignorable characters, Unicode spaces).
"""

from __future__ import annotations

import asyncio
import platform
import re
import types
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.client import EnvironmentClient
from environments.judges import chrome
from tests.environments.desktop_fixtures import DesktopSession, start_session, stop_session
from tests.judges.chromium import require_chromium
from tests.judges.upstream import getters_module

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

ENTRY = re.compile(r'<entry[^>]*name="Address and search bar"[^>]*>([^<]*)<')
APPLICATION = '<application name="Chromium"'
#: the suite's URLs behind its address-bar getters (36037439, 59155008, 9f935cce, 1704f00f, 82bc8d6a, 82279c77,
#: a728a36e, f0b971a1, 368d9ba4, f79439ad, 0d8b7de3, f5d96daf, 7f52cab9, 12086550, b070486d, 47543840)
SUITE = [
    "https://scholar.google.com/citations?hl=en&user=qRAQ5BsAAAAJ",
    "https://www.babycenter.com/baby-names/details/carl-853",
    "https://www.drugs.com/npc/",
    "https://www.dmv.virginia.gov/licenses-ids/license/applying/eligibility",
    "https://www.nfl.com/scores/2019/post4",
    "https://www.rentalcars.com/search?locationName=Z%C3%BCrich&dropLocationName=Z%C3%BCrich"
    "&filterCriteria_carCategory=large&filterCriteria_sortBy=PRICE",
    "https://www.cars.com/shopping/results/?list_price_max=50000&maximum_distance=50&zip=10001"
    "&fuel_slugs[]=electric",
    "https://www.budget.com/en/reservation#/vehicles",
    "https://www.google.com/search?q=drip+coffee+maker",
    "https://www.accuweather.com/en/gb/manchester/m15-6/december-weather/329260",
    "https://www.drugs.com/tamiflu.html#side-effects",
    "chrome://password-manager/passwords",
]
#: what Chrome formats: schemes, subdomains, user info, ports, IDN, escapes, chrome:// and file:// pages
FORMS = [
    "http://example.com/", "https://example.com/", "http://www.e.com/", "https://www.example.com",
    "https://m.example.com/", "https://www2.example.com/", "https://user:pw@e.com/x", "https://example.com:8443/x",
    "https://xn--bcher-kva.example/", "https://e.com/p?a=%41%42&b=%2F%3F%23%26%3D%25&c=%7E%21%2D%5B%5D",
    "https://e.com/%C3%BC/%E2%80%8B/%F0%9F%98%80?x=%E4%B8%AD", "https://e.com/a+b%2Bc?q=a%20b%09c",
    "https://e.com/%c3%bc?%C3", "https://e.com/%41%C3", "https://example.com/?",
    "https://example.com/#", "chrome://settings/", "file:///home/user/a.html", "data:text/html,hi",
]
PREFIXES = ("https://", "https://www.", "")


class Browser:
    """The desktop and its Chromium; :meth:`show` puts a URL in the only tab and waits until the bar shows it."""

    def __init__(self, root: Path):
        self.session: DesktopSession = start_session(root, extra_args=("--accessibility",))
        self.loop = asyncio.new_event_loop()
        self.client = EnvironmentClient(self.session.url, self.session.token)
        self.shown_count = 0
        self.run(self.client.launch(["chromium", "--no-sandbox", "--no-first-run", "--no-default-browser-check",
                                     "--force-renderer-accessibility", "--remote-debugging-port=0",
                                     "--host-resolver-rules=MAP * ~NOTFOUND", "about:blank"]))
        self.run(self.client.devtools({"action": "tabs", "wait_s": 60}))

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, 120))

    async def tree(self) -> str:
        return await self.client.accessibility_tree() or ""

    async def _bar_shows(self, accept: Any, reads: int = 2) -> str:
        """The bar's text once ``accept`` takes it and ``reads`` reads in a row agree (the event waited for)."""
        while True:
            texts = {m.group(1) if m else None for m in [ENTRY.search(await self.tree()) for _ in range(reads)]}
            if len(texts) == 1 and (text := texts.pop()) is not None and accept(text):
                return text

    async def _show(self, url: str) -> str:
        # a page of its own first, so the bar's next change is this URL's, whatever the last one showed
        self.shown_count += 1
        marker = f"sentinel.invalid/{self.shown_count}"
        await self.client.devtools({"action": "open", "urls": [f"https://{marker}"], "wait_s": 30})
        await self._bar_shows(lambda text: text == marker, reads=1)  # its text is unmistakable
        await self.client.devtools({"action": "open", "urls": [url], "wait_s": 30})
        return await self._bar_shows(lambda text: text not in ("", marker))

    def show(self, url: str) -> str:
        return unescape(self.run(self._show(url)))

    def ours(self, name: str, config: dict[str, Any]) -> Any:
        return self.run(getattr(chrome, f"get_{name}")(types.SimpleNamespace(client=self.client), config))

    def theirs(self, name: str, config: dict[str, Any]) -> Any:
        tree = self.run(self.tree())
        assert APPLICATION in tree, "Chromium is not in the accessibility tree"
        app = "Chromium" if "arm" in platform.machine() else "Google Chrome"
        controller = types.SimpleNamespace(get_accessibility_tree=lambda: tree.replace(APPLICATION,
                                                                                        f'<application name="{app}"'))
        return getattr(getters_module("chrome", ("pydrive",)), f"get_{name}")(types.SimpleNamespace(
            controller=controller), config)

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.close()
        stop_session(self.session)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    require_chromium()
    running = Browser(tmp_path_factory.mktemp("address-bar"))
    yield running
    running.close()


def same_urls(browser: Browser, url: str) -> str:
    """Both getters' URLs for every prefix the suite uses, once the bar shows ``url``; the bar's text."""
    shown = browser.show(url)
    for prefix in PREFIXES:
        config = {"goto_prefix": prefix}
        assert browser.ours("active_url_from_accessTree", config) == browser.theirs("active_url_from_accessTree",
                                                                                   config) == prefix + shown, url
    return shown


#: a few of the facts, spelt out
SHOWN = {SUITE[5]: "rentalcars.com/search?locationName=Zürich&dropLocationName=Zürich"
                   "&filterCriteria_carCategory=large&filterCriteria_sortBy=PRICE",
         "file:///home/user/a.html": "/home/user/a.html", "https://xn--bcher-kva.example/": "bücher.example",
         "https://user:pw@e.com/x": "e.com/x", "chrome://settings/": "chrome://settings",
         "https://e.com/%C3%BC/%E2%80%8B/%F0%9F%98%80?x=%E4%B8%AD": "e.com/ü/%E2%80%8B/😀?x=中",
         "https://e.com/%c3%bc?%C3": "e.com/ü?%C3"}


@pytest.mark.parametrize("url", SUITE + FORMS)
def test_the_address_bar_reads_as_upstreams(browser: Browser, url: str) -> None:
    shown = same_urls(browser, url)
    assert shown == SHOWN.get(url, shown)


def test_a_parsed_query_is_upstreams(browser: Browser) -> None:
    """1704f00f's getter: the query of the address bar's URL, decoded ("Zürich" either way)."""
    browser.show(SUITE[5])
    config = {"goto_prefix": "https://www.", "parse_keys": ["locationName", "dropLocationName",
                                                           "filterCriteria_carCategory", "filterCriteria_sortBy"]}
    ours, theirs = browser.ours("active_tab_url_parse", config), browser.theirs("active_tab_url_parse", config)
    assert ours == theirs == {"locationName": "Zürich", "dropLocationName": "Zürich",
                              "filterCriteria_carCategory": "large", "filterCriteria_sortBy": "PRICE"}


ESCAPES = ["a", "Z", "%41", "%7e", "%2D", "%5F", "%21", "%2F", "%3F", "%23", "%25", "%20", "%09", "%C3%BC", "%c3%a9",
           "%E4%B8%AD", "%F0%9F%98%80", "%E2%80%8B", "%E2%80%AE", "%D8%9C", "%C2%A0", "%E2%80%AF", "%C2%AD",
           "%EF%BB%BF", "%C3", "%80", "%F0%9F%94%92", "%E1%85%9F", "%CD%8F", "%C2%85"]
PIECES = st.lists(st.sampled_from(ESCAPES), min_size=1, max_size=5).map("".join)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host=st.sampled_from(["e.com", "www.e.com", "m.e.com", "xn--mnchen-3ya.e.com"]), path=PIECES,
       query=st.one_of(st.none(), PIECES), fragment=st.one_of(st.none(), PIECES))
def test_escapes_read_as_upstreams(browser: Browser, host: str, path: str, query: str | None,
                                   fragment: str | None) -> None:
    url = f"https://{host}/{path}" + (f"?q={query}" if query is not None else "") + \
        (f"#{fragment}" if fragment is not None else "")
    same_urls(browser, url)
