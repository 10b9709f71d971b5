"""Spreadsheet metric ``compare_table``: OSWorld's rule list over ``.xlsx`` files, scored as OSWorld scores it.

``compare_table(result, expected=None, rules=[...])`` applies each rule in order and scores 1 only if all pass;
a result that is missing or does not open as a workbook scores 0. Sheets are named as OSWorld names them: an int
(a result sheet's position), ``"RI0"``/``"RNSales"`` (result, by position or name), ``"EI0"``/``"ENSales"``
(expected). Rule types, with their options:

* ``sheet_name`` — both files have the same sheet names in the same order.
* ``sheet_data`` — ``sheet_idx0``, ``sheet_idx1``: the sheets as pandas reads them (first row as header) are
  equal after rounding numbers to ``precision`` (default 4) decimals; column types must agree (pandas turns a
  column of digit text into numbers, but in a text column ``"3"`` differs from the number 3), and text compares
  exactly, blanks and case included (``ignore_case`` is accepted and ignored, as upstream ignores it).
* ``sheet_print`` — the CSV exports beside each file (``<stem>-<sheet>.csv``) have the same lines, each trimmed,
  trailing blank lines dropped; ``ignore_case``.
* ``sheet_fuzzy`` — ``rules``: per cell range, cached values compared as text by ``exact_match``, ``includes``,
  ``included_by`` or ``fuzzy_match`` (``threshold``), after ``normalization``, ``trim_leadings``,
  ``trim_trailings``, ``ignore_chars``, ``ignore_case``.
* ``check_cell`` — ``sheet_idx``, ``coordinate``, ``props``: ``value`` or a style property
  (:data:`~environments.judges.table_cells.STYLE_PROPS`: ``font_bold``, ``font_color`` as 8-digit ARGB,
  ``bgcolor``, ``merge``, ``number_format``, ...; and ours, :data:`~environments.judges.table_cells.EXTRA_PROPS`:
  ``bold``, ``formula``, ...) matched against a value rule ``{"method", "ref"}``.
* ``style`` — ``props`` (style property names) equal on every cell of both sheets' used ranges, conditional
  formats applied (:mod:`environments.judges.table_styles`).
* ``chart`` (``chart_props``), ``pivot_table`` (``pivot_props``), ``filter``, ``row_props``/``col_props``
  (``props``), ``sparkline`` — the sheets' charts, pivot tables, autofilter, row or column dimensions and
  sparklines summarise alike (:mod:`environments.judges.table_objects`).
* ``freeze`` — the frozen panes are equal; ``zoom`` — ``sheet_idx``, ``method``, ``ref`` on the zoom percentage;
  ``data_validation`` — ``sheet_idx``, ``dv_props`` (:func:`environments.judges.table_rules.data_validation`).

Values are what the file caches (what LibreOffice computed for a formula), read as upstream reads them. Where
upstream raises on input no OSWorld task gives (a sheet missing from the expected file, a font without a colour
in a ``style`` rule, a chart without bars asked for its direction, a conditional format naming one absolute cell,
an empty shared string) this scores 0 or reads None instead, and where a task names something unknown (a rule
type, a property, a chart property, a fuzzy type, a malformed sheet index, an expected sheet or ``sheet_name``
without an expected file) it raises ValueError naming the choices. Otherwise the differences from upstream are how
conditional formats are evaluated (:mod:`environments.judges.table_styles`) and a few corners of reading files
LibreOffice does not write (:mod:`environments.judges.table_cells`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from environments.judges import table_objects, table_rules, table_styles
from environments.judges.table_book import Book, load_book, resolve
from environments.judges.table_rules import sheets_equal

__all__ = ["Book", "compare_table", "load_book", "sheets_equal"]

log = structlog.get_logger(__name__)

RuleCheck = Callable[[Mapping[str, Any], Book, "Book | None"], bool]


def _sheet_name(rule: Mapping[str, Any], result: Book, expected: Book | None) -> bool:
    if expected is None:
        raise ValueError("compare_table: the sheet_name rule needs an expected file")
    return result.names == expected.names


def _paired(summarise: Callable[[Book, str, Mapping[str, Any]], Any]) -> RuleCheck:
    """A rule that holds when both sheets (``sheet_idx0``, ``sheet_idx1``) summarise alike."""

    def check(rule: Mapping[str, Any], result: Book, expected: Book | None) -> bool:
        one, two = (resolve(rule[k], result, expected) for k in ("sheet_idx0", "sheet_idx1"))
        first, second = summarise(one.book, one.name, rule), summarise(two.book, two.name, rule)
        if first != second:
            log.info("compare_table summaries differ", rule=rule["type"], result=repr(first), expected=repr(second))
        return first == second

    return check


RULES: dict[str, RuleCheck] = {
    "sheet_name": _sheet_name,
    "sheet_data": table_rules.sheet_data,
    "sheet_print": table_rules.sheet_print,
    "sheet_fuzzy": table_rules.sheet_fuzzy,
    "check_cell": table_rules.check_cell,
    "freeze": table_rules.freeze,
    "zoom": table_rules.zoom,
    "data_validation": table_rules.data_validation,
    "style": _paired(lambda b, s, r: table_styles.styles(b, s, r.get("props", []))),
    "chart": _paired(lambda b, s, r: table_objects.charts(b.worksheet(s), r.get("chart_props", []))),
    "pivot_table": _paired(lambda b, s, r: table_objects.pivot_tables(b.worksheet(s), r.get("pivot_props", []))),
    "row_props": _paired(lambda b, s, r: table_objects.dimensions(b.worksheet(s), "row", r.get("props", []))),
    "col_props": _paired(lambda b, s, r: table_objects.dimensions(b.worksheet(s), "column", r.get("props", []))),
    "filter": _paired(lambda b, s, r: table_objects.autofilter(b.worksheet(s))),
    "sparkline": _paired(lambda b, s, r: b.cells.sparklines(s)),
}


def unknown_parts(options: Mapping[str, Any]) -> list[str]:
    """What ``compare_table`` options ask that this module cannot evaluate: rule types and cell properties
    (``environments.suite_coverage`` counts a task covered only when this is empty)."""
    from environments.judges.table_cells import EXTRA_PROPS, STYLE_PROPS

    known_props = {"value", *STYLE_PROPS, *EXTRA_PROPS}
    unknown = []
    for rule in options.get("rules") or []:
        kind = rule.get("type")
        if kind not in RULES:
            unknown.append(f"rule {kind}")
        props = rule.get("props", {}) if kind in ("check_cell", "style") else {}
        unknown += [f"{kind} property {p}" for p in props if p not in known_props]
    return unknown


def compare_table(result: str | None, expected: str | None = None, *, rules: Sequence[Mapping[str, Any]] | None = None,
                  **_: Any) -> float:
    """1 when every rule holds (default: the first sheets hold the same data), else 0."""
    if result is None or not os.path.exists(result):
        return 0.0
    try:
        result_book = load_book(result)
    except Exception as exc:  # noqa: BLE001 - openpyxl and pandas raise assorted errors for non-spreadsheets
        log.info("result spreadsheet does not load", path=result, error=repr(exc))
        return 0.0
    books = [result_book]
    try:
        expected_book = load_book(expected) if expected is not None else None
        if expected_book is not None:
            books.append(expected_book)
        for rule in rules if rules is not None else [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]:
            kind = rule.get("type")
            if kind not in RULES:
                raise ValueError(f"compare_table: unknown rule type {kind!r}; supported: {', '.join(RULES)}")
            if not RULES[kind](rule, result_book, expected_book):
                log.info("compare_table rule failed", rule=dict(rule))
                return 0.0
        return 1.0
    finally:
        for book in books:
            book.close()
