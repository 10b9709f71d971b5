"""``compare_table``'s ``style`` rule: the chosen properties of every cell in a sheet's used range, with
conditional formats applied, as OSWorld's ``load_xlsx_styles`` sees them.

A conditional format restyles the cells its rule holds for (later rules over earlier ones). Rule operands are
evaluated as upstream evaluates them: literal operands (numbers, quoted text, TRUE/FALSE) here, any other formula
(``expression`` rules such as ``A2>5``, operands such as ``5+1``) compiled with the ``formulas`` package, as
upstream compiles it, where it is installed (the ``tables`` extra; ``dev`` has it). Without it such a rule is
skipped with a log line and restyles nothing, as upstream skips a formula it cannot compile. Rule types upstream
does not evaluate (``top10``, ``aboveAverage``, ...) restyle nothing here (upstream reuses the previous rule's
condition for them, or none). Where upstream raises (a single absolute cell in an expression, a conditional style
without a font) this does not: the cell counts as one value, the property as None.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from environments.judges.table_book import Book
from environments.judges.table_cells import cell_style

log = structlog.get_logger(__name__)

#: rule types whose first formula is a condition on the cell's value (upstream passes the value, then the values of
#: the formula's absolute references)
_CONDITION_TYPES = {"expression", "containsText", "notContainsText", "endsWith", "beginsWith", "containsErrors",
                    "notContainsErrors"}
_ABSOLUTE = re.compile(r"\$([A-Z]{1,3})\$(\d+)(?::\$([A-Z]{1,3})\$(\d+))?")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
#: a sheet's conditional format stops being read after this many empty cells (upstream's cut-off)
_MAX_EMPTY = 50


def styles(book: Book, sheet: str, props: Sequence[str]) -> dict[str, list[Any]]:
    """``{"A1": [value of each prop], ...}`` over the sheet's used range (from A1); ``{}`` without the sheet."""
    worksheet = book.worksheet(sheet)
    if worksheet is None:
        return {}
    summary = {cell.coordinate: [cell_style(p, cell) for p in props]
               for column in worksheet.iter_cols() for cell in column}
    for formatting in worksheet.conditional_formatting:
        for rule in formatting.rules:
            for cell in _restyled(book, worksheet, sheet, formatting, rule):
                summary[cell.coordinate] = [cell_style(p, cell, rule.dxf) for p in props]
    return summary


def _restyled(book: Book, worksheet: Any, sheet: str, formatting: Any, rule: Any) -> list[Any]:
    condition = _condition(book, sheet, rule)
    if condition is None:
        return []
    from openpyxl.utils import get_column_letter

    active, empty = [], 0
    for cell_range in formatting.cells:
        for row, column in cell_range.cells:
            cell = worksheet.cell(row=row, column=column)  # created if absent, as upstream creates it
            value = book.cells.value(sheet, f"{get_column_letter(column)}{row}")
            if value is None:
                empty += 1  # counted over the whole format and never reset, as upstream counts
                if empty > _MAX_EMPTY:
                    break
                continue
            try:
                holds = bool(condition(value))
            except Exception:  # noqa: BLE001 - a condition that cannot be evaluated on a value does not hold
                holds = False
            if holds:
                active.append(cell)
    return active


def _condition(book: Book, sheet: str, rule: Any) -> Callable[[Any], Any] | None:
    compiled, arguments = [], []
    for formula in rule.formula:
        try:
            compiled.append(_compile(formula))
        except ValueError:
            log.info("conditional format operand not evaluated", formula=formula, rule_type=rule.type)
            return None
        arguments.append([_reference_values(book, sheet, match) for match in _ABSOLUTE.finditer(formula)])
    if rule.type in _CONDITION_TYPES and compiled:
        test, values = compiled[0], arguments[0]
        return lambda value: test(value, *values)
    if rule.type == "cellIs":
        try:
            operands = [operand() for operand in compiled]
        except Exception:  # noqa: BLE001 - an operand that needs inputs (a reference) skips the rule, as upstream
            return None
        return lambda value: _cell_is(rule.operator, value, operands)
    return None


def _compile(formula: str) -> Callable[..., Any]:
    """A literal operand as a function of no inputs, any other formula compiled (:func:`_compiled`)."""
    text = formula.strip()
    if _NUMBER.fullmatch(text):
        number = float(text)
        value: Any = int(number) if number.is_integer() and not any(c in text for c in ".eE") else number
    elif len(text) >= 2 and text[0] == text[-1] == '"' and '"' not in text[1:-1].replace('""', ""):
        value = text[1:-1].replace('""', '"')
    elif text.upper() in ("TRUE", "FALSE"):
        value = text.upper() == "TRUE"
    else:
        return _compiled(formula)
    return lambda: value


def _compiled(formula: str) -> Callable[..., Any]:
    """``formula`` compiled by the ``formulas`` package as upstream compiles it (inputs: the cell's value, then
    the values of its absolute references); ValueError without the package or for a formula it rejects."""
    try:
        import formulas
    except ImportError:
        raise ValueError(f"{formula!r} needs a formula engine: pip install 'scalecua[tables]'") from None
    try:
        return formulas.Parser().ast("=" + formula)[1].compile()
    except Exception as exc:  # noqa: BLE001 - whatever the engine rejects is skipped, as upstream skips it
        raise ValueError(f"{formula!r} does not compile: {exc}") from exc


def _reference_values(book: Book, sheet: str, match: re.Match[str]) -> Any:
    first_column, first_row, last_column, last_row = match.groups()
    if last_column is None:
        return book.cells.value(sheet, f"{first_column}{first_row}")
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.cell_range import CellRange

    area = CellRange(f"{first_column}{first_row}:{last_column}{last_row}")
    return [book.cells.value(sheet, f"{get_column_letter(c)}{r}") for r, c in area.cells]


def _cell_is(operator: str, value: Any, operands: list[Any]) -> Any:
    try:
        if operator in ("between", "notBetween"):
            low, high = min(operands), max(operands)
            return (low <= value <= high) if operator == "between" else (value < low or value > high)
        compare = {"lessThanOrEqual": lambda a, b: a <= b, "lessThan": lambda a, b: a < b,
                   "equal": lambda a, b: a == b, "greaterThanOrEqual": lambda a, b: a >= b,
                   "notEqual": lambda a, b: a != b, "greaterThan": lambda a, b: a > b}
        if operator not in compare:
            return False
        return compare[operator](value, operands[0])
    except (TypeError, IndexError, ValueError):
        return False
