"""The tab getters ``open_tabs_info`` (4 tasks) and ``active_tab_info`` (5 tasks) of
:mod:`environments.judges.chrome` against OSWorld's own (``desktop_env/evaluators/getters/chrome.py``, run
unchanged) on the same live browser, and the scores of the metrics the suite feeds them to: ``is_expected_tabs``
(open tabs), ``is_expected_url_pattern_match`` (3), ``is_expected_search_query`` (1), ``is_expected_active_tab``
(1), each side's own metric on its own getter's answer.

Real: headless Chromium (:class:`tests.judges.chromium.Chromium`, profile in the stand-in VM home) holding several
tabs at the suite's own URLs (``https://www.united.com/...``, ``https://discussions.flightaware.com/...``): every
host the tests name is served by an HTTPS server on loopback (a self-signed certificate, Chromium run with
``--ignore-certificate-errors`` and ``--host-resolver-rules`` mapping each ``host:443`` to it; a few names do
not resolve). The site behaves as those sites do where it matters: a bare domain redirects to its ``www.`` name
(and ``www.discussions.flightaware.com`` to ``discussions.``); one page sets its title by script after load, one
has none, one is built by script, one needs a session cookie (a fresh browser context is sent to ``/login``).
Upstream asks through Playwright's ``connect_over_cdp`` (its ``chromium_port``); ours runs its DevTools program
through ``POST /execute`` of :class:`tests.judges.test_conformance_getters.VMServer`.

Not real here: the desktop's accessibility tree, where upstream reads the active tab's URL (``GET
/accessibility``, answering the address bar with the active tab's URL as Chrome shows it, :func:`environments.
judges.address_bar.address_bar_text`; ours from DevTools' most recently active page, shown the same way). That
formatting is checked against a real Chromium's tree in ``tests/judges/test_conformance_address_bar.py``.

Facts established here (the consuming metrics read only the URLs):

* ``open_tabs_info``: the same tabs, titles (a script-set title once set) and URLs; the order differs (ours:
  most recently active first, as DevTools lists them; upstream: Playwright's order of the pages), which
  ``is_expected_tabs`` ignores. Both read each page's document: an untitled page's title is ``""`` (DevTools
  lists the URL), a tab whose page failed to load (offline, a site that is down) is at
  ``chrome-error://chromewebdata/`` (the tab shows the URL it tried), so such a task scores 0 on both.
* ``active_tab_info``: both re-open ``goto_prefix`` + the address bar's text in a fresh browser context and
  answer that page (ours did answer the tab's own title and URL, with content fetched from the desktop: fixed).
  Equal answers (title, URL, rendered content) and scores for the suite's five configs on their right and
  wrong pages, with query strings, fragments and other tabs, a bare host's redirect to ``www.``, ``https://www.``
  before a non-``www`` host whose ``www.`` name redirects back, a script-set title, a script-built body, no
  title; and where the re-opened page is not the tab's: None for a ``www.`` name the host lacks or a page that
  does not load, the login page for a page that needs the tab's session.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import ssl
import threading
import time
import types
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.client import EnvironmentClient
from environments.judges import browser as browser_metrics
from environments.judges import chrome, system
from tests.judges.chromium import Chromium, address_bar_tree, require_chromium
from tests.judges.test_conformance_getters import VMServer
from tests.judges.upstream import getters_module, metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")
DESKTOP_FILE = "Desktop/annual-enterprise-survey-2021-financial-year-provisional.html"

#: the suite's open_tabs_info tasks: is_expected_tabs' rules (e135df7c's file is put in the stand-in home)
TABS_RULES: dict[str, list[str]] = {
    "06fe7178": ["https://www.lonelyplanet.com", "https://www.airbnb.com", "https://www.tripadvisor.com"],
    "58565672": ["https://www.apple.com/", "https://scholar.google.com/", "https://www.amazon.com/"],
    "48c46dc7": ["https://github.com", "https://docs.python.org/3/"],
    "e135df7c": ["https://aclanthology.org/", "https://openai.com/", "https://www.linkedin.com/home/",
                 "file:///home/user/" + DESKTOP_FILE],
}
#: the suite's active_tab_info tasks: (config, metric, rules, the page that passes, pages that do not)
ACTIVE: dict[str, tuple[dict[str, Any], str, dict[str, Any], str, list[str]]] = {
    "f3b19d1e": ({}, "is_expected_url_pattern_match", {"expected": ["Ticket-Delivery-FAQs"]},
                 "https://premier.ticketek.com.au/shows/faq/Ticket-Delivery-FAQs",
                 ["https://premier.ticketek.com.au/", "https://premier.ticketek.com.au/shows/faq/Refunds"]),
    "c1fa57f3": ({"goto_prefix": "https://www."}, "is_expected_url_pattern_match",
                 {"expected": ["united.com/en/us/checked-bag-fee-calculator"]},
                 "https://www.united.com/en/us/checked-bag-fee-calculator",
                 ["https://www.united.com/en/us", "https://www.united.com/en/us/baggage"]),
    "da46d875": ({}, "is_expected_url_pattern_match", {"expected": ["book/CharlieCardStoreAppointments@mbta.com/"]},
                 "https://outlook.office365.com/book/CharlieCardStoreAppointments@mbta.com/",
                 ["https://www.mbta.com/", "https://outlook.office365.com/book/Other@mbta.com/"]),
    "a96b564e": ({"goto_prefix": "https://www."}, "is_expected_active_tab",
                 {"type": "url", "url": "https://discussions.flightaware.com/t/the-banter-thread/4412"},
                 "https://discussions.flightaware.com/t/the-banter-thread/4412",
                 ["https://discussions.flightaware.com/c/community/5", "https://www.flightaware.com/"]),
    "f8cfa149": ({}, "is_expected_search_query",
                 {"expect": {"pattern": r"(?i)https?://(?:www\.)?google\.com/search\?q=nereida(?:&|$|#).*"}},
                 "https://www.google.com/search?q=nereida&sca_esv=5f2e&source=hp",
                 ["https://www.google.com/search?q=nereida+lopez", "https://en.wikipedia.org/wiki/Main_Page"]),
}
OURS = {"is_expected_tabs": browser_metrics.is_expected_tabs,
        "is_expected_active_tab": browser_metrics.is_expected_active_tab,
        "is_expected_url_pattern_match": browser_metrics.is_expected_url_pattern_match,
        "is_expected_search_query": system.is_expected_search_query}

#: bare domain -> its www. name (the site redirects), and www.discussions -> discussions (a96b564e's prefix)
REDIRECTS = {"united.com": "www.united.com", "google.com": "www.google.com", "lonelyplanet.com": "www.lonelyplanet.com",
             "airbnb.com": "www.airbnb.com", "apple.com": "www.apple.com", "amazon.com": "www.amazon.com",
             "linkedin.com": "www.linkedin.com", "flightaware.com": "www.flightaware.com", "mbta.com": "www.mbta.com",
             "www.discussions.flightaware.com": "discussions.flightaware.com"}
NAMED = itertools.chain(*TABS_RULES.values(), *[[a[3], *a[4]] for a in ACTIVE.values()])
HOSTS = sorted({urllib.parse.urlsplit(u).hostname or "" for u in NAMED} - {""} | {*REDIRECTS, *REDIRECTS.values()}
               | {"www.tripadvisor.com", "community.example.org", "mail.example.com"})
#: names that do not resolve: a site that is down, and a www. name a host does not have
UNRESOLVED = ("down.example.net", "www.community.example.org")


def page(title: str | None, body: str, script: str = "") -> bytes:
    head = "" if title is None else f"<title>{title}</title>"
    script = f"<script>{script}</script>" if script else ""
    return f"<html><head>{head}</head><body>{body}{script}</body></html>".encode()


class Site:
    """Every host of :data:`HOSTS` over HTTPS on loopback: a page per path, titled ``host/path``, except
    ``/live-title`` (``Before``, ``After`` 200 ms after load), ``/untitled``, ``/built`` (its body written by
    script), ``/sign-in`` (sets a session cookie, on to ``/private``) and ``/private`` (``/login`` without the
    cookie); :data:`REDIRECTS` answer 301 to their target host."""

    def __init__(self, directory: Path):
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").split(":")[0]
                path = urllib.parse.urlsplit(self.path).path
                if host in REDIRECTS:
                    return self.answer(301, b"", {"Location": f"https://{REDIRECTS[host]}{self.path}"})
                if path == "/sign-in":
                    return self.answer(302, b"", {"Location": f"https://{host}/private",
                                                  "Set-Cookie": "session=1; Path=/"})
                if path == "/private" and "session=1" not in (self.headers.get("Cookie") or ""):
                    return self.answer(302, b"", {"Location": f"https://{host}/login"})
                self.answer(200, site.body(host, path))

            def answer(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for key, value in {"Content-Type": "text/html; charset=utf-8", "Content-Length": str(len(data)),
                                   "Cache-Control": "no-store", **(headers or {})}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*self.certificate(directory))

        class TLSServer(ThreadingHTTPServer):
            daemon_threads = True

            def finish_request(self, request: Any, client_address: Any) -> None:
                try:  # the handshake in the request's own thread, not in the one accepting
                    request = context.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError):
                    return
                super().finish_request(request, client_address)

            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a browser's speculative connection closed early

        self.https = TLSServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.https.serve_forever, daemon=True).start()

    @staticmethod
    def certificate(directory: Path) -> tuple[Path, Path]:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "loopback site")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=7))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in HOSTS]), critical=False)
                .sign(key, hashes.SHA256()))
        (directory / "site.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / "site.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return directory / "site.pem", directory / "site.key"

    @staticmethod
    def body(host: str, path: str) -> bytes:
        if path == "/live-title":
            return page("Before", "<p>the title changes</p>", "setTimeout(() => { document.title = 'After'; }, 200)")
        if path == "/untitled":
            return page(None, "<p>no title</p>")
        if path == "/built":
            return page("Built", "", "document.body.innerHTML = '<p id=\"x\">built by script</p>'")
        if path == "/private":
            return page("Private", "<p>your mail</p>")
        return page(f"{host}{path}", f"<p>{host}{path}</p>")

    @staticmethod
    def lands(url: str) -> tuple[str, str | None]:
        """Where a tab opening ``url`` ends (its session having the cookie once signed in) and its title there
        (None: the URL as shown, for an untitled page or one that does not load)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "file":
            return url, Path(parts.path).stem
        host = REDIRECTS.get(parts.hostname or "", parts.hostname)
        path = "/private" if parts.path == "/sign-in" else parts.path
        landed = urllib.parse.urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), path or "/",
                                          parts.query, parts.fragment))
        if host in UNRESOLVED:
            return landed, host  # Chrome's error page is titled by the host
        if path == "/untitled":
            return landed, None
        title = {"/live-title": "After", "/built": "Built", "/private": "Private"}.get(path, f"{host}{path or '/'}")
        return landed, title

    def close(self) -> None:
        self.https.shutdown()
        self.https.server_close()


class Desktop:
    """The stand-in VM (its home holds the Desktop file of e135df7c), the site and Chromium showing tabs."""

    def __init__(self, home: Path):
        (home / "Desktop").mkdir()
        (home / DESKTOP_FILE).write_bytes(page("annual-enterprise-survey-2021-financial-year-provisional", "<table/>"))
        self.home = home
        self.site = Site(home)
        self.vm = VMServer(home)
        port = self.site.https.server_address[1]
        rules = [f"MAP {host}:443 127.0.0.1:{port}" for host in HOSTS] + [f"MAP {h} ~NOTFOUND" for h in UNRESOLVED]
        try:
            self.chromium = Chromium(home, "--ignore-certificate-errors", "--host-resolver-rules=" + ", ".join(rules))
        except BaseException:
            self.vm.close()
            self.site.close()
            raise

    def url(self, url: str) -> str:
        """A URL of the suite with the Desktop file where the stand-in home has it."""
        return url.replace("file:///home/user/", self.home.as_uri() + "/")

    def show(self, urls: list[str], active: int) -> dict[str, Any]:
        """Open ``urls`` as the only tabs, in order, then make the ``active``-th the active tab; the address
        bar shows its URL. Answers that tab as DevTools lists it."""
        urls = [self.url(u) for u in urls]
        before = [t["id"] for t in self.chromium.pages()]
        for url in urls:
            self.chromium.devtools("/json/new?" + urllib.parse.quote(url, safe=":/"), "PUT")
        for target in before:
            self.chromium.devtools(f"/json/close/{target}")
        landed = [Site.lands(u) for u in urls]
        deadline = time.monotonic() + 30
        while True:
            tabs = self.chromium.pages()
            shown = sorted((t["url"], t["title"]) for t in tabs)
            wanted = sorted((url, chrome.address_bar_text(url) if title is None else title) for url, title in landed)
            if shown == wanted:
                break
            assert time.monotonic() < deadline, f"the tabs did not load: {shown} != {wanted}"
            time.sleep(0.05)
        time.sleep(0.3)  # an untitled page shows its URL as its title while loading too
        target = next(t for t in tabs if t["url"] == landed[active][0])
        self.chromium.devtools(f"/json/activate/{target['id']}")
        while self.chromium.pages()[0]["id"] != target["id"]:
            assert time.monotonic() < deadline, "the tab did not become active"
            time.sleep(0.05)
        self.vm.tree = address_bar_tree(target["title"], chrome.address_bar_text(target["url"]))
        return target

    def close(self) -> None:
        self.chromium.close()
        self.vm.close()
        self.site.close()


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desktop]:
    require_chromium()
    running = Desktop(tmp_path_factory.mktemp("home"))
    yield running
    running.close()


def theirs(desktop: Desktop, name: str, config: dict[str, Any]) -> Any:
    getters = getters_module("chrome", ("pydrive",))  # playwright is real (the dev extra)
    from desktop_env.controllers.python import PythonController

    controller = PythonController("127.0.0.1", desktop.vm.port, pkgs_prefix="{command}")
    env = types.SimpleNamespace(vm_ip="127.0.0.1", chromium_port=desktop.chromium.port, server_port=desktop.vm.port,
                                controller=controller)
    return getattr(getters, f"get_{name}")(env, config)


def mine(desktop: Desktop, name: str, config: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with EnvironmentClient(f"http://127.0.0.1:{desktop.vm.port}") as client:
            return await getattr(chrome, f"get_{name}")(types.SimpleNamespace(client=client), config)

    return asyncio.run(main())


def scores(metric: str, ours: Any, their_answer: Any, rules: dict[str, Any]) -> tuple[float, float]:
    upstream_metric = getattr(metrics_module("chrome", STUBS), metric)
    return float(OURS[metric](ours, rules)), float(upstream_metric(their_answer, rules))


# -- open_tabs_info -----------------------------------------------------------------------------------------

#: tabs the draws pick from: the suite's URLs (as the tasks open them and as their rules write them), other
#: pages of the same sites, a title set by script
POOL = sorted({*itertools.chain(*TABS_RULES.values()), "https://www.tripadvisor.com/", "https://www.linkedin.com/feed/",
               "https://docs.python.org/3/library/", "https://github.com/xlang-ai/OSWorld",
               "https://www.apple.com/live-title", "https://scholar.google.com/scholar?q=osworld",
               "https://www.amazon.com/#nav", "https://openai.com/news/"})
SUITE_SET = st.sampled_from(list(TABS_RULES.values())).flatmap(st.permutations)
#: a task's own tabs (any order), with one more, or any tabs of the pool
TAB_SETS = st.one_of(SUITE_SET, st.tuples(SUITE_SET, st.sampled_from(POOL)).map(lambda t: [*t[0], t[1]]),
                     st.lists(st.sampled_from(POOL), min_size=1, max_size=5))
EXAMPLES = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def canonical(tabs: list[dict[str, str]]) -> list[tuple[str, str]]:
    return sorted((t["url"], t["title"]) for t in tabs)


@EXAMPLES
@given(urls=TAB_SETS, data=st.data())
def test_open_tabs_answer_and_score_as_osworld(desktop: Desktop, urls: list[str], data: st.DataObject) -> None:
    desktop.show(urls, data.draw(st.integers(0, len(urls) - 1), "active"))
    listed = desktop.chromium.pages()
    ours, their_answer = mine(desktop, "open_tabs_info", {}), theirs(desktop, "open_tabs_info", {})
    assert canonical(ours) == canonical(their_answer)  # the same tabs, titles and URLs
    assert [t["url"] for t in ours] == [t["url"] for t in listed]  # ours: most recently active first
    for task, expected in TABS_RULES.items():
        rules = {"type": "url", "urls": [desktop.url(u) for u in expected]}
        mine_score, their_score = scores("is_expected_tabs", ours, their_answer, rules)
        assert mine_score == their_score, task


def test_the_suites_tab_sets_pass_in_any_order(desktop: Desktop) -> None:
    """Each task's own tabs pass both; ours lists the active tab first, then the others newest first."""
    for task, expected in TABS_RULES.items():
        desktop.show(list(expected), 0)
        ours, their_answer = mine(desktop, "open_tabs_info", {}), theirs(desktop, "open_tabs_info", {})
        rules = {"type": "url", "urls": [desktop.url(u) for u in expected]}
        assert scores("is_expected_tabs", ours, their_answer, rules) == (1.0, 1.0), task
        landed = [Site.lands(desktop.url(u))[0] for u in expected]
        assert [t["url"] for t in ours] == [landed[0], *reversed(landed[1:])]
        assert canonical(ours) == canonical(their_answer)


def test_a_title_set_by_script_once_set(desktop: Desktop) -> None:
    desktop.show(["https://www.apple.com/live-title", "https://github.com"], 0)
    ours, their_answer = mine(desktop, "open_tabs_info", {}), theirs(desktop, "open_tabs_info", {})
    assert ("https://www.apple.com/live-title", "After") in canonical(ours)
    assert canonical(ours) == canonical(their_answer)


def test_an_untitled_tab_scores_the_same(desktop: Desktop) -> None:
    urls = ["https://github.com/untitled", "https://docs.python.org/3/"]
    desktop.show(urls, 1)
    ours, their_answer = mine(desktop, "open_tabs_info", {}), theirs(desktop, "open_tabs_info", {})
    assert sorted(t["url"] for t in ours) == sorted(t["url"] for t in their_answer)
    for expected in (urls, TABS_RULES["48c46dc7"]):
        rules = {"type": "url", "urls": expected}
        assert len(set(scores("is_expected_tabs", ours, their_answer, rules))) == 1


def untitled(desktop: Desktop) -> tuple[Any, Any]:
    desktop.show(["https://github.com/untitled"], 0)
    return mine(desktop, "open_tabs_info", {}), theirs(desktop, "open_tabs_info", {})


def not_loaded(desktop: Desktop) -> tuple[Any, Any]:
    desktop.show(["https://down.example.net/", "https://github.com"], 1)
    return mine(desktop, "open_tabs_info", {}), theirs(desktop, "open_tabs_info", {})


def test_an_untitled_tab_and_one_that_did_not_load_answer_as_osworlds(desktop: Desktop) -> None:
    """Each page as its document says, as upstream's Playwright pages: an untitled page's title is
    ``document.title`` (``""``, where DevTools lists the URL); a page that did not load is at Chrome's error page
    (where the tab shows the URL it tried), so a task expecting that URL scores 0 on both."""
    ours, their_answer = untitled(desktop)
    assert ours == their_answer == [{"title": "", "url": "https://github.com/untitled"}]
    ours, their_answer = not_loaded(desktop)
    github = ("https://github.com/", "github.com/")
    assert canonical(ours) == canonical(their_answer) == [("chrome-error://chromewebdata/", "down.example.net"),
                                                          github]
    rules = {"type": "url", "urls": ["https://down.example.net/", "https://github.com"]}
    assert scores("is_expected_tabs", ours, their_answer, rules) == (0.0, 0.0)


# -- active_tab_info ----------------------------------------------------------------------------------------

def active(desktop: Desktop, urls: list[str], index: int, config: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """Both getters' answers with ``config`` on the tabs, the ``index``-th active (as DevTools lists it)."""
    target = desktop.show(urls, index)
    return mine(desktop, "active_tab_info", config), theirs(desktop, "active_tab_info", config), target


def active_same(desktop: Desktop, task: str, urls: list[str], index: int) -> tuple[float, float]:
    """Both getters with the task's config: equal answers (title, URL, content), here the active tab's page;
    the task's metric's scores."""
    config, metric, rules, _, _ = ACTIVE[task]
    ours, their_answer, target = active(desktop, urls, index, config)
    assert their_answer is not None and ours == their_answer, task
    assert (ours["url"], ours["title"]) == (target["url"], target["title"]) and ours["content"].startswith("<html>")
    return scores(metric, ours, their_answer, rules)


@pytest.mark.parametrize("task", sorted(ACTIVE))
def test_the_suites_active_tabs_answer_and_score_as_osworld(desktop: Desktop, task: str) -> None:
    _, _, _, right, wrong = ACTIVE[task]
    assert active_same(desktop, task, [right, "https://github.com"], 0) == (1.0, 1.0)
    for other in wrong:
        assert active_same(desktop, task, ["https://github.com", other, right], 1) == (0.0, 0.0)


def vary(url: str, how: str) -> str:
    """``url`` with a fragment, one more query parameter or a trailing ``/``."""
    parts = urllib.parse.urlsplit(url)
    if how == "fragment":
        return parts._replace(fragment="top").geturl()
    if how == "query":
        return parts._replace(query="&".join(filter(None, [parts.query, "hl=en"]))).geturl()
    if how == "slash" and not parts.path.endswith("/"):
        return parts._replace(path=parts.path + "/").geturl()
    return url


@EXAMPLES
@given(task=st.sampled_from(sorted(ACTIVE)), data=st.data())
def test_active_tabs_answer_and_score_as_osworld(desktop: Desktop, task: str, data: st.DataObject) -> None:
    _, _, _, right, wrong = ACTIVE[task]
    url = vary(data.draw(st.sampled_from([right, *wrong]), "active"),
               data.draw(st.sampled_from(["as is", "fragment", "query", "slash"]), "how"))
    others = data.draw(st.lists(st.sampled_from(POOL), max_size=2), "others")
    position = data.draw(st.integers(0, len(others)), "position")
    mine_score, their_score = active_same(desktop, task, [*others[:position], url, *others[position:]], position)
    assert mine_score == their_score


def test_a_bare_host_a_script_title_and_script_content(desktop: Desktop) -> None:
    """The default prefix before a www host's shown text (both go to https://united.com/..., redirected to www.);
    a title set by script 200 ms after load; a body written by script (both: the rendered DOM); no title."""
    bags = "/en/us/checked-bag-fee-calculator"
    cases = [(bags, {}), (bags, {"goto_prefix": "https://www."}), ("/live-title", {}), ("/built", {}), ("/untitled", {})]
    answers = {}
    for path, config in cases:
        ours, their_answer, target = active(desktop, ["https://www.united.com" + path], 0, config)
        assert ours == their_answer and ours["url"] == target["url"], (path, config)
        answers[path] = ours
    assert answers[bags]["title"] == "www.united.com" + bags
    assert [answers[p]["title"] for p in ("/live-title", "/built", "/untitled")] == ["After", "Built", ""]
    assert '<body><p id="x">built by script</p></body>' in answers["/built"]["content"]


def test_where_the_re_opened_page_lands_elsewhere(desktop: Desktop) -> None:
    """Both re-open the address bar's URL behind goto_prefix in a fresh browser context, not the tab itself: a
    www. name the host lacks (a96b564e's "https://www." before discussions.flightaware.com, were that name not to
    resolve) and a tab that did not load answer None; a page that needs the tab's session the site's login page."""
    url = "https://community.example.org/t/the-banter-thread/4412"
    ours, their_answer, target = active(desktop, [url], 0, {"goto_prefix": "https://www."})
    assert target["url"] == url and ours is None and their_answer is None
    assert scores("is_expected_active_tab", ours, their_answer, {"type": "url", "url": url}) == (0.0, 0.0)
    ours, their_answer, _ = active(desktop, ["https://down.example.net/", "https://github.com"], 0, {})
    assert ours is None and their_answer is None
    ours, their_answer, target = active(desktop, ["https://mail.example.com/sign-in"], 0, {})
    assert target["url"] == "https://mail.example.com/private" and ours == their_answer
    assert ours["url"] == "https://mail.example.com/login"
    assert scores("is_expected_url_pattern_match", ours, their_answer, {"expected": ["/private"]}) == (0.0, 0.0)
