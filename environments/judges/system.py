"""Operating-system checks (OSWorld's names and semantics): time zone, clipboard, copied files, favourites,
a SQLite query, a search URL; and the getters that read such state from the desktop.

Metrics (a missing or malformed result scores 0 where upstream would crash; a bad rule is a ValueError):

* ``is_utc_0(result)`` — the fourth line of ``timedatectl status`` output (its ``Time zone:`` line) ends
  with ``+0000)``.
* ``check_moved_jpgs(result, rules)`` — the ``children`` names of a ``list_directory`` tree are, as a set
  and in number, ``rules['expected']``.
* ``check_gnome_favorite_apps(result, rules)`` — gsettings' printed list (``['a.desktop', ...]``, read as a
  Python literal, never evaluated; GVariant's ``@as []`` is the empty list) holds as many entries as
  ``rules['expected']`` and the same set.
* ``run_sqlite3(result, rules)`` — the first column of the first row that ``rules['sql']`` gives on the
  SQLite file, as a number (NULL counts 0); a query without rows, or a file that is not a database, 0.
* ``is_expected_search_query(result, rules)`` — ``rules['expect']['pattern']`` (``re.search``) matches the
  active tab's ``url``.
* ``is_in_vm_clickboard(result, expected)`` — upstream's argument order: ``result`` is the rule
  (``{'expected': str | [str, ...]}``) and ``expected`` the clipboard text (``xsel --clipboard --output``);
  every expected string occurs in it.

Getters:

* ``vm_terminal_output`` — the probe's ``/terminal`` text (OSWorld reads gnome-terminal through AT-SPI).
* ``vm_wallpaper`` — ``gsettings get org.gnome.desktop.background picture-uri`` run on the desktop; the file
  it names (``file://`` and quotes dropped) copied into the cache as ``dest``.
* ``default_video_player`` — ``xdg-mime query default video/<type>`` for OSWorld's list of video types; the
  desktop file answered most often (upstream's list names most types twice: counted so), ``'unknown'`` when
  none answers.
* ``content_from_vm_file`` — ``path`` fetched into the cache; for ``file_type: xlsx`` and ``file_content:
  last_row`` the first sheet's last data row (the first row is the header) as strings, the way
  ``pandas.read_excel(...).iloc[-1].astype(str)`` writes them (see :func:`xlsx_last_row`).
* ``url_path_parse`` — Macy's filter facets from the active tab's URL path (see :func:`macys_url_fields`).

A desktop that lacks the command a getter runs is a RuntimeError naming it (never a made-up value).
"""

from __future__ import annotations

import ast
import datetime as dt
import math
import os
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import unquote, urlparse

import structlog

from environments.judges.chrome import get_active_url_from_accessTree
from environments.judges.getters import _cache_path, require_desktop_file

log = structlog.get_logger(__name__)

#: upstream's video types, with its repetitions (weights when counting answers)
VIDEO_TYPES = Counter({t: 1 if t == "x-ogm+ogg" else 2 for t in (
    "3gp 3gpp 3gpp2 avi divx dv fli flv mp2t mp4 mp4v-es mpeg mpeg-system msvideo ogg quicktime vnd.divx vnd.mpegurl "
    "vnd.rn-realvideo webm x-anim x-avi x-flc x-fli x-flv x-m4v x-matroska x-mpeg x-mpeg-system x-mpeg2 x-ms-asf "
    "x-ms-asf-plugin x-ms-asx x-ms-wm x-ms-wmv x-ms-wmx x-ms-wvx x-msvideo x-nsv x-ogm x-ogm+ogg x-theora "
    "x-theora+ogg").split()})


def _expected_list(rules: Any, name: str) -> list[Any]:
    if not isinstance(rules, Mapping) or not isinstance(rules.get("expected"), (list, tuple)):
        raise ValueError(f"{name}: rules {rules!r} need 'expected', a list of names")
    return list(rules["expected"])


def _same_names(found: Sequence[Any], expected: Sequence[Any]) -> float:
    return float(len(found) == len(expected) and set(found) == set(expected))


def is_utc_0(result: str | None, *_: Any, **__: Any) -> float:
    lines = result.split("\n") if isinstance(result, str) else []
    return float(len(lines) > 3 and lines[3].endswith("+0000)"))


def check_moved_jpgs(result: Mapping[str, Any] | None, rules: Any = None, **_: Any) -> float:
    expected = _expected_list(rules, "check_moved_jpgs")
    children = result.get("children") if isinstance(result, Mapping) else None
    if not isinstance(children, list):
        return 0.0
    return _same_names([node.get("name") for node in children if isinstance(node, Mapping)], expected)


def check_gnome_favorite_apps(result: str | None, rules: Any = None, **_: Any) -> float:
    expected = _expected_list(rules, "check_gnome_favorite_apps")
    text = (result or "").strip()
    if text.startswith("@as "):  # GVariant's typed empty array
        text = text[4:]
    try:
        apps = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        log.info("favorite-apps is not a list", output=result)
        return 0.0
    return _same_names(list(apps), expected) if isinstance(apps, (list, tuple)) else 0.0


def run_sqlite3(result: str | None, rules: Any = None, **_: Any) -> float:
    if not isinstance(rules, Mapping) or not isinstance(rules.get("sql"), str):
        raise ValueError(f"run_sqlite3: rules {rules!r} need 'sql', a query whose first column is the score")
    if not result or not os.path.isfile(result):
        return 0.0  # sqlite3 would create an empty database there
    connection = sqlite3.connect(result)
    try:
        row = connection.execute(rules["sql"]).fetchone()
    except sqlite3.DatabaseError as exc:
        if "syntax error" in str(exc) or "incomplete input" in str(exc):
            raise ValueError(f"run_sqlite3: rules['sql'] is not valid SQL ({exc})") from None
        log.info("sqlite query failed", error=str(exc))
        return 0.0
    finally:
        connection.close()
    if row is None:
        return 0.0
    return float(row[0] or 0)


def is_expected_search_query(result: Mapping[str, Any] | None, rules: Any = None, **_: Any) -> float:
    expect = rules.get("expect") if isinstance(rules, Mapping) else None
    if not isinstance(expect, Mapping) or not isinstance(expect.get("pattern"), str):
        raise ValueError(f"is_expected_search_query: rules {rules!r} need {{'expect': {{'pattern': REGEX}}}}")
    try:
        pattern = re.compile(expect["pattern"])
    except re.error as exc:
        raise ValueError(f"is_expected_search_query: pattern {expect['pattern']!r} is not a regex ({exc})") from None
    if not result or not isinstance(result.get("url"), str):
        return 0.0
    return float(pattern.search(result["url"]) is not None)


def is_in_vm_clickboard(result: Any, expected: str | None = None, **_: Any) -> float:
    if not isinstance(result, Mapping) or not isinstance(result.get("expected"), (str, list)):
        raise ValueError(f"is_in_vm_clickboard: the result (upstream's rule) {result!r} needs 'expected', "
                         "a string or a list of strings")
    if not isinstance(expected, str):
        return 0.0
    wanted = result["expected"]
    return float(all(str(item) in expected for item in (wanted if isinstance(wanted, list) else [wanted])))


# -- getters ---------------------------------------------------------------------------------------------------


async def _run(env: Any, argv: list[str], what: str) -> dict[str, Any]:
    answer = await env.client.execute(argv)
    if answer.get("returncode") == 127:
        raise RuntimeError(f"{what}: the desktop has no '{argv[0]}' command ({answer.get('error')}); this "
                           "getter needs it installed there")
    return answer


async def get_vm_terminal_output(env: Any, config: Mapping[str, Any]) -> str | None:
    return await env.client.terminal()


async def get_vm_wallpaper(env: Any, config: Mapping[str, Any]) -> str:
    dest = config.get("dest")
    if not isinstance(dest, str) or not dest:
        raise ValueError(f"vm_wallpaper getter config {dict(config)!r} needs 'dest' (a file name in the cache)")
    answer = await _run(env, ["gsettings", "get", "org.gnome.desktop.background", "picture-uri"], "vm_wallpaper")
    uri = str(answer.get("output") or "").strip().replace("'", "")
    if answer.get("returncode") not in (0, None) or not uri:
        raise FileNotFoundError(f"vm_wallpaper: gsettings names no wallpaper ({answer.get('error')})")
    path = unquote(uri[len("file://"):]) if uri.startswith("file://") else uri
    data = await env.client.get_file(path)
    if data is None:
        raise FileNotFoundError(f"vm_wallpaper: the wallpaper {path} does not exist on the desktop")
    target = _cache_path(env, dest)
    target.write_bytes(data)
    return str(target)


async def get_default_video_player(env: Any, config: Mapping[str, Any]) -> str:
    # one command for all types, one line each (an empty line: no default)
    script = 'for t in "$@"; do printf "%s\\n" "$(xdg-mime query default "video/$t" 2>/dev/null | head -n 1)"; done'
    probe = await _run(env, ["xdg-mime", "--version"], "default_video_player")
    if probe.get("returncode") not in (0, None):
        raise RuntimeError(f"default_video_player: xdg-mime does not run on the desktop ({probe.get('error')})")
    answer = await env.client.execute(["sh", "-c", script, "sh", *VIDEO_TYPES])
    outputs = str(answer.get("output") or "").split("\n")
    counts: Counter[str] = Counter()
    for kind, output in zip(VIDEO_TYPES, outputs):
        if output.strip():
            counts[output.strip()] += VIDEO_TYPES[kind]
    return max(counts, key=counts.__getitem__) if counts else "unknown"  # ties: the first answered, as upstream


#: strings pandas reads as missing (its default ``na_values``)
NA_STRINGS = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                        "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})


def _cell(cell: Any) -> Any:
    value = cell.value
    if value is None:
        return ""
    if cell.data_type == "e":
        return math.nan
    if cell.data_type == "n" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value) if float(value).is_integer() else float(value)
    return value


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    for kind in (int, float):
        try:
            return kind(value.strip()) if isinstance(value, str) else None
        except ValueError:
            continue
    return None


def _column_strings(column: Sequence[Any]) -> list[str]:
    missing = [v != v or (isinstance(v, str) and v in NA_STRINGS) for v in column]
    present = [v for v, gone in zip(column, missing) if not gone]
    numbers = [_number(v) for v in present]
    if present and None not in numbers:  # a numeric column: int64 unless a gap or a fraction makes it float64
        floating = any(missing) or any(isinstance(n, float) for n in numbers)
        it = iter(numbers)
        return ["nan" if gone else str(float(n) if floating else n) for gone, n in
                ((g, None if g else next(it)) for g in missing)]
    dated = bool(present) and all(isinstance(v, dt.datetime) for v in present)
    return [("NaT" if dated else "nan") if gone else str(v) for v, gone in zip(column, missing)]


def xlsx_last_row(path: str | Path) -> list[str]:
    """The first sheet's last data row as ``pandas.read_excel(path).iloc[-1].astype(str).tolist()`` gives it:
    cells read as pandas' openpyxl reader does (integral numbers as int, empty cells and its NA strings missing),
    trailing empty rows and columns dropped, and each value written by its column's type: a numeric column is
    int64 (``'147'``) unless a missing cell or a fraction makes it float64 (``'147.0'``), a missing value is
    ``'nan'`` (``'NaT'`` in a date column), anything else ``str(value)``. ``[]`` when there is no data row
    (pandas fails there)."""
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True, data_only=True, keep_links=False)
    try:
        rows = []
        for row in book.worksheets[0].iter_rows():
            values = [_cell(cell) for cell in row]
            while values and values[-1] == "":
                values.pop()
            rows.append(values)
    finally:
        book.close()
    while rows and not rows[-1]:
        rows.pop()
    width = max((len(r) for r in rows), default=0)
    body = [r + [""] * (width - len(r)) for r in rows[1:]]
    body = [r for r in body if width > 1 or r[0] != ""]  # pandas skips blank one-cell lines only
    if not body:
        return []
    return [strings[-1] for strings in (_column_strings(column) for column in zip(*body))]


async def get_content_from_vm_file(env: Any, config: Mapping[str, Any]) -> list[str]:
    kind, content = config.get("file_type"), config.get("file_content")
    if (kind, content) != ("xlsx", "last_row") or not isinstance(config.get("path"), str):
        raise ValueError(f"content_from_vm_file getter config {dict(config)!r}: supported is 'path' with "
                         "file_type 'xlsx' and file_content 'last_row'")
    local = await require_desktop_file(env, config["path"], os.path.basename(config["path"]), "content_from_vm_file")
    return xlsx_last_row(local)


def macys_url_fields(url: str, parse_keys: Sequence[str]) -> dict[str, Any]:
    """Upstream's Macy's product-listing parse of ``url``'s (percent-decoded) path:

    * ``mens_clothing`` / ``shirts`` / ``short_sleeve`` — True when the path holds ``mens-clothing`` /
      ``shirts`` / ``short-sleeve`` (or the facets below say ``Product_department`` is shirts, Shirts or Shirt /
      ``Sleeve_length`` is short-sleeve or Short Sleeve), else None; always present;
    * facets: the first two consecutive path parts that both hold a comma are facet names and their values
      (paired in order, stripped; an empty value None; ``Price_discount_range`` a ``|``-separated list);
    * each of ``parse_keys`` that is a facet (``Men_regular_size_t`` and ``Price_discount_range`` always are,
      None when absent) is copied, except ``Price_discount_range``, given as ``'50_PERCENT_ off & more'`` when
      that is among its values and neither 30 % nor 20 % is, else ``'not_50_PERCENT_ off & more'``."""
    path = unquote(urlparse(url).path)
    parts = path.strip("/").split("/")
    shirts, short = "shirts" in path, "short-sleeve" in path
    facets: dict[str, Any] = {}
    for names, values in zip(parts, parts[1:]):
        if "," in names and "," in values:
            for name, value in zip((n.strip() for n in names.split(",")), (v.strip() for v in values.split(","))):
                if name == "Price_discount_range":
                    facets[name] = [item.strip() for item in value.split("|")] if value else None
                else:
                    facets[name] = value or None
                shirts = shirts or (name == "Product_department" and value in ("shirts", "Shirts", "Shirt"))
                short = short or (name == "Sleeve_length" and value in ("short-sleeve", "Short Sleeve"))
            break
    for name in ("Men_regular_size_t", "Price_discount_range"):
        facets.setdefault(name, None)
    fields: dict[str, Any] = {"mens_clothing": True if "mens-clothing" in path else None,
                              "shirts": True if shirts else None, "short_sleeve": True if short else None}
    for key in parse_keys:
        if key == "Price_discount_range":
            ranges = facets[key] or []
            lower = {"30_PERCENT_ off & more", "20_PERCENT_ off & more"}
            half = "50_PERCENT_ off & more" in ranges and not lower & set(ranges)
            fields[key] = "50_PERCENT_ off & more" if half else "not_50_PERCENT_ off & more"
        elif key in facets:
            fields[key] = facets[key]
    return fields


async def get_url_path_parse(env: Any, config: Mapping[str, Any]) -> dict[str, Any] | None:
    keys = config.get("parse_keys")
    if not isinstance(keys, list):
        raise ValueError(f"url_path_parse getter config {dict(config)!r} needs 'parse_keys' (a list)")
    url = await get_active_url_from_accessTree(env, config)
    return None if url is None else macys_url_fields(url, keys)


#: registry name -> function (OSWorld's ``get_<name>``)
GETTERS = {name[len("get_"):]: obj for name, obj in dict(globals()).items() if name.startswith("get_")
           and callable(obj) and name != "get_active_url_from_accessTree"}
METRICS = ("is_utc_0", "check_moved_jpgs", "check_gnome_favorite_apps", "run_sqlite3", "is_expected_search_query",
           "is_in_vm_clickboard")
