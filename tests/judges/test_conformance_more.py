"""Judges used by 3 or more of the suite's tasks that no other conformance test drove against OSWorld's own
(``desktop-env``, loaded by :mod:`tests.judges.upstream`): the metrics ``exact_match`` (general.py; 16 tasks) and
``check_json`` (general.py; 3), the getters ``rule`` (misc.py; 144), ``cloud_file`` (file.py; 174) and
``bookmarks`` (chrome.py; 3). Each pair gets the same inputs and must answer the same (scores within 1e-6).

Real: the files (JSON and YAML written here, some not JSON or not UTF-8), a real HTTP server on loopback serving
``cloud_file``'s downloads (upstream through ``requests``, ours through ``httpx``), and for ``bookmarks``
:class:`tests.judges.test_conformance_getters.VMServer` (real ``/execute`` and ``/file`` over a stand-in VM home;
upstream through its own ``PythonController``). Hypothesis draws results, files and rules in the forms the suite's
tasks use (their refs, padded, retyped or missing). Where upstream raises, ours is checked by hand; where the two
score differently on inputs the suite's forms never give, the case is an ``xfail(strict=True)`` naming it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.client import EnvironmentClient
from environments.judges import chrome, getters, metrics
from tests.judges.test_conformance_getters import VMServer, vm  # noqa: F401 (vm: the module's stand-in VM)
from tests.judges.upstream import getters_module, metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def upstream(name: str) -> Any:
    return getattr(metrics_module("general", STUBS), name)


def same(mine: float, theirs: float) -> None:
    assert abs(float(mine) - float(theirs)) <= 1e-6, (mine, theirs)


# -- exact_match: a getter's answer (a command's output, a profile flag, a URL part) against rules["expected"] --

EXPECTED = ["true", "Thomas", "1\n", "true\n", "[1, 1]\n", "File exists.\n", "uint32 0\n", "tamiflu.html#side-effects"]
ANSWER = st.one_of(st.none(), st.sampled_from(EXPECTED), st.sampled_from(EXPECTED).map(str.strip),
                   st.sampled_from(EXPECTED).map(str.upper), st.text(max_size=6), st.integers(0, 2), st.booleans())


@SETTINGS
@given(result=ANSWER, expected=st.sampled_from(EXPECTED) | st.text(max_size=3) | st.integers(0, 1))
def test_exact_match_scores_as_osworld(result: Any, expected: Any) -> None:
    same(metrics.exact_match(result, {"expected": expected}), upstream("exact_match")(result, {"expected": expected}))


def test_exact_match_none_against_none() -> None:
    assert metrics.exact_match(None, {"expected": None}) == upstream("exact_match")(None, {"expected": None}) == 1.0
    assert metrics.exact_match(None, None) == 0.0  # no rules: upstream raises, ours scores 0


def test_the_address_bar_shows_what_chrome_shows() -> None:
    """As a real Chromium's accessibility tree shows them (tests/judges/test_conformance_address_bar.py): Chrome
    hides http(s):// and a leading www. by default, so the suite writes goto_prefix "https://www." for www hosts
    and "" for chrome:// pages; a bare host's "/" is hidden too, and so is file://."""
    cases = {"https://www.drugs.com/npc/": "drugs.com/npc/", "http://example.org/a?q=1": "example.org/a?q=1",
             "https://scholar.google.com/citations?hl=en": "scholar.google.com/citations?hl=en",
             "https://www.google.com/": "google.com", "chrome://password-manager/passwords":
             "chrome://password-manager/passwords", "file:///home/user/a.html": "/home/user/a.html"}
    assert {url: chrome.address_bar_text(url) for url in cases} == cases
    prefixed = "https://www." + chrome.address_bar_text("https://www.babycenter.com/baby-names/details/carl-853")
    assert prefixed == "https://www.babycenter.com/baby-names/details/carl-853"


# -- check_json: expect rules on a JSON (or YAML) file, as the suite's three tasks write them ----------------

XUL = "chrome://messenger/content/messenger.xhtml"
RULES = [  # 74d5859f (manifest.json), e2392362 (_config.yml, is_yaml), 3f49d2cc (xulstore.json)
    ([(["name"], "happy-extension"), (["version"], "0.0.1"), (["background", "scripts"], ["background_script.js"]),
      (["browser_action", "default_icon"], {"64": "icons/icon.png"}), (["browser_action", "default_popup"],
      "browserAction/index.html"), (["browser_action", "default_title"], "happy-extension")], "eq", False),
    ([(["name"], "Test Account"), (["author", "name"], "Test Account"), (["author", "email"], "Test@gmail.com")], "eq", True),
    ([([XUL, "folderTree", "mode"], r"\bsmart\b")], "re", False),
]
OTHER = st.sampled_from(["", "0.0.2", "test account", "smart", "smart,favorite", "all", "smarter", ["x.js"], {"64": "i.png"}])


def set_path(data: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        data = data.setdefault(key, {}) if isinstance(data.get(key, {}), dict) else {}
    data[keys[-1]] = value


@st.composite
def json_case(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool, dict[str, Any]]:
    pairs, method, is_yaml = draw(st.sampled_from(RULES))
    data: dict[str, Any] = {}
    right = draw(st.booleans())  # half the files hold every ref (one value may still be drawn wrong below)
    for keys, ref in pairs:
        how = "ref" if right and draw(st.integers(0, 9)) else draw(st.sampled_from(
            ["ref", "other", "missing", "padded", "parent is a string"]))
        if how == "parent is a string" and len(keys) > 1:
            set_path(data, keys[:1], "flat")
        elif how != "missing":
            if method == "re":  # a folder tree mode, as Thunderbird's xulstore holds it (a string)
                ref = "smart"
            value = ref if how == "ref" else draw(OTHER) if how == "other" else f" {ref} " if isinstance(ref, str) else [ref]
            set_path(data, keys, value if method == "eq" else str(value))
    return [{"key": keys, "method": method, "ref": ref} for keys, ref in pairs], is_yaml, data


@SETTINGS
@given(case=json_case(), form=st.sampled_from(["file", "file", "not parseable", "empty", "a list", "missing"]))
def test_check_json_scores_as_osworld(tmp_path_factory: pytest.TempPathFactory, case: Any, form: str) -> None:
    expect, is_yaml, data = case
    path = tmp_path_factory.mktemp("json") / ("f.yaml" if is_yaml else "f.json")
    text = {"file": yaml.safe_dump(data) if is_yaml else json.dumps(data), "not parseable": "{name: [", "empty": "",
            "a list": json.dumps([data])}.get(form)
    if text is not None:
        path.write_text(text, encoding="utf-8")
    rules = {"expect": expect}
    same(metrics.check_json(str(path), rules, is_yaml=is_yaml), upstream("check_json")(str(path), rules, is_yaml=is_yaml))


KNOWN = {  # (file bytes, rules): ours scores 1, upstream 0
    "a re rule on a value that is not a string (upstream: TypeError, scored 0)":
        (json.dumps({"mode": ["smart"]}).encode(), {"expect": [{"key": ["mode"], "method": "re", "ref": r"\bsmart\b"}]}),
    "a file that is not UTF-8 (upstream reads it strictly: 0)":
        ('{"name": "Caf\xe9", "version": "0.0.1"}'.encode("latin-1"), {"expect": [{"key": ["version"], "method": "eq",
                                                                                   "ref": "0.0.1"}]}),
    "an unexpect rule on a missing key with re (upstream: re.search(None) raises, scored 0)":
        (b'{"a": 1}', {"unexpect": [{"key": ["mode"], "method": "re", "ref": "x"}]}),
}


@pytest.mark.xfail(strict=True, reason="forms the suite never gives; see each case")
@pytest.mark.parametrize("case", KNOWN.values(), ids=KNOWN.keys())
def test_check_json_where_ours_differs(tmp_path: Path, case: tuple[bytes, dict[str, Any]]) -> None:
    (tmp_path / "f.json").write_bytes(case[0])
    same(metrics.check_json(str(tmp_path / "f.json"), case[1]), upstream("check_json")(str(tmp_path / "f.json"), case[1]))


# -- rule: the config's literal rules ---------------------------------------------------------------------------

JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                       max_leaves=8)


@SETTINGS
@given(rules=JSONISH)
def test_rule_answers_as_osworld(rules: Any) -> None:
    assert asyncio.run(getters.get_rule(None, {"type": "rule", "rules": rules})) == \
        getters_module("misc").get_rule(None, {"type": "rule", "rules": rules})
    with pytest.raises(KeyError):  # hand-derived: no rules; ours names the key
        getters_module("misc").get_rule(None, {"type": "rule"})
    with pytest.raises(ValueError, match="needs 'rules'"):
        asyncio.run(getters.get_rule(None, {"type": "rule"}))


# -- cloud_file: downloads into the cache -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    files = {"/gold.xlsx": b"PK\x03\x04 gold", "/a/Gold%201.pdf": b"%PDF-1.4 one", "/b.txt": b"two\n"}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            data = files.get(self.path)
            self.send_response(200 if data is not None else 404)
            self.send_header("Content-Length", str(len(data or b"")))
            self.end_headers()
            self.wfile.write(data or b"")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def cached(answer: Any, cache: Path) -> Any:
    if isinstance(answer, list):
        return [cached(a, cache) for a in answer]
    return os.path.relpath(answer, cache), Path(answer).read_bytes()


CLOUD = {
    "one file": {"path": "/gold.xlsx", "dest": "gold.xlsx"},
    "multi, gives 0 and 2": {"multi": True, "path": ["/gold.xlsx", "/a/Gold%201.pdf", "/b.txt"],
                             "dest": ["g.xlsx", "Gold 1.pdf", "b.txt"], "gives": [0, 2]},
    "multi, gives 1": {"multi": True, "path": ["/gold.xlsx", "/b.txt"], "dest": ["g.xlsx", "b.txt"], "gives": [1]},
    "multi, gives by default": {"multi": True, "path": ["/b.txt", "/gold.xlsx"], "dest": ["b.txt", "g.xlsx"]},
}


@pytest.mark.parametrize("config", CLOUD.values(), ids=CLOUD.keys())
def test_cloud_file_answers_as_osworld(site: str, tmp_path: Path, config: dict[str, Any]) -> None:
    config = {**config, "path": [site + p for p in config["path"]] if config.get("multi") else site + config["path"]}
    (tmp_path / "ours").mkdir(), (tmp_path / "theirs").mkdir()
    mine = asyncio.run(getters.get_cloud_file(types.SimpleNamespace(cache_dir=str(tmp_path / "ours")), config))
    theirs = getters_module("file", ("pandas",)).get_cloud_file(types.SimpleNamespace(cache_dir=str(tmp_path / "theirs")), config)
    assert cached(mine, tmp_path / "ours") == cached(theirs, tmp_path / "theirs")


def test_cloud_file_not_there(site: str, tmp_path: Path) -> None:
    """Hand-derived: a 404 raises on both sides (upstream: requests' HTTPError; ours: FileNotFoundError)."""
    config = {"path": site + "/gone.pdf", "dest": "gone.pdf"}
    with pytest.raises(requests.HTTPError):
        getters_module("file", ("pandas",)).get_cloud_file(types.SimpleNamespace(cache_dir=str(tmp_path)), config)
    with pytest.raises(FileNotFoundError):
        asyncio.run(getters.get_cloud_file(types.SimpleNamespace(cache_dir=str(tmp_path)), config))


# -- bookmarks: the roots of Chrome's Bookmarks file on the desktop ------------------------------------------------

ROOTS = {"bookmark_bar": {"children": [{"name": "Ubuntu", "type": "url", "url": "https://ubuntu.com/"},
                                       {"children": [], "name": "Favorites", "type": "folder"}], "name": "Bookmarks bar"},
         "other": {"children": [], "name": "Other bookmarks"}}


@pytest.mark.parametrize("content", [json.dumps({"roots": ROOTS, "version": 1}), json.dumps({"version": 1}), "", None],
                         ids=["roots", "no roots", "empty", "missing"])
def test_bookmarks_answer_as_osworld(vm: VMServer, content: str | None) -> None:  # noqa: F811
    upstream_chrome = getters_module("chrome", ("pydrive",))
    from desktop_env.controllers.python import PythonController

    bookmarks = vm.home / ".config" / "google-chrome" / "Default" / "Bookmarks"
    bookmarks.parent.mkdir(parents=True, exist_ok=True)
    if content is not None:
        bookmarks.write_text(content)
    try:
        controller = PythonController("127.0.0.1", vm.port, pkgs_prefix="{command}")
        controller.retry_interval = 0  # it retries a missing file
        theirs = upstream_chrome.get_bookmarks(types.SimpleNamespace(controller=controller, vm_platform="Linux"), {})

        async def main() -> Any:
            async with EnvironmentClient(f"http://127.0.0.1:{vm.port}") as client:
                return await chrome.get_bookmarks(types.SimpleNamespace(client=client), {})

        assert asyncio.run(main()) == theirs
    finally:
        bookmarks.unlink(missing_ok=True)
