"""Browser judges (OSWorld's names and semantics): URLs compared as upstream normalizes them, and the metrics
over a browser's tabs.

``compare_urls(a, b, full=True)``: both URLs normalized — ``http://`` assumed where no scheme is given; the
host reduced to its registered domain, plus its subdomain unless that is just ``www`` (the public suffix is
dropped, so ``airbnb.com`` equals ``www.airbnb.com.sg``); a lone ``/`` path dropped; params, query and
fragment kept only with ``full`` — then compared as strings. Domains come from tldextract's bundled public
suffix list (never fetched).

* ``is_expected_tabs(result, rules)`` — ``rules['type'] == 'url'``: the tabs' URLs (``result``: a list of
  ``{"title", "url"}``) and ``rules['urls']`` have the same length and every expected URL matches some tab.
* ``is_expected_active_tab(result, rules)`` — the active tab (a ``{"url": ...}`` or a URL) matches
  ``rules['url']``; ``is_expected_active_tab_approximate`` compares without the query string.
* ``is_expected_url_pattern_match(result, rules)`` — every regex of ``rules['expected']`` is found in the URL.
* ``is_expected_bookmarks(result, rules)`` — over the bookmark bar of a ``Bookmarks`` file's roots:
  ``bookmark_bar_folders_names`` (the folders' names as a set), ``bookmark_bar_websites_urls`` (the links'
  URLs as a set), ``liked_authors_websites_urls`` (the links in its "Liked Authors" folder equal, as a set, one
  choice per entry of ``rules['urls']``, an entry being a URL or a list of alternatives).
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import ParseResult, urlparse, urlunparse

import structlog

log = structlog.get_logger(__name__)

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://")


@functools.lru_cache(maxsize=1)
def _extract() -> Any:
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # the bundled snapshot: no network


def normalize_url(url: str, full: bool = True) -> str:
    parsed = urlparse(url if _SCHEME.match(url) else f"http://{url}")
    parts = _extract()(parsed.netloc.lower())
    subdomain = "" if parts.subdomain == "www" else parts.subdomain
    netloc = f"{subdomain}.{parts.domain}" if subdomain else parts.domain
    return urlunparse(ParseResult(
        scheme=parsed.scheme.lower(), netloc=netloc, path=parsed.path if parsed.path != "/" else "",
        params=parsed.params if full else "", query=parsed.query if full else "",
        fragment=parsed.fragment if full else "",
    ))


def compare_urls(first: str | None, second: str | None, full: bool = True) -> bool:
    if first is None or second is None:
        return first == second
    return normalize_url(first, full) == normalize_url(second, full)


def lists_match(expected: Sequence[Any], actual: Sequence[Any], same: Callable[[Any, Any], bool]) -> bool:
    """Upstream's ``are_lists_equal``: equal lengths, and every expected item matches some actual one."""
    return len(expected) == len(actual) and all(any(same(e, a) for a in actual) for e in expected)


def _url(value: Any) -> str | None:
    return value.get("url") if isinstance(value, Mapping) else value


def is_expected_tabs(result: Any, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    if not result or not isinstance(rules, Mapping) or rules.get("type") != "url":
        return 0.0
    return float(lists_match(list(rules.get("urls", [])), [tab.get("url") for tab in result], compare_urls))


def is_expected_active_tab(result: Any, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    if not result or not isinstance(rules, Mapping) or rules.get("type") != "url":
        return 0.0
    return float(compare_urls(rules.get("url"), _url(result)))


def is_expected_active_tab_approximate(result: Any, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    if not result or not isinstance(rules, Mapping) or rules.get("type") != "url":
        return 0.0
    actual = _url(result)
    if not isinstance(actual, str) or not isinstance(rules.get("url"), str):
        return 0.0
    strip = lambda url: urlunparse(urlparse(url)._replace(query=""))  # noqa: E731
    return float(strip(rules["url"]) == strip(actual))


def is_expected_url_pattern_match(result: Any, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    url = _url(result) if result else None
    if not isinstance(url, str) or not isinstance(rules, Mapping):
        return 0.0
    return float(all(re.search(pattern, url) for pattern in rules.get("expected", [])))


def is_expected_bookmarks(result: Any, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    if not result or not isinstance(rules, Mapping):
        return 0.0
    bar = result["bookmark_bar"]["children"]
    kind = rules.get("type")
    if kind == "bookmark_bar_folders_names":
        return float({b["name"] for b in bar if b["type"] == "folder"} == set(rules["names"]))
    if kind == "bookmark_bar_websites_urls":
        return float({b["url"] for b in bar if b["type"] == "url"} == set(rules["urls"]))
    if kind == "liked_authors_websites_urls":
        folder = next((b for b in bar if b["type"] == "folder" and b["name"] == "Liked Authors"), None)
        if folder is None:
            return 0.0
        links = {b["url"] for b in folder["children"] if b["type"] == "url"}
        choices = [[url] if isinstance(url, str) else list(url) for url in rules["urls"]]
        return float(any(set(combination) == links for combination in itertools.product(*choices)))
    raise ValueError(f"is_expected_bookmarks: rules type {kind!r} is not supported; use bookmark_bar_folders_names, "
                     "bookmark_bar_websites_urls or liked_authors_websites_urls")
