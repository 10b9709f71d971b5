"""Spreadsheet metrics: ``compare_table`` with OSWorld's rule list, over xlsx, ods and csv.

``compare_table(result, expected=None, rules=[...])`` applies each rule in
order and scores 1 only if all pass. Sheets are named as OSWorld does:
``"RI0"`` (result, index 0), ``"RNSales"`` (result, by name), ``"EI0"`` /
``"ENSales"`` (expected). Supported rule types:

* ``sheet_name`` — the sheet names are equal.
* ``sheet_data`` — ``sheet_idx0`` and ``sheet_idx1`` hold the same values
  (numbers compare by value; ``precision`` rounds them; trailing empty
  rows/columns are ignored; ``ignore_case`` for strings).
* ``check_cell`` — ``sheet_idx``, ``coordinate``, ``props`` mapping
  ``value`` / ``formula`` / ``bold`` / ``italic`` / ``number_format`` to a
  value rule ``{"method", "ref"}``.
* ``style`` — ``props`` (``bold``, ``italic``, ``font_name``, ``font_size``,
  ``font_color``, ``fill_color``, ``number_format``) equal on every non-empty cell.
* ``freeze`` — the frozen panes are equal.

Values come from the cached results LibreOffice/Excel store with formulas, so a
formula typed in the GUI scores by what it computed.
"""

from __future__ import annotations

import csv
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence
from xml.etree import ElementTree

import structlog

from environments.judges.rules import match_value

log = structlog.get_logger(__name__)

_ODF = {
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
}
#: an ods "repeated" run longer than this is trailing filler, not data
_MAX_REPEAT = 1024


@dataclass
class Book:
    """A loaded spreadsheet: values per sheet, plus the openpyxl workbooks for xlsx."""

    path: str
    sheets: dict[str, list[list[Any]]]
    values_wb: Any = None  # openpyxl, data_only=True
    formulas_wb: Any = field(default=None, repr=False)  # openpyxl, formulas kept

    @property
    def names(self) -> list[str]:
        return list(self.sheets)


def load_book(path: str | Path) -> Book:
    """Load ``.xlsx``/``.xlsm``, ``.ods`` or ``.csv``; raises ValueError for other formats."""
    path = str(path)
    suffix = Path(path).suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        import openpyxl

        values_wb = openpyxl.load_workbook(path, data_only=True)
        formulas_wb = openpyxl.load_workbook(path, data_only=False)
        sheets = {ws.title: [list(row) for row in ws.iter_rows(values_only=True)] for ws in values_wb.worksheets}
        return Book(path, sheets, values_wb, formulas_wb)
    if suffix == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = [[_parse_csv_value(v) for v in row] for row in csv.reader(handle)]
        return Book(path, {Path(path).stem: rows})
    if suffix == ".ods":
        return Book(path, _load_ods(path))
    raise ValueError(f"compare_table: cannot read {path!r}; supported formats are .xlsx, .xlsm, .ods and .csv")


def _parse_csv_value(text: str) -> Any:
    try:
        number = float(text)
    except ValueError:
        return text if text != "" else None
    return number if math.isfinite(number) else text


def _load_ods(path: str) -> dict[str, list[list[Any]]]:
    t = _ODF["table"]
    with zipfile.ZipFile(path) as archive:
        root = ElementTree.fromstring(archive.read("content.xml"))
    sheets: dict[str, list[list[Any]]] = {}
    for table in root.iter(f"{{{t}}}table"):
        rows: list[list[Any]] = []
        for row in table.iter(f"{{{t}}}table-row"):
            cells: list[Any] = []
            for cell in row:
                if cell.tag not in (f"{{{t}}}table-cell", f"{{{t}}}covered-table-cell"):
                    continue
                repeat = int(cell.get(f"{{{t}}}number-columns-repeated", "1"))
                value = _ods_value(cell)
                cells.extend([value] * min(repeat, _MAX_REPEAT))
            row_repeat = int(row.get(f"{{{t}}}number-rows-repeated", "1"))
            rows.extend([list(cells) for _ in range(min(row_repeat, _MAX_REPEAT))])
        sheets[table.get(f"{{{t}}}name", f"Sheet{len(sheets) + 1}")] = rows
    return sheets


def _ods_value(cell: ElementTree.Element) -> Any:
    o, x = _ODF["office"], _ODF["text"]
    kind = cell.get(f"{{{o}}}value-type")
    if kind in ("float", "percentage", "currency"):
        return float(cell.get(f"{{{o}}}value", "nan"))
    if kind == "boolean":
        return cell.get(f"{{{o}}}boolean-value") == "true"
    if kind in ("date", "time"):
        return cell.get(f"{{{o}}}date-value") or cell.get(f"{{{o}}}time-value")
    paragraphs = ["".join(p.itertext()) for p in cell.iter(f"{{{x}}}p")]
    return "\n".join(paragraphs) if paragraphs else None


# ---------------------------------------------------------------------------
# Sheet selection and value comparison
# ---------------------------------------------------------------------------


def _sheet_name(spec: Any, result: Book, expected: Book | None) -> tuple[Book, str]:
    """Resolve OSWorld's ``RI0``/``RNname``/``EI0``/``ENname`` (or an int: result index)."""
    if isinstance(spec, int):
        spec = f"RI{spec}"
    spec = str(spec)
    if len(spec) < 3 or spec[0] not in "RE" or spec[1] not in "IN":
        raise ValueError(f"compare_table: sheet index {spec!r} must look like RI0, RNSheet1, EI0 or ENSheet1")
    book = result if spec[0] == "R" else expected
    if book is None:
        raise ValueError(f"compare_table: rule refers to expected sheet {spec!r} but no expected file was given")
    names = book.names
    if spec[1] == "I":
        index = int(spec[2:])
        if not 0 <= index < len(names):
            raise LookupError(f"{spec}: {book.path} has {len(names)} sheet(s)")
        return book, names[index]
    name = spec[2:]
    if name not in names:
        raise LookupError(f"{spec}: {book.path} has no sheet {name!r} (sheets: {names})")
    return book, name


def _trim(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Drop trailing empty cells in each row and trailing empty rows."""
    trimmed = []
    for row in rows:
        cells = [None if (v == "" or v is None) else v for v in row]
        while cells and cells[-1] is None:
            cells.pop()
        trimmed.append(cells)
    while trimmed and not trimmed[-1]:
        trimmed.pop()
    return trimmed


def _same_value(a: Any, b: Any, precision: int | None, ignore_case: bool) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if precision is not None:
            return round(float(a), precision) == round(float(b), precision)
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.strip(), b.strip()
        return a.lower() == b.lower() if ignore_case else a == b
    if a is None or b is None:
        return a is None and b is None
    return str(a) == str(b)  # dates and times compare by their text


def sheets_equal(a: Sequence[Sequence[Any]], b: Sequence[Sequence[Any]], *, precision: int | None = None,
                 ignore_case: bool = False) -> bool:
    rows_a, rows_b = _trim(a), _trim(b)
    if len(rows_a) != len(rows_b):
        return False
    for row_a, row_b in zip(rows_a, rows_b):
        if len(row_a) != len(row_b):
            return False
        if not all(_same_value(x, y, precision, ignore_case) for x, y in zip(row_a, row_b)):
            return False
    return True


# ---------------------------------------------------------------------------
# Cell properties (xlsx only)
# ---------------------------------------------------------------------------


def _color(color: Any) -> str | None:
    if color is None or getattr(color, "rgb", None) is None or not isinstance(color.rgb, str):
        return None
    return color.rgb[-6:].upper()


def _cell_prop(book: Book, sheet: str, coordinate: str, prop: str) -> Any:
    if book.values_wb is None:
        raise ValueError(f"compare_table: cell property {prop!r} needs an .xlsx file, got {book.path}")
    if prop == "value":
        return book.values_wb[sheet][coordinate].value
    if prop == "formula":
        value = book.formulas_wb[sheet][coordinate].value
        return value if isinstance(value, str) and value.startswith("=") else None
    cell = book.formulas_wb[sheet][coordinate]
    getters = {
        "bold": lambda: bool(cell.font.b),
        "italic": lambda: bool(cell.font.i),
        "underline": lambda: cell.font.u is not None,
        "font_name": lambda: cell.font.name,
        "font_size": lambda: float(cell.font.sz) if cell.font.sz is not None else None,
        "font_color": lambda: _color(cell.font.color),
        "fill_color": lambda: _color(cell.fill.fgColor) if cell.fill.fill_type == "solid" else None,
        "number_format": lambda: cell.number_format,
        "horizontal_alignment": lambda: cell.alignment.horizontal,
    }
    if prop not in getters:
        raise ValueError(f"compare_table: unknown cell property {prop!r}; known: value, formula, {', '.join(getters)}")
    return getters[prop]()


def _rule_check_cell(rule: Mapping[str, Any], result: Book, expected: Book | None) -> bool:
    book, sheet = _sheet_name(rule.get("sheet_idx", 0), result, expected)
    coordinate = rule["coordinate"]
    for prop, value_rule in rule.get("props", {}).items():
        if book.values_wb is None and prop == "value":
            row, col = _coordinate_index(coordinate)
            rows = book.sheets[sheet]
            actual = rows[row][col] if row < len(rows) and col < len(rows[row]) else None
        else:
            actual = _cell_prop(book, sheet, coordinate, prop)
        if not match_value(actual, value_rule):
            log.info("check_cell mismatch", coordinate=coordinate, prop=prop, actual=actual, rule=value_rule)
            return False
    return True


def _coordinate_index(coordinate: str) -> tuple[int, int]:
    from openpyxl.utils.cell import coordinate_from_string, column_index_from_string

    letters, row = coordinate_from_string(coordinate)
    return row - 1, column_index_from_string(letters) - 1


def _rule_style(rule: Mapping[str, Any], result: Book, expected: Book | None) -> bool:
    book0, sheet0 = _sheet_name(rule["sheet_idx0"], result, expected)
    book1, sheet1 = _sheet_name(rule["sheet_idx1"], result, expected)
    props: Sequence[str] = rule.get("props", ["bold"])
    rows = _trim(book1.sheets[sheet1])
    from openpyxl.utils import get_column_letter

    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            if value is None:
                continue
            coordinate = f"{get_column_letter(c + 1)}{r + 1}"
            for prop in props:
                if _cell_prop(book0, sheet0, coordinate, prop) != _cell_prop(book1, sheet1, coordinate, prop):
                    log.info("style mismatch", coordinate=coordinate, prop=prop)
                    return False
    return True


def _rule_freeze(rule: Mapping[str, Any], result: Book, expected: Book | None) -> bool:
    book0, sheet0 = _sheet_name(rule["sheet_idx0"], result, expected)
    book1, sheet1 = _sheet_name(rule["sheet_idx1"], result, expected)
    if book0.formulas_wb is None or book1.formulas_wb is None:
        raise ValueError("compare_table: the freeze rule needs .xlsx files")
    return book0.formulas_wb[sheet0].freeze_panes == book1.formulas_wb[sheet1].freeze_panes


def compare_table(result: str | None, expected: str | None = None, *, rules: Sequence[Mapping[str, Any]] | None = None,
                  **_: Any) -> float:
    """1 when every rule holds (default: the first sheets hold the same data)."""
    if result is None or not Path(result).exists():
        return 0.0
    try:
        result_book = load_book(result)
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError) as exc:
        log.info("result spreadsheet does not load", path=result, error=str(exc))
        return 0.0
    except Exception as exc:  # openpyxl raises assorted errors for files that are not spreadsheets
        if isinstance(exc, ValueError) and "supported formats" in str(exc):
            raise
        log.info("result spreadsheet does not load", path=result, error=repr(exc))
        return 0.0
    expected_book = load_book(expected) if expected is not None else None
    if rules is None:
        rules = [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]
    for rule in rules:
        kind = rule.get("type")
        try:
            ok = _apply_rule(kind, rule, result_book, expected_book)
        except LookupError as exc:  # a missing sheet in the result is a wrong answer
            log.info("compare_table rule cannot apply", rule=kind, error=str(exc))
            return 0.0
        if not ok:
            log.info("compare_table rule failed", rule=dict(rule))
            return 0.0
    return 1.0


def _apply_rule(kind: Any, rule: Mapping[str, Any], result: Book, expected: Book | None) -> bool:
    if kind == "sheet_name":
        if expected is None:
            raise ValueError("compare_table: the sheet_name rule needs an expected file")
        return result.names == expected.names
    if kind == "sheet_data":
        book0, sheet0 = _sheet_name(rule.get("sheet_idx0", "RI0"), result, expected)
        book1, sheet1 = _sheet_name(rule.get("sheet_idx1", "EI0"), result, expected)
        return sheets_equal(book0.sheets[sheet0], book1.sheets[sheet1], precision=rule.get("precision"),
                            ignore_case=bool(rule.get("ignore_case", False)))
    if kind == "check_cell":
        return _rule_check_cell(rule, result, expected)
    if kind == "style":
        return _rule_style(rule, result, expected)
    if kind == "freeze":
        return _rule_freeze(rule, result, expected)
    raise ValueError(
        f"compare_table: unknown rule type {kind!r}; supported: sheet_name, sheet_data, check_cell, style, freeze"
    )
