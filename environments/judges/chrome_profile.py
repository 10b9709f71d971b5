"""Chrome judges over the browser's profile (OSWorld's names and semantics): the ``History`` and ``Cookies``
databases, ``Preferences`` and ``Local State``, installed extensions, shortcuts on the desktop and a page as the
desktop's network serves it. Paths are those of OSWorld's Ubuntu VM (``~/.config/google-chrome``).

Getters (a missing profile file is a :class:`FileNotFoundError`, which the evaluation scores 0; a file that is
not what Chrome writes is a :class:`ValueError`, as in :mod:`environments.judges.chrome`):

* ``history`` — ``[(url, title, last_visit_time), ...]``, every row of the ``urls`` table of ``Default/History``
  (copied into the cache as ``dest``, default ``History``);
* ``cookie_data`` — every row of the ``cookies`` table of ``Default/Cookies`` (all columns, in the table's order:
  the second is ``host_key``), copied as ``dest`` (default ``Cookies``);
* ``chrome_font_size`` — ``webkit.webprefs`` of ``Preferences`` over Chrome's defaults (``default_font_size`` 16,
  ``default_fixed_font_size`` 13, ``minimum_font_size`` 13: Chrome writes only what was changed);
* ``enabled_experiments`` — ``browser.enabled_labs_experiments`` of ``Local State`` (``[]`` when unset);
* ``shortcuts_on_desktop`` — ``{file name: text}`` of every ``*.desktop`` file directly on ``~/Desktop``
  (``{}`` without that folder);
* ``find_installed_extension_name`` — the name of every extension in ``extensions.settings`` of
  ``Preferences``: the name its stored manifest gives, else (newer Chrome keeps no manifest there) the
  ``manifest.json`` under the extension's ``path`` (relative paths lie in ``Default/Extensions``); a
  ``__MSG_key__`` name is looked up in its ``_locales`` (``en_US``, ``en``, then its ``default_locale``);
  extensions whose name cannot be read are left out;
* ``page_info`` — ``{"title", "url", "content"}`` for ``config['url']``: the document as the desktop's network
  serves it (HTTP GET from inside the desktop, without the profile's cookies, as upstream's fresh browser
  context), its title that of its ``<title>`` (whitespace collapsed); ``{"title": "Connection failed", "url",
  "content": ""}`` when nothing comes back.

Metrics (``result`` from the getter above, ``rules`` from the task; ``None`` scores 0; a rule ``type`` other
than those named is a :class:`ValueError`):

* ``check_history_deleted(result, rules)`` — ``keywords``: 1 when no history URL contains any keyword.
* ``is_cookie_deleted(result, rules)`` — ``domains``: 1 when no cookie's host matches a domain under
  :func:`environments.judges.browser.compare_urls`.
* ``check_font_size(result, rules)`` — ``value``: ``default_font_size`` equals it; ``range``: strictly between
  ``min`` and ``max``.
* ``check_enabled_experiments(result, rules)`` — ``names``: the experiments' names (before ``@``), in order,
  equal the list.
* ``is_shortcut_on_desktop(result, rules)`` — ``name`` / ``exec``: some shortcut holds the line ``Name=<name>`` /
  ``Exec=<exec>`` followed by a newline.
* ``is_expected_installed_extensions(result, rules)`` — every name of ``rules['expected']`` is installed
  (0 when none is).
* ``is_added_to_steam_cart(result, rules)`` — every string of ``rules['items']`` occurs in the page's content.

:func:`write_browse_history` builds the ``History`` that the ``update_browse_history`` setup step uploads.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from contextlib import closing
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Mapping, Sequence

import structlog

from core.errors import ScaleCUAError
from environments.judges.chrome_history import CHROME_EPOCH_S, HISTORY, write_browse_history  # noqa: F401
from environments.judges.browser import compare_urls
from environments.judges.chrome import preferences
from environments.judges.getters import _cache_path

log = structlog.get_logger(__name__)

PROFILE = "~/.config/google-chrome"
COOKIES = f"{PROFILE}/Default/Cookies"
LOCAL_STATE = f"{PROFILE}/Local State"
EXTENSIONS = f"{PROFILE}/Default/Extensions"
DESKTOP = "~/Desktop"
FONT_DEFAULTS = {"default_fixed_font_size": 13, "default_font_size": 16, "minimum_font_size": 13}


async def _rows(env: Any, path: str, config: Mapping[str, Any], default_dest: str, query: str) -> list[tuple]:
    data = await env.client.get_file(path)
    if data is None:
        raise FileNotFoundError(f"chrome: {path} does not exist on the desktop (Chrome writes it once it runs)")
    target = _cache_path(env, str(config.get("dest") or default_dest))
    target.write_bytes(data)
    try:
        with closing(sqlite3.connect(target)) as db:
            return db.execute(query).fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"chrome: {path} is not the SQLite database Chrome writes ({exc})") from None


async def _json(env: Any, path: str, *, required: bool = True) -> Any:
    data = await env.client.get_file(path)
    if data is None:
        if required:
            raise FileNotFoundError(f"chrome: {path} does not exist on the desktop (Chrome writes it on exit)")
        return None
    try:
        return json.loads(data.decode("utf-8-sig", "replace"))
    except ValueError as exc:
        if required:
            raise ValueError(f"chrome: {path} is not JSON ({exc})") from None
        return None


async def get_history(env: Any, config: Mapping[str, Any]) -> list[tuple]:
    return await _rows(env, HISTORY, config, "History", "SELECT url, title, last_visit_time FROM urls")


async def get_cookie_data(env: Any, config: Mapping[str, Any]) -> list[tuple]:
    return await _rows(env, COOKIES, config, "Cookies", "SELECT * FROM cookies")


async def get_chrome_font_size(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    webprefs = (await preferences(env)).get("webkit", {}).get("webprefs", {})
    return {**FONT_DEFAULTS, **(webprefs if isinstance(webprefs, Mapping) else {})}


async def get_enabled_experiments(env: Any, config: Mapping[str, Any]) -> list[str]:
    state = await _json(env, LOCAL_STATE)
    if not isinstance(state, dict):
        raise ValueError(f"chrome: {LOCAL_STATE} holds {type(state).__name__}, not a JSON object")
    return list(state.get("browser", {}).get("enabled_labs_experiments", []))


async def get_shortcuts_on_desktop(env: Any, config: Mapping[str, Any]) -> dict[str, str]:
    try:
        tree = await env.client.list_directory(DESKTOP)
    except ScaleCUAError as exc:  # the probe's error (environments.client.ProbeError) carries its HTTP status
        if getattr(exc, "status_code", None) not in (400, 404):
            raise
        return {}  # no Desktop folder: no shortcuts on it
    shortcuts = {}
    for child in tree.get("children") or []:
        name = str(child.get("name", ""))
        if child.get("type") == "file" and name.endswith(".desktop"):
            data = await env.client.get_file(f"{DESKTOP}/{name}")
            if data is not None:
                shortcuts[name] = data.decode("utf-8", "replace")
    return shortcuts


async def _extension_name(env: Any, entry: Mapping[str, Any]) -> str | None:
    manifest = entry.get("manifest")
    name = manifest.get("name") if isinstance(manifest, Mapping) else None
    path = entry.get("path")
    directory = None
    if isinstance(path, str) and path:
        directory = path if path.startswith("/") else f"{EXTENSIONS}/{path}"
    if not isinstance(name, str) and directory:
        manifest = await _json(env, f"{directory}/manifest.json", required=False)
        name = manifest.get("name") if isinstance(manifest, Mapping) else None
    if not isinstance(name, str):
        return None
    if not (name.startswith("__MSG_") and name.endswith("__")) or not directory:
        return name
    key = name[len("__MSG_"):-2].lower()
    default = manifest.get("default_locale") if isinstance(manifest, Mapping) else None
    for locale in dict.fromkeys(("en_US", "en", str(default or "en"))):
        messages = await _json(env, f"{directory}/_locales/{locale}/messages.json", required=False)
        if isinstance(messages, Mapping):
            found = {str(k).lower(): v for k, v in messages.items()}.get(key)
            if isinstance(found, Mapping) and isinstance(found.get("message"), str):
                return found["message"]
    return name


async def get_find_installed_extension_name(env: Any, config: Mapping[str, Any]) -> list[str]:
    settings = (await preferences(env)).get("extensions", {}).get("settings", {})
    names = []
    for extension_id, entry in settings.items():
        name = await _extension_name(env, entry) if isinstance(entry, Mapping) else None
        if name is None:
            log.info("extension without a readable name", extension=extension_id)
        else:
            names.append(name)
    return names


class _Title(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inside, self.done, self.parts = False, False, []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.inside = tag == "title" and not self.done

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.inside:
            self.inside, self.done = False, True

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.parts.append(data)


def page_title(html: str) -> str:
    """``document.title`` of an HTML page: its first ``<title>``, whitespace collapsed."""
    parser = _Title()
    parser.feed(html)
    return " ".join("".join(parser.parts).split())


async def get_page_info(env: Any, config: Mapping[str, Any]) -> dict[str, str]:
    url = config.get("url")
    if not isinstance(url, str) or not url:
        raise ValueError(f"page_info getter config {dict(config)!r} needs 'url' (the page to load)")
    content = str((await env.client.devtools({"action": "fetch", "url": url})).get("content") or "")
    if not content:
        return {"title": "Connection failed", "url": url, "content": ""}
    return {"title": page_title(content), "url": url, "content": content}


def _rule(rules: Any, metric: str, kinds: Sequence[str]) -> str:
    kind = rules.get("type") if isinstance(rules, Mapping) else None
    if kind not in kinds:
        raise ValueError(f"{metric}: rules {rules!r} need 'type' {' or '.join(map(repr, kinds))}")
    return str(kind)


def check_history_deleted(result: Any, rules: Any = None, **options: Any) -> float:
    _rule(rules, "check_history_deleted", ("keywords",))
    if result is None:
        return 0.0
    urls = [str(row[0]) for row in result]
    return 0.0 if any(keyword in url for keyword in rules["keywords"] for url in urls) else 1.0


def is_cookie_deleted(result: Any, rules: Any = None, **options: Any) -> float:
    _rule(rules, "is_cookie_deleted", ("domains",))
    if result is None:
        return 0.0
    hosts = [row[1] for row in result]
    return 0.0 if any(compare_urls(domain, host) for domain in rules["domains"] for host in hosts) else 1.0


def check_font_size(result: Any, rules: Any = None, **options: Any) -> float:
    kind = _rule(rules, "check_font_size", ("value", "range"))
    size = result.get("default_font_size") if isinstance(result, Mapping) else None
    if size is None:
        return 0.0
    if kind == "value":
        return float(size == rules["value"])
    return float(rules["min"] < size < rules["max"])


def check_enabled_experiments(result: Any, rules: Any = None, **options: Any) -> float:
    _rule(rules, "check_enabled_experiments", ("names",))
    if result is None:
        return 0.0
    return float([str(experiment).split("@")[0] for experiment in result] == list(rules["names"]))


def is_shortcut_on_desktop(result: Any, rules: Any = None, **options: Any) -> float:
    kind = _rule(rules, "is_shortcut_on_desktop", ("name", "exec"))
    if not isinstance(result, Mapping):
        return 0.0
    line = f"{kind.capitalize()}={rules[kind]}\n"
    return float(any(line in str(text) for text in result.values()))


def is_expected_installed_extensions(result: Any, rules: Any = None, **options: Any) -> float:
    if not isinstance(rules, Mapping) or not isinstance(rules.get("expected"), list):
        raise ValueError(f"is_expected_installed_extensions: rules {rules!r} need 'expected' (a list of names)")
    if not result:
        return 0.0
    return float(set(rules["expected"]) <= set(result))


def is_added_to_steam_cart(result: Any, rules: Any = None, **options: Any) -> float:
    if not isinstance(rules, Mapping) or not isinstance(rules.get("items"), list):
        raise ValueError(f"is_added_to_steam_cart: rules {rules!r} need 'items' (a list of strings)")
    if not isinstance(result, Mapping):
        return 0.0
    content = str(result.get("content") or "")
    return float(all(item in content for item in rules["items"]))


#: registry name -> function (OSWorld's ``get_<name>``)
GETTERS = {name[len("get_"):]: obj for name, obj in dict(globals()).items() if name.startswith("get_")}
METRICS = ("check_history_deleted", "is_cookie_deleted", "check_font_size", "check_enabled_experiments",
           "is_shortcut_on_desktop", "is_expected_installed_extensions", "is_added_to_steam_cart")
