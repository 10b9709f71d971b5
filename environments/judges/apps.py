"""Metrics over applications' own settings files and command output (OSWorld's names and semantics).

* ``check_json_settings(result, rules)`` -- the JSON file (e.g. VS Code's ``settings.json``) holds every
  key of ``rules["expected"]`` with that exact value (a file that is not plain JSON scores 0, as upstream).
* ``is_extension_installed(result, rules)`` -- command output (e.g. ``code --list-extensions``) contains
  (``rules["type"]: contain``) or lacks (``not_contain``) ``rules["expected"]``.
* ``check_thunderbird_prefs(result, rules)`` -- Thunderbird's ``prefs.js``: every ``expect`` preference is
  set and matches its value rule (:func:`environments.judges.rules.match_value`, e.g. ``re.S``), and no
  ``unexpect`` preference matches its rule.
* ``check_thunderbird_filter(result, rules)`` -- Thunderbird's ``msgFilterRules.dat``: every ``expect``
  record (``{"name": ..., "action": ..., "condition": [...]}``, keys compared for equality) matches some
  filter, and no filter matches an ``unexpect`` record. A filter's ``condition`` is its list of clauses
  (``AND (subject,contains,urgent)``, ``ALL``).
* ``check_thunderbird_folder(result, expected, ...)`` -- Thunderbird folder files (mbox), one or a list (paired
  in order): 1 when every pair reads the same under upstream's reading, which counts *empty* messages only (see
  the function).
"""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path
from typing import Any, Mapping

from environments.judges.rules import match_value

_FILTER_LINE = re.compile(r'^(?P<key>name|enabled|type|action|actionValue|condition)="(?P<value>.*)"$')
_CLAUSE = re.compile(r"""\b(?:AND|OR) \((?:[\w ]+),(?:[\w ']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b""")
_PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)", (?P<value>.+)\);$')


def _rules(rules: Any, name: str, required: str) -> Mapping[str, Any]:
    if not isinstance(rules, Mapping) or required not in rules:
        raise ValueError(f"{name}: expected {{'{required}': ...}} (a rule getter's rules), got {rules!r}")
    return rules


def check_json_settings(result: str | None, rules: Any = None, **_: Any) -> float:
    """1 when the JSON in ``result`` has every ``rules["expected"]`` key with that value (``==``; an empty
    ``expected`` holds for any JSON file, as upstream)."""
    if not result:
        return 0.0
    expected = _rules(rules, "check_json_settings", "expected")["expected"]
    try:
        data = json.loads(Path(result).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0.0
    try:
        return float(all(key in data and data[key] == value for key, value in expected.items()))
    except (TypeError, KeyError, IndexError):  # JSON that is not an object (upstream raises)
        return 0.0


def is_extension_installed(result: str | None, rules: Any = None, **_: Any) -> float:
    """``rules["type"]``: ``contain`` -- ``rules["expected"]`` occurs in the output; ``not_contain`` -- it does not.
    No output (the command could not run) scores 0 either way (upstream raises)."""
    r = _rules(rules, "is_extension_installed", "expected")
    kind = r.get("type")
    if kind not in ("contain", "not_contain"):
        raise ValueError(f"is_extension_installed: rules type {kind!r}; use contain or not_contain")
    if result is None:
        return 0.0
    found = r["expected"] in result
    return float(found if kind == "contain" else not found)


def check_thunderbird_prefs(result: str | None, rules: Any = None, **_: Any) -> float:
    """Preferences in ``prefs.js``: each ``expect`` key present and matching (its last setting counts), no
    ``unexpect`` key matching; a value that is not JSON is skipped (upstream raises)."""
    r = rules if isinstance(rules, Mapping) else {}
    expect: Mapping[str, Any] = r.get("expect", {})
    unexpect: Mapping[str, Any] = r.get("unexpect", {})
    if not result:
        return 0.0
    try:
        text = Path(result).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return 0.0
    met = {key: False for key in expect}
    clean = True
    for line in text.split("\n"):  # a newline ends a line, as in upstream's file iteration
        match = _PREF.match(line.strip())
        if match is None:
            continue
        try:
            value = json.loads(match.group("value"))
        except ValueError:
            continue
        key = match.group("key")
        if key in expect:
            met[key] = _match_pref(value, expect[key])
        elif key in unexpect and _match_pref(value, unexpect[key]):
            clean = False
    return float(all(met.values()) and clean)


_OPERATORS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
              "ge": operator.ge}


def _match_pref(value: Any, rule: Mapping[str, Any]) -> bool:
    """Upstream's value rule for preferences: plain Python comparison (``0 == False`` holds, unlike
    :func:`match_value`'s ``eq``) and ``re.search`` on strings; a comparison upstream raises on is False."""
    method = str(rule.get("method", ""))
    if method in _OPERATORS:
        try:
            return bool(_OPERATORS[method](value, rule.get("ref")))
        except TypeError:
            return False
    if method.startswith("re") and not isinstance(value, str):
        return False
    return match_value(value, rule)


def _unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\\\", "\\")


def thunderbird_filters(text: str) -> list[dict[str, Any]]:
    """The filters of a ``msgFilterRules.dat``: a filter starts at ``name=`` and is complete at ``condition=``."""
    filters: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in text.splitlines():
        match = _FILTER_LINE.match(line)
        if match is None:
            continue
        key, value = match["key"], _unescape(match["value"])
        if key == "name":
            current = {"name": value}
        elif key == "condition":
            current["condition"] = _CLAUSE.findall(value)
            filters.append(current)
        else:
            current[key] = value
    return filters


def check_thunderbird_filter(result: str | None, rules: Any = None, **_: Any) -> float:
    """See the module docstring."""
    rules = _rules(rules, "check_thunderbird_filter", "expect")
    if not result or not Path(result).is_file():
        return 0.0
    filters = thunderbird_filters(Path(result).read_text(encoding="utf-8", errors="replace"))

    def matches(record: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
        return all(key in flt and flt[key] == value for key, value in record.items())

    expected = all(any(matches(record, flt) for flt in filters) for record in rules.get("expect", []))
    unexpected = any(matches(record, flt) for flt in filters for record in rules.get("unexpect", []))
    return float(expected and not unexpected)


_FOLDER_SEPARATOR = "FROM - "


def _thunderbird_folder_reading(path: str, remove_duplicate: bool) -> str:
    """What upstream's ``read_thunderbird_folder_file`` makes of a folder file: its text (stripped) split at
    ``FROM - ``; upstream's loop skips every piece that is not blank (``if mail.strip(): continue``, meant as
    ``if not``), so the reading is one ``FROM - `` per blank piece (a set of them with ``remove_duplicate``).
    A blank piece holds no ``X-Mozilla-Status``/``X-Mozilla-Keys`` line, so the other options change nothing."""
    text = Path(path).read_bytes().decode("utf-8", "surrogateescape").strip()  # str.strip, as upstream's
    blanks = sum(1 for piece in text.split(_FOLDER_SEPARATOR) if not piece.strip())
    return "\n".join([_FOLDER_SEPARATOR] * (min(blanks, 1) if remove_duplicate else blanks))


def check_thunderbird_folder(result: str | list[str | None] | None, expected: str | list[str | None] | None = None, *,
                             ignore_status: bool = False, ignore_keys: bool = False, remove_deleted: bool = True,
                             remove_duplicate: bool = True, **_: Any) -> float:
    """Upstream's score for Thunderbird folder files (``result``/``expected``: a path each, or lists of paths
    paired in order, a longer list's extra files unread as with ``zip``).

    Upstream means to compare the folders' messages (pieces starting ``FROM - ``; ``X-Mozilla-Status`` lines
    dropped with ``ignore_status``, ``X-Mozilla-Keys`` with ``ignore_keys``, deleted ones -- status 0008/0009 --
    dropped with ``remove_deleted``, duplicates with ``remove_duplicate``), but its loop keeps only the *blank*
    pieces (``if mail.strip(): continue``). So a file reads as the number of blank pieces of its stripped text
    split at ``FROM - `` (at most one with ``remove_duplicate``, the default): the whole of an empty or blank
    file, the nothing before a leading ``FROM - ``, the blanks between two ``FROM - ``; a Thunderbird mbox
    (messages start ``From - ``) and any other text have none. A pair scores when both files read the same: with
    the defaults, when both or neither have a blank piece, whatever their messages. ``ignore_status``, ``ignore_keys`` and ``remove_deleted`` change no score (accepted as upstream's).

    Where upstream raises, this scores 0: a missing result or gold file, lists against a single path. A file that
    is not UTF-8 (upstream's ``open`` raises in a UTF-8 locale) reads with its other bytes as they are."""
    del ignore_status, ignore_keys, remove_deleted  # see above: no blank piece holds what they remove
    if not isinstance(expected, list):
        if isinstance(result, list):
            return 0.0  # upstream opens the list as a path: TypeError
        result, expected = [result], [expected]
    elif not isinstance(result, list):
        return 0.0  # upstream pairs the characters of the one path with the gold files
    for mine, gold in zip(result, expected):
        if mine is None or gold is None:
            return 0.0
        try:
            if _thunderbird_folder_reading(mine, remove_duplicate) != _thunderbird_folder_reading(
                    gold, remove_duplicate):
                return 0.0
        except OSError:  # upstream raises: a missing file, a folder
            return 0.0
    return 1.0
