"""A spreadsheet opened for ``compare_table``, and OSWorld's names for its sheets (``RI0``, ``ENSales``, ...).

OSWorld opens each file three ways and so does :class:`Book`: an openpyxl workbook with formulas kept (styles,
charts, pivots, validations, panes), a pandas ``ExcelFile`` (``sheet_data``, sheet names) and the file's own XML
(cached cell values: :mod:`environments.judges.table_cells`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environments.judges.table_cells import CellReader

#: what openpyxl opens; anything else does not load (so a result in another format scores 0, as upstream's)
SUFFIXES = (".xlsx", ".xlsm", ".xltx", ".xltm")


@dataclass
class Book:
    """One spreadsheet file; ``names`` are its worksheet titles in order (chartsheets excluded, as pandas lists)."""

    path: str
    workbook: Any = field(repr=False)  # openpyxl.Workbook, loaded without data_only: formulas are the values
    excel: Any = field(repr=False)  # pandas.ExcelFile
    names: list[str] = field(default_factory=list)

    @functools.cached_property
    def cells(self) -> CellReader:
        return CellReader(self.path)

    def frame(self, name: str) -> Any:
        """The sheet as pandas reads it (first row as header), or None when it has no such sheet."""
        import pandas as pd

        try:
            return pd.read_excel(self.excel, name)
        except Exception:  # noqa: BLE001 - upstream treats any failure to read the sheet as a missing sheet
            return None

    def worksheet(self, name: str) -> Any:
        """The openpyxl sheet called ``name``, or None."""
        try:
            return self.workbook[name]
        except KeyError:
            return None

    def close(self) -> None:
        self.excel.close()


def load_book(path: str | Path) -> Book:
    """Open an ``.xlsx``-family file; raises ValueError for other formats and openpyxl's or pandas' error for a
    file that is not a spreadsheet."""
    import openpyxl
    import pandas as pd

    path = str(path)
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ValueError(f"compare_table: cannot read {path!r}; supported formats are {', '.join(SUFFIXES)}")
    workbook = openpyxl.load_workbook(path)
    excel = pd.ExcelFile(path, engine="openpyxl")
    return Book(path, workbook, excel, list(excel.sheet_names))


@dataclass(frozen=True)
class SheetRef:
    """A sheet named by a rule: ``name`` is ``""`` when an index is out of range (the sheet then reads as absent)."""

    book: Book
    name: str


def resolve(spec: Any, result: Book, expected: Book | None) -> SheetRef:
    """OSWorld's sheet index: an int (a result sheet by position), ``RI<n>``/``EI<n>`` (result/expected by
    position) or ``RN<name>``/``EN<name>`` (by name)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return SheetRef(result, _by_position(result, spec))
    text = str(spec)
    if text[:2] not in ("RI", "RN", "EI", "EN"):
        raise ValueError(f"compare_table: sheet index {spec!r} must look like RI0, RNSheet1, EI0 or ENSheet1 "
                         "(or be a result sheet's position, e.g. 0)")
    book = result if text[0] == "R" else expected
    if book is None:
        raise ValueError(f"compare_table: rule refers to expected sheet {spec!r} but no expected file was given")
    if text[1] == "N":
        return SheetRef(book, text[2:])
    try:
        position = int(text[2:])
    except ValueError:
        return SheetRef(book, "")
    return SheetRef(book, _by_position(book, position))


def _by_position(book: Book, position: int) -> str:
    try:
        return book.names[position]  # a negative position counts from the end, as in upstream's list lookup
    except IndexError:
        return ""
