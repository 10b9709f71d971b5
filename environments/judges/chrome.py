"""Getters over Chrome's profile (OSWorld's names and semantics): values read from the ``Preferences`` JSON of
the desktop user's default profile, ``~/.config/google-chrome/Default/Preferences`` (OSWorld's Ubuntu VM).

Chrome writes ``Preferences`` when it exits, which is why these tasks' postconfig quits and restarts it. A
profile without the file is a :class:`FileNotFoundError` (the evaluation scores 0); a file that is not JSON
is a :class:`ValueError` (a crashed judgement). Each getter answers as upstream's does:

* ``default_search_engine`` — the default provider's ``short_name`` (``"Google"`` when none is set);
* ``profile_name`` — ``profile.name`` (None when unset);
* ``enable_do_not_track`` / ``enable_enhanced_safety_browsing`` — ``"true"`` / ``"false"`` from
  ``enable_do_not_track`` / ``safebrowsing.enhanced``;
* ``new_startup_page`` — ``"true"`` when the profile has no ``session`` (a fresh start) or its
  ``restore_on_startup`` is 5 (open the New Tab page), else ``"false"``;
* ``data_delete_automacally`` (sic, upstream's name) — ``"true"`` when ``profile.default_content_setting_values``
  exists;
* ``find_unpacked_extension_path`` — the ``path`` of every extension in ``extensions.settings``.

* ``bookmarks`` — the ``roots`` of the profile's ``Bookmarks`` file (``[]`` when there is none).

The tab getters ask the running browser instead, through its DevTools endpoint from inside the desktop
(:meth:`environments.client.EnvironmentClient.devtools`); "the active tab" is the page with the most recent
activity (Chrome lists pages in that order):

* ``open_tabs_info`` — ``[{"title", "url"}, ...]`` for the open pages, ``[]`` when no browser answers
  (upstream's answer then). Titles are the pages' current ones (upstream waits for network-idle first).
* ``active_url_from_accessTree`` — what upstream reads from the address bar behind ``goto_prefix`` (default
  ``https://``); None without a browser or a page. The address bar shows what Chrome shows by default
  (:mod:`environments.judges.address_bar`, checked against a real Chromium's accessibility tree): no
  ``http(s)://``, no leading ``www.``, no ``/`` of a bare host, escapes of letters and UTF-8 shown decoded;
  ``chrome://`` in full. The suite's tasks are written for that: ``goto_prefix: "https://www."`` for
  ``https://www.drugs.com/...``, ``""`` for ``chrome://password-manager/passwords``.
* ``active_tab_info`` — ``{"title", "url", "content"}`` of ``active_url_from_accessTree``'s URL re-opened, as
  upstream does, in a fresh browser context (no cookies or tabs of the user's; the ``render`` DevTools action,
  0.5 s after load for upstream's network-idle wait): its title, location after redirects and rendered DOM. So
  a page that needs the tab's session answers where the site sends a new visitor, and a URL that does not load
  (e.g. ``goto_prefix: "https://www."`` before a host without a ``www.`` name) None, as upstream; None without
  a browser or a page.
* ``active_tab_url_parse`` — the ``parse_keys`` query parameters of the active URL (first values, ``""`` when
  absent), renamed by ``replace``, split at commas with ``split_list``.
* ``url_dashPart`` — the ``partIndex``-th ``/``-separated part of that URL (its query dropped with
  ``needDeleteId``), as a string or as ``{key: part}`` (``returnType``); None when there is no such part.
"""

from __future__ import annotations

import json
from typing import Any, Mapping
from urllib.parse import parse_qs, urlparse

import structlog

from core.errors import ScaleCUAError
from environments.judges.address_bar import address_bar_text

log = structlog.get_logger(__name__)

PREFERENCES = "~/.config/google-chrome/Default/Preferences"
BOOKMARKS = "~/.config/google-chrome/Default/Bookmarks"


async def preferences(env: Any) -> dict[str, Any]:
    data = await env.client.get_file(PREFERENCES)
    if data is None:
        raise FileNotFoundError(f"chrome: {PREFERENCES} does not exist on the desktop (Chrome writes it on exit)")
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"chrome: {PREFERENCES} is not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"chrome: {PREFERENCES} holds {type(parsed).__name__}, not a JSON object")
    return parsed


def _flag(value: Any) -> str:
    return "true" if value else "false"


async def get_default_search_engine(env: Any, config: Mapping[str, Any]) -> str:
    data = await preferences(env)
    return data.get("default_search_provider_data", {}).get("template_url_data", {}).get("short_name", "Google")


async def get_profile_name(env: Any, config: Mapping[str, Any]) -> str | None:
    return (await preferences(env)).get("profile", {}).get("name")


async def get_enable_do_not_track(env: Any, config: Mapping[str, Any]) -> str:
    return _flag((await preferences(env)).get("enable_do_not_track", {}))


async def get_enable_enhanced_safety_browsing(env: Any, config: Mapping[str, Any]) -> str:
    return _flag((await preferences(env)).get("safebrowsing", {}).get("enhanced", {}))


async def get_new_startup_page(env: Any, config: Mapping[str, Any]) -> str:
    data = await preferences(env)
    return "true" if "session" not in data else _flag(data.get("session", {}).get("restore_on_startup") == 5)


async def get_data_delete_automacally(env: Any, config: Mapping[str, Any]) -> str:
    profile = (await preferences(env)).get("profile", {})
    return _flag(profile.get("default_content_setting_values") is not None)


async def get_find_unpacked_extension_path(env: Any, config: Mapping[str, Any]) -> list[str]:
    settings = (await preferences(env)).get("extensions", {}).get("settings", {})
    return [entry["path"] for entry in settings.values() if isinstance(entry, Mapping) and "path" in entry]


async def get_open_tabs_info(env: Any, config: Mapping[str, Any]) -> list[dict[str, str]]:
    """As upstream's pages say: each document's URL (Chrome's error page where it did not load) and title."""
    tabs = await _tabs(env, float(config.get("wait_s", 5)), documents=True)
    return [{"title": tab["title"], "url": tab["url"]} for tab in tabs or []]


async def _tabs(env: Any, wait_s: float = 5, documents: bool = False) -> list[dict[str, str]] | None:
    try:
        return await env.client.devtools({"action": "tabs", "wait_s": wait_s, "documents": documents})
    except ScaleCUAError as exc:
        log.info("no browser answers", error=str(exc))
        return None


async def get_active_url_from_accessTree(env: Any, config: Mapping[str, Any]) -> str | None:  # noqa: N802
    tabs = await _tabs(env)
    if not tabs or not tabs[0]["url"]:
        return None
    return f"{config.get('goto_prefix', 'https://')}{address_bar_text(tabs[0]['url'])}"


async def get_active_tab_info(env: Any, config: Mapping[str, Any]) -> dict[str, str] | None:
    url = await get_active_url_from_accessTree(env, config)
    if url is None:
        return None
    try:
        shown = await env.client.devtools({"action": "render", "url": url, "settle_s": 0.5, "wait_s": 60})
    except ScaleCUAError as exc:
        log.info("the active tab's page cannot be opened", url=url, error=str(exc))
        return None
    if str(shown["url"]).startswith("chrome-error://"):  # it did not load: upstream's page.goto raises
        return None
    return {"title": shown["title"], "url": shown["url"], "content": shown["content"]}


async def get_active_tab_url_parse(env: Any, config: Mapping[str, Any]) -> dict[str, Any] | None:
    keys = config.get("parse_keys")
    if not isinstance(keys, list):
        raise ValueError(f"active_tab_url_parse getter config {dict(config)!r} needs 'parse_keys' (a list)")
    url = await get_active_url_from_accessTree(env, config)
    if url is None:
        return None
    query = parse_qs(urlparse(url).query)
    params: dict[str, Any] = {key: query.get(key, [""])[0] for key in keys}
    for old, new in dict(config.get("replace") or {}).items():
        params[new] = params.pop(old)
    if config.get("split_list", False):
        params = {key: value.split(",") for key, value in params.items()}
    return params


async def get_url_dashPart(env: Any, config: Mapping[str, Any]) -> Any:  # noqa: N802 (upstream's name)
    if config.get("returnType") not in ("string", "json"):
        raise ValueError(f"url_dashPart getter config {dict(config)!r} needs returnType 'string' or 'json'")
    url = await get_active_url_from_accessTree(env, config)
    if url is None:
        return None
    parts = url.split("/")
    index = int(config["partIndex"])
    if index >= len(parts):
        return None
    part = parts[index].split("?")[0] if config.get("needDeleteId", False) else parts[index]
    return part if config["returnType"] == "string" else {config["key"]: part}


async def get_bookmarks(env: Any, config: Mapping[str, Any]) -> Any:
    data = await env.client.get_file(BOOKMARKS)
    if not data:
        return []
    return json.loads(data).get("roots", {})


#: registry name -> function (OSWorld's ``get_<name>``)
GETTERS = {name[len("get_"):]: obj for name, obj in dict(globals()).items() if name.startswith("get_")}
#: the getters that read ``Preferences``
PREFERENCE_GETTERS = ("default_search_engine", "profile_name", "enable_do_not_track", "enable_enhanced_safety_browsing",
                      "new_startup_page", "data_delete_automacally", "find_unpacked_extension_path")
