"""Cell facts for ``compare_table``: cached values read from the xlsx XML, and style properties by OSWorld's names.

Values are what the file stores, as OSWorld's ``read_cell_value`` returns them: a number is a float (dates too:
their serial number), a shared, inline or formula string is text (formula and inline text with surrounding blanks
trimmed, as upstream's XML-to-dict step trims them), an error is its code (``#DIV/0!``); booleans, ISO dates, empty
and absent cells are None. Deliberate differences, on files LibreOffice does not write: inline text marked
``xml:space="preserve"`` (openpyxl writes it) is its trimmed text where upstream returns a dict; a cell upstream
cannot parse (an empty ``<v>``, a shared-string index past the table) is None where upstream raises; and sheets
are found through the workbook's relationships, see :meth:`CellReader._sheet_parts`.
"""

from __future__ import annotations

import zipfile
from typing import Any
from xml.etree import ElementTree

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_DOC_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"
_X14 = "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"
_XM = "http://schemas.microsoft.com/office/excel/2006/main"

#: OSWorld's style property names (``_read_cell_style``); ``merge``: the cell is covered by a merge (not its
#: top-left cell)
STYLE_PROPS = ("number_format", "font_name", "font_family", "font_color", "font_bold", "font_italic",
               "font_underline", "font_size", "fill_type", "bgcolor", "fgcolor", "hyperlink", "merge")
#: ours besides: read from the cell itself, whatever its value and any conditional format
EXTRA_PROPS = ("bold", "italic", "underline", "fill_color", "horizontal_alignment", "formula")


class CellReader:
    """Cached cell values of one xlsx file, parsed once per sheet."""

    def __init__(self, path: str):
        self.path = path
        self._parts: dict[str, str] | None = None
        self._shared: list[str] | None = None
        self._sheets: dict[str, dict[str, ElementTree.Element] | None] = {}

    def value(self, sheet: str, coordinate: str) -> Any:
        cells = self._cells(sheet)
        cell = cells.get(coordinate) if cells else None
        return None if cell is None else self._value(cell)

    def sheet_xml(self, sheet: str) -> ElementTree.Element | None:
        """The worksheet part's root element, or None (no such sheet, or not a readable xlsx)."""
        part = self._sheet_parts().get(sheet)
        if part is None:
            return None
        try:
            with zipfile.ZipFile(self.path) as archive:
                return ElementTree.fromstring(archive.read(part))
        except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError):
            return None

    def _cells(self, sheet: str) -> dict[str, ElementTree.Element] | None:
        if sheet not in self._sheets:
            root = self.sheet_xml(sheet)
            cells: dict[str, ElementTree.Element] | None = None
            if root is not None:
                cells = {}
                for cell in root.iterfind(f"{{{MAIN}}}sheetData/{{{MAIN}}}row/{{{MAIN}}}c"):
                    cells.setdefault(cell.get("r", ""), cell)  # the first cell with a coordinate counts
            self._sheets[sheet] = cells
        return self._sheets[sheet]

    def _sheet_parts(self) -> dict[str, str]:
        """Sheet name -> worksheet part, through the workbook's relationships. (Upstream assumes the part is
        ``sheet<sheetId>.xml``: the same for files LibreOffice and openpyxl write, not after Excel reorders.)"""
        if self._parts is None:
            self._parts = {}
            try:
                with zipfile.ZipFile(self.path) as archive:
                    workbook = ElementTree.fromstring(archive.read("xl/workbook.xml"))
                    rels = ElementTree.fromstring(archive.read("xl/_rels/workbook.xml.rels"))
            except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError):
                return self._parts
            targets = {rel.get("Id"): rel.get("Target", "") for rel in rels.iter(f"{{{_PKG_REL}}}Relationship")}
            for sheet in workbook.iter(f"{{{MAIN}}}sheet"):
                target = targets.get(sheet.get(f"{{{_DOC_REL}}}id"))
                if target:
                    self._parts[sheet.get("name", "")] = target.lstrip("/") if target.startswith("/") \
                        else f"xl/{target}"
        return self._parts

    def _shared_strings(self) -> list[str]:
        if self._shared is None:
            try:
                with zipfile.ZipFile(self.path) as archive:
                    root = ElementTree.fromstring(archive.read("xl/sharedStrings.xml"))
                # every <t> below an item counts, phonetic runs included, as upstream's selector finds them; an
                # empty <t> makes upstream drop the whole table
                texts = [[t.text for t in item.iter(f"{{{MAIN}}}t")] for item in root.iter(f"{{{MAIN}}}si")]
                self._shared = [] if any(None in parts for parts in texts) else ["".join(p) for p in texts]
            except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError):
                self._shared = []
        return self._shared

    def _value(self, cell: ElementTree.Element) -> Any:
        kind = cell.get("t", "n")
        stored = cell.find(f"{{{MAIN}}}v")
        if kind == "inlineStr":
            stored = cell.find(f"{{{MAIN}}}is/{{{MAIN}}}t")
        if stored is None:
            return None
        text = (stored.text or "").strip() or None  # upstream's XML-to-dict step trims text, blank is None
        if kind == "n":
            try:
                return float(text) if text is not None else None
            except ValueError:
                return None
        if kind == "s":
            shared = self._shared_strings()
            try:
                return shared[int(stored.text or "")]
            except (ValueError, IndexError):
                return None
        if kind in ("str", "inlineStr", "e"):
            return text
        return None  # booleans ("b") and ISO dates ("d") read as None upstream

    def sparklines(self, sheet: str) -> dict[str, str | None]:
        """``{"F3": "Sheet1!C3:E3"}``: each sparkline's cell and data range."""
        root = self.sheet_xml(sheet)
        if root is None:
            return {}
        found: dict[str, str | None] = {}
        for line in root.iter(f"{{{_X14}}}sparkline"):
            where, source = line.find(f"{{{_XM}}}sqref"), line.find(f"{{{_XM}}}f")
            if where is not None:
                found[(where.text or "").strip()] = (source.text or "").strip() if source is not None else None
        return found


def cell_style(prop: str, cell: Any, diff: Any = None) -> Any:
    """Property ``prop`` of an openpyxl cell, as OSWorld's ``_read_cell_style`` reads it (``diff``: a conditional
    format's style applied to it). Where upstream would raise (a font without colour, a conditional style without
    a font) this returns None. Raises ValueError for a name neither upstream nor :data:`EXTRA_PROPS` knows."""
    has_value = cell.value is not None
    source = cell if diff is None else diff
    try:
        if prop == "number_format":
            if not has_value or cell.data_type != "n":
                return None
            return cell.number_format if diff is None else diff.numFmt.formatCode
        if prop.startswith("font_") and prop in STYLE_PROPS:
            if not has_value:
                return None
            font = source.font
            attribute = {"font_name": "name", "font_family": "family", "font_bold": "bold", "font_italic": "italic",
                         "font_underline": "underline", "font_size": "size"}.get(prop)
            return font.color.rgb if prop == "font_color" else getattr(font, attribute)
        if prop == "fill_type":
            return source.fill.tagname
        if prop in ("bgcolor", "fgcolor"):
            return cell.fill.fgColor.rgb if diff is None else diff.fill.bgColor.rgb
    except AttributeError:
        return None
    if prop == "hyperlink":
        return (cell.hyperlink or "") if has_value else None
    if prop == "merge":
        from openpyxl.cell.cell import MergedCell

        return isinstance(cell, MergedCell)
    if prop in EXTRA_PROPS:
        return _extra_prop(prop, cell)
    raise ValueError(f"compare_table: unknown cell property {prop!r}; known: value, {', '.join(STYLE_PROPS)}, "
                     f"{', '.join(EXTRA_PROPS)}")


def _extra_prop(prop: str, cell: Any) -> Any:
    if prop == "formula":
        value = cell.value
        return value if isinstance(value, str) and value.startswith("=") else None
    if prop == "bold":
        return bool(cell.font.b)
    if prop == "italic":
        return bool(cell.font.i)
    if prop == "underline":
        return cell.font.u is not None
    if prop == "horizontal_alignment":
        return cell.alignment.horizontal
    color = cell.fill.fgColor if cell.fill.fill_type == "solid" else None  # fill_color: six hex digits
    rgb = getattr(color, "rgb", None)
    return rgb[-6:].upper() if isinstance(rgb, str) else None
