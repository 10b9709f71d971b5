"""Spreadsheet and word-processor metrics on hand-made xlsx, ods, csv, docx and odt files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import docx
import openpyxl
import pytest
from docx.enum.text import WD_ALIGN_PARAGRAPH
from openpyxl.styles import Font

from environments.judges.documents import check_document, compare_docx_files, compare_document_text, load_paragraphs
from environments.judges.tables import compare_table, load_book

ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"'
)


def xlsx(path: Path, rows: list[list], *, title: str = "Sheet1", bold_row: int | None = None,
         freeze: str | None = None) -> str:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = title
    for row in rows:
        ws.append(row)
    if bold_row:
        for cell in ws[bold_row]:
            cell.font = Font(bold=True)
    ws.freeze_panes = freeze
    wb.save(path)
    return str(path)


def ods(path: Path, body: str) -> str:
    content = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ODF_NS}><office:body>'
               f"<office:spreadsheet>{body}</office:spreadsheet></office:body></office:document-content>")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", content)
    return str(path)


def test_sheet_data_compares_values_numbers_by_value(tmp_path: Path) -> None:
    gold = xlsx(tmp_path / "gold.xlsx", [["Item", "Total"], ["Pen", 10.0], ["Ink", 2.5]])
    same = xlsx(tmp_path / "same.xlsx", [["Item", "Total"], ["Pen", 10], ["Ink", 2.50001], [None, None]])
    padded = xlsx(tmp_path / "padded.xlsx", [["Item", "Total"], ["Pen ", 10], ["Ink", 2.5]])
    off = xlsx(tmp_path / "off.xlsx", [["Item", "Total"], ["Pen", 10], ["Ink", 2.51]])
    assert compare_table(same, gold) == 1.0  # a trailing empty row does not matter; numbers round to 4 decimals
    assert compare_table(padded, gold) == 0.0  # as OSWorld's: text compares exactly, trailing space included
    assert compare_table(off, gold) == 0.0
    rules = [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0", "precision": 1}]
    assert compare_table(off, gold, rules=rules) == 1.0
    assert compare_table(str(tmp_path / "missing.xlsx"), gold) == 0.0
    assert compare_table(None, gold) == 0.0


def test_sheet_names_and_sheet_selection_by_name(tmp_path: Path) -> None:
    gold = xlsx(tmp_path / "gold.xlsx", [["a"]], title="Q1 Revenue")
    renamed = xlsx(tmp_path / "renamed.xlsx", [["a"]], title="Q1 Revenue")
    original = xlsx(tmp_path / "original.xlsx", [["a"]], title="Sheet1")
    assert compare_table(renamed, gold, rules=[{"type": "sheet_name"}]) == 1.0
    assert compare_table(original, gold, rules=[{"type": "sheet_name"}]) == 0.0
    by_name = [{"type": "sheet_data", "sheet_idx0": "RNQ1 Revenue", "sheet_idx1": "ENQ1 Revenue"}]
    assert compare_table(renamed, gold, rules=by_name) == 1.0
    assert compare_table(original, gold, rules=by_name) == 0.0  # the result lacks the sheet: a wrong answer
    with pytest.raises(ValueError, match="must look like RI0"):
        compare_table(renamed, gold, rules=[{"type": "sheet_data", "sheet_idx0": "X0", "sheet_idx1": "EI0"}])
    with pytest.raises(ValueError, match="unknown rule type 'glow'"):
        compare_table(renamed, gold, rules=[{"type": "glow"}])


def test_check_cell_style_and_freeze_rules(tmp_path: Path) -> None:
    rows = [["SKU", "Qty"], ["A-1", 3]]
    bold = xlsx(tmp_path / "bold.xlsx", rows, bold_row=1, freeze="A2")
    plain = xlsx(tmp_path / "plain.xlsx", rows)
    header_bold = [{"type": "check_cell", "sheet_idx": "RI0", "coordinate": "A1",
                    "props": {"bold": {"method": "eq", "ref": True}, "value": {"method": "eq", "ref": "SKU"}}}]
    assert compare_table(bold, rules=header_bold) == 1.0
    assert compare_table(plain, rules=header_bold) == 0.0
    style = [{"type": "style", "sheet_idx0": "RI0", "sheet_idx1": "EI0", "props": ["bold"]}]
    assert compare_table(bold, bold, rules=style) == 1.0
    assert compare_table(plain, bold, rules=style) == 0.0
    freeze = [{"type": "freeze", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]
    assert compare_table(bold, bold, rules=freeze) == 1.0
    assert compare_table(plain, bold, rules=freeze) == 0.0
    with pytest.raises(ValueError, match="unknown cell property 'glow'"):
        compare_table(bold, rules=[{"type": "check_cell", "sheet_idx": "RI0", "coordinate": "A1",
                                    "props": {"glow": {"method": "eq", "ref": 1}}}])


def test_formula_property_reads_the_formula_text(tmp_path: Path) -> None:
    path = xlsx(tmp_path / "f.xlsx", [["a", "b", "sum"], [1, 2, "=A2+B2"]])
    rule = [{"type": "check_cell", "sheet_idx": "RI0", "coordinate": "C2",
             "props": {"formula": {"method": "re", "ref": r"^=A2\+B2$"}}}]
    assert compare_table(path, rules=rule) == 1.0
    typed = xlsx(tmp_path / "typed.xlsx", [["a", "b", "sum"], [1, 2, 3]])
    assert compare_table(typed, rules=rule) == 0.0


def test_compare_table_loads_only_xlsx_family_files(tmp_path: Path) -> None:
    """As OSWorld's compare_table (openpyxl): a csv, ods or other result scores 0; load_book names the formats."""
    gold = xlsx(tmp_path / "gold.xlsx", [["City", "Temp"], ["Oslo", -5], ["Lima", 20.5]])
    csv_file = tmp_path / "t.csv"
    csv_file.write_text("City,Temp\nOslo,-5\nLima,20.5\n", encoding="utf-8")
    body = ('<table:table table:name="Temps"><table:table-row><table:table-cell office:value-type="string">'
            "<text:p>City</text:p></table:table-cell></table:table-row></table:table>")
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"not a zip")
    unsupported = tmp_path / "t.numbers"
    unsupported.write_text("x", encoding="utf-8")
    for result in (str(csv_file), ods(tmp_path / "t.ods", body), str(broken), str(unsupported)):
        assert compare_table(result, gold) == 0.0, result
    with pytest.raises(ValueError, match="supported formats are .xlsx"):
        load_book(csv_file)
    assert load_book(gold).names == ["Sheet1"]


def make_docx(path: Path, paragraphs: list[tuple[str, dict]]) -> str:
    document = docx.Document()
    for text, fmt in paragraphs:
        p = document.add_paragraph(style=fmt.get("style"))
        run = p.add_run(text)
        run.bold = fmt.get("bold")
        run.italic = fmt.get("italic")
        if fmt.get("center"):
            p.alignment = WD_ALIGN_PARAGRAPH.CENTER
    document.save(path)
    return str(path)


def test_docx_text_and_formatting_rules(tmp_path: Path) -> None:
    result = make_docx(tmp_path / "r.docx", [("Report", {"bold": True, "center": True}),
                                              ("Overview", {"style": "Heading 1"}),
                                              ("A quote.", {"italic": True}), ("", {})])
    gold = make_docx(tmp_path / "g.docx", [("Report", {}), ("Overview", {}), ("A quote.", {})])
    assert compare_docx_files(result, gold) == 1.0  # text only; empty paragraphs ignored
    other = make_docx(tmp_path / "o.docx", [("Report", {}), ("A quote.", {}), ("Overview", {})])
    assert compare_docx_files(other, gold) == 0.0
    assert compare_docx_files(other, gold, ignore_order=True) == 1.0
    rules = {"contains": ["quote"], "excludes": ["DRAFT"],
             "paragraphs": [{"text": "Report", "bold": True, "alignment": "center"},
                            {"text": "Overview", "style": "Heading 1"},
                            {"match": "^A quote", "italic": True, "bold": False}]}
    assert check_document(result, rules) == 1.0
    assert check_document(gold, rules) == 0.0
    assert check_document(result, {"paragraph_count": 3}) == 1.0
    assert check_document(str(tmp_path / "missing.docx"), rules) == 0.0


def test_odt_paragraphs_styles_and_text(tmp_path: Path) -> None:
    styles = (f'<office:document-styles {ODF_NS}><office:styles>'
              '<style:style style:name="Heading_20_1" style:display-name="Heading 1" style:family="paragraph">'
              '<style:text-properties fo:font-weight="bold"/></style:style></office:styles></office:document-styles>')
    content = (f'<office:document-content {ODF_NS}><office:automatic-styles>'
               '<style:style style:name="P1" style:family="paragraph" style:parent-style-name="Standard">'
               '<style:paragraph-properties fo:text-align="center"/></style:style>'
               '<style:style style:name="T1" style:family="text"><style:text-properties fo:font-style="italic"/>'
               "</style:style></office:automatic-styles><office:body><office:text>"
               '<text:h text:style-name="Heading_20_1" text:outline-level="1">Minutes</text:h>'
               '<text:p text:style-name="P1">Attendees: Ana</text:p><text:p text:style-name="Standard">Plan '
               "<text:span>B</text:span></text:p></office:text></office:body></office:document-content>")
    path = tmp_path / "notes.odt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        archive.writestr("styles.xml", styles)
        archive.writestr("content.xml", content)
    paragraphs = load_paragraphs(path)
    assert [p.text for p in paragraphs] == ["Minutes", "Attendees: Ana", "Plan B"]
    assert paragraphs[0].style == "Heading 1" and paragraphs[0].bold
    assert paragraphs[1].alignment == "center" and not paragraphs[1].bold
    gold = tmp_path / "gold.txt"
    gold.write_text("Minutes\nAttendees: Ana\nPlan B\n", encoding="utf-8")
    assert compare_document_text(str(path), str(gold)) == 1.0
    assert compare_docx_files(str(path), str(gold)) == 0.0  # as upstream: a .odt against a .txt never matches
    assert check_document(str(path), {"paragraphs": [{"text": "Minutes", "style": "Heading 1"}]}) == 1.0
