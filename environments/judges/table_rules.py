"""``compare_table``'s rules over cell contents and sheet settings, each ``rule(spec, result, expected) -> bool``
with OSWorld's semantics (``desktop_env/evaluators/metrics/table.py``). A rule naming a sheet the result lacks
fails; one naming a sheet the expected file lacks fails too (upstream raises there)."""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping
from typing import Any

import structlog

from environments.judges.rules import match_value
from environments.judges.table_book import Book, SheetRef, resolve
from environments.judges.table_cells import cell_style

log = structlog.get_logger(__name__)

Rule = Mapping[str, Any]

#: sheet_fuzzy comparisons: value1 from sheet_idx0, value2 from sheet_idx1
_FUZZY = {
    "exact_match": lambda one, two, rule: one == two,
    "includes": lambda one, two, rule: two in one,
    "included_by": lambda one, two, rule: one in two,
    "fuzzy_match": lambda one, two, rule: _ratio(one, two) >= rule.get("threshold", 85.0),
}


def sheets_equal(a: Any, b: Any, *, precision: int = 4) -> bool:
    """Two sheets as pandas reads them (header row, per-column types) hold the same data: numbers rounded to
    ``precision`` decimals, column types equal (text ``"3"`` is not the number 3), text compared exactly."""
    return bool(a.round(precision).equals(b.round(precision)))


def sheet_data(rule: Rule, result: Book, expected: Book | None) -> bool:
    one, two = (resolve(rule[k], result, expected) for k in ("sheet_idx0", "sheet_idx1"))
    first, second = one.book.frame(one.name), two.book.frame(two.name)
    if first is None or second is None:
        return False
    return sheets_equal(first, second, precision=rule.get("precision", 4))  # ignore_case: unused, as upstream


def sheet_print(rule: Rule, result: Book, expected: Book | None) -> bool:
    """The sheets as printed to CSV beside each file (``<file stem>-<sheet name>.csv``, which the task's
    post-config exports): lines equal after trimming each line and dropping trailing blank lines."""
    one, two = (resolve(rule[k], result, expected) for k in ("sheet_idx0", "sheet_idx1"))
    first, second = _printed(one), _printed(two)
    if first is None or second is None:
        return False
    if rule.get("ignore_case", False):
        first, second = [line.lower() for line in first], [line.lower() for line in second]
    return first == second


def _printed(sheet: SheetRef) -> list[str] | None:
    path = f"{os.path.splitext(sheet.book.path)[0]}-{sheet.name}.csv"
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # upstream's next encodings never get a turn: latin-1 decodes anything
    lines = [line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def sheet_fuzzy(rule: Rule, result: Book, expected: Book | None) -> bool:
    """Per cell of each sub-rule's ``range`` list: the two cached values as text (``"None"`` when empty), after
    ``normalization`` (replacements), ``trim_leadings``/``trim_trailings`` (characters stripped), ``ignore_chars``
    and ``ignore_case``, compared by ``type``: exact_match, includes, included_by or fuzzy_match (``threshold``)."""
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.cell_range import MultiCellRange

    one, two = (resolve(rule[k], result, expected) for k in ("sheet_idx0", "sheet_idx1"))
    passed = True
    for part in rule["rules"]:
        if part["type"] not in _FUZZY:
            raise ValueError(f"compare_table: sheet_fuzzy type {part['type']!r} is unknown; use one of "
                             f"{', '.join(_FUZZY)}")
        for cell_range in MultiCellRange(part["range"]):
            for row, column in cell_range.cells:
                coordinate = f"{get_column_letter(column)}{row}"
                first = _fuzzy_text(str(one.book.cells.value(one.name, coordinate)), part)
                second = _fuzzy_text(str(two.book.cells.value(two.name, coordinate)), part)
                if not _FUZZY[part["type"]](first, second, part):
                    log.info("sheet_fuzzy mismatch", coordinate=coordinate, result=first, expected=second)
                    passed = False
    return passed


def _fuzzy_text(text: str, part: Rule) -> str:
    for old, new in part.get("normalization", []):
        text = text.replace(old, new)
    if "trim_leadings" in part:
        text = text.lstrip(part["trim_leadings"])
    if "trim_trailings" in part:
        text = text.rstrip(part["trim_trailings"])
    if "ignore_chars" in part:
        text = "".join(ch for ch in text if ch not in set(part["ignore_chars"]))
    return text.lower() if part.get("ignore_case", False) else text


def _ratio(one: str, two: str) -> float:
    from rapidfuzz import fuzz

    return fuzz.ratio(one, two)


def check_cell(rule: Rule, result: Book, expected: Book | None) -> bool:
    """``props`` of the cell at ``coordinate``: ``value`` (its cached value) or a style property, each matched
    against a value rule ``{"method", "ref"}``."""
    sheet = resolve(rule["sheet_idx"], result, expected)
    worksheet = sheet.book.worksheet(sheet.name)
    if worksheet is None:
        return False
    cell = worksheet[rule["coordinate"]]  # created if absent, as upstream creates it
    for prop, value_rule in rule["props"].items():
        if prop == "value":
            actual = sheet.book.cells.value(sheet.name, rule["coordinate"])
        else:
            actual = cell_style(prop, cell)
        if not match_rule(actual, value_rule):
            log.info("check_cell mismatch", coordinate=rule["coordinate"], prop=prop, actual=actual, rule=value_rule)
            return False
    return True


def freeze(rule: Rule, result: Book, expected: Book | None) -> bool:
    one, two = (resolve(rule[k], result, expected) for k in ("sheet_idx0", "sheet_idx1"))
    first, second = one.book.worksheet(one.name), two.book.worksheet(two.name)
    return first is not None and second is not None and first.freeze_panes == second.freeze_panes


def zoom(rule: Rule, result: Book, expected: Book | None) -> bool:
    """The sheet's zoom (100 when unset) matches the rule's own ``method`` and ``ref``."""
    sheet = resolve(rule["sheet_idx"], result, expected)
    worksheet = sheet.book.worksheet(sheet.name)
    return worksheet is not None and match_rule(worksheet.sheet_view.zoomScale or 100.0, rule)


def data_validation(rule: Rule, result: Book, expected: Book | None) -> bool:
    """Every validation on the sheet matches one of ``dv_props`` (each ``{attribute: value rule}``, attributes as
    openpyxl names them: ranges, type, formula1, operator, allowBlank, ...), and there are at least as many
    validations as patterns."""
    sheet = resolve(rule["sheet_idx"], result, expected)
    worksheet = sheet.book.worksheet(sheet.name)
    if worksheet is None:
        return False
    validations = worksheet.data_validations.dataValidation
    if len(validations) < len(rule["dv_props"]):
        return False
    return all(any(all(match_rule(_attribute(v, name), value_rule) for name, value_rule in pattern.items())
                   for pattern in rule["dv_props"]) for v in validations)


def _attribute(validation: Any, name: str) -> Any:
    try:
        return getattr(validation, name)
    except AttributeError:
        raise ValueError(f"compare_table: data validations have no attribute {name!r} (use ranges, type, formula1, "
                         "formula2, operator, allowBlank, showDropDown, error, prompt, ...)") from None


def match_rule(value: Any, rule: Rule) -> bool:
    """OSWorld's value rule as upstream's spreadsheet rules apply it: ``eq``/``ne`` as Python's ``==``/``!=``,
    regular expressions and ``str_*_eq`` only on text, and ``spreadsheet_range``: ``ref`` is ``[within, around]``,
    two range lists the value's ranges must contain and lie inside."""
    method = str(rule.get("method", ""))
    if method in ("eq", "ne"):
        return bool(getattr(operator, method)(value, rule["ref"]))
    if method == "spreadsheet_range":
        from openpyxl.worksheet.cell_range import MultiCellRange

        within, around = (MultiCellRange(r) for r in rule["ref"])
        return value is not None and all(r in value for r in within) and all(r in around for r in value)
    if method.startswith(("re", "str_")) and not isinstance(value, str):
        return False  # upstream raises on anything but text, which fails the rule
    return match_value(value, rule)
