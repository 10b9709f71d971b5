"""Word-processor formatting checks over ``.docx`` (python-docx), with OSWorld's names and semantics.

Where upstream first requires the same text as the gold document it calls ``compare_docx_files`` with its
defaults (:func:`environments.judges.documents.compare_docx_files`); "same text" below means that. A file
python-docx cannot open scores 0.

* ``compare_line_spacing`` — same text, the same number of paragraphs, each with the gold paragraph's
  line spacing.
* ``compare_docx_images`` — the same number of embedded images, each decoding to the same pixels.
* ``check_tabstops`` — the same number of non-empty paragraphs, each with the gold one's tab stops (clear
  stops and a left stop at 0 ignored; same alignments); score ``1 - mean(sum |position difference| /
  paragraph width)``; optionally (``word_number_split_by_tabstop``, ``index``) every result paragraph's
  ``index``-th tab-separated field has that many words.
* ``compare_subscript_contains`` — some pair of corresponding runs are both subscript.
* ``compare_insert_equation`` — same text and some pair of corresponding runs both hold an equation object.
* ``has_page_numbers_in_footers`` — every section's first footer paragraph holds a digit.
* ``compare_font_names`` — every run's font is ``rules['font_name']``.
* ``is_first_line_centered`` — the first paragraph is centred.
* ``contains_page_break`` — at least one page break in the body's runs (exactly
  ``rules['page_break_count']`` when given).
* ``evaluate_strike_through_last_paragraph`` — same text, every run of the last paragraph struck through.
* ``check_italic_font_size_14`` — same text, every italic run 14 pt.
* ``evaluate_conversion`` — no run (body or tables) is all upper case.
* ``evaluate_spacing`` — the first three paragraphs spaced 1.0, 2.0 and 1.5.
"""

from __future__ import annotations

import io
import re
from typing import Any, Mapping

import structlog

from environments.judges.documents import compare_docx_files

log = structlog.get_logger(__name__)

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def open_docx(path: str | None) -> Any:
    if not path:
        return None
    from docx import Document

    try:
        return Document(path)
    except Exception as exc:  # python-docx raises many kinds (zip, xml, key) for a broken file
        log.info("not a readable .docx", path=path, error=f"{type(exc).__name__}: {exc}")
        return None


def _pair(result: str | None, expected: str | None, same_text: bool = False) -> tuple[Any, Any] | None:
    if not result or not expected or (same_text and not compare_docx_files(result, expected)):
        return None
    first, second = open_docx(result), open_docx(expected)
    return None if first is None or second is None else (first, second)


def compare_line_spacing(result: str | None, expected: str | None = None, **_: Any) -> float:
    pair = _pair(result, expected, same_text=True)
    if pair is None or len(pair[0].paragraphs) != len(pair[1].paragraphs):
        return 0.0
    return float(all(a.paragraph_format.line_spacing == b.paragraph_format.line_spacing
                     for a, b in zip(pair[0].paragraphs, pair[1].paragraphs)))


def _images(document: Any) -> list[bytes]:
    return [rel.target_part.blob for rel in document.part.rels.values() if "image" in rel.reltype]


def compare_docx_images(result: str | None, expected: str | None = None, **_: Any) -> float:
    from PIL import Image

    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    first, second = _images(pair[0]), _images(pair[1])
    if len(first) != len(second):
        return 0.0
    for a, b in zip(first, second):
        with Image.open(io.BytesIO(a)) as x, Image.open(io.BytesIO(b)) as y:
            if x.tobytes() != y.tobytes():
                return 0.0
    return 1.0


def check_tabstops(result: str | None, expected: str | None = None, *, word_number_split_by_tabstop: int | None = None,
                   index: int = 0, **_: Any) -> float:
    from docx.enum.text import WD_TAB_ALIGNMENT

    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    mine = [p for p in pair[0].paragraphs if p.text.strip()]
    gold = [p for p in pair[1].paragraphs if p.text.strip()]
    if len(mine) != len(gold) or not mine:
        return 0.0
    if word_number_split_by_tabstop is not None:
        for paragraph in mine:
            fields = paragraph.text.split("\t")
            if index >= len(fields):
                return 0.0
            if len([w for w in re.split(r"\s", fields[index]) if w.strip()]) != word_number_split_by_tabstop:
                return 0.0
    section = pair[1].sections[0]
    width = section.page_width - section.left_margin - section.right_margin

    def kept(stop: Any) -> bool:
        return not (stop.alignment == WD_TAB_ALIGNMENT.CLEAR
                    or (stop.alignment == WD_TAB_ALIGNMENT.LEFT and stop.position == 0))

    penalty = 0.0
    for a, b in zip(mine, gold):
        stops_a = [s for s in a.paragraph_format.tab_stops if kept(s)]
        stops_b = [s for s in b.paragraph_format.tab_stops if kept(s)]
        if len(stops_a) != len(stops_b) or any(x.alignment != y.alignment for x, y in zip(stops_a, stops_b)):
            return 0.0
        penalty += sum(abs(x.position - y.position) for x, y in zip(stops_a, stops_b)) / width
    return 1.0 - penalty / len(mine)


def _run_pairs(first: Any, second: Any) -> Any:
    for a, b in zip(first.paragraphs, second.paragraphs):
        yield from zip(a.runs, b.runs)


def compare_subscript_contains(result: str | None, expected: str | None = None, **_: Any) -> float:
    pair = _pair(result, expected)
    return float(pair is not None and any(a.font.subscript and b.font.subscript for a, b in _run_pairs(*pair)))


def compare_insert_equation(result: str | None, expected: str | None = None, **_: Any) -> float:
    pair = _pair(result, expected, same_text=True)
    return float(pair is not None and any(a.element.xpath(".//w:object") and b.element.xpath(".//w:object")
                                          for a, b in _run_pairs(*pair)))


def has_page_numbers_in_footers(result: str | None, **_: Any) -> float:
    document = open_docx(result)
    if document is None:
        return 0.0
    for section in document.sections:
        paragraphs = section.footer.paragraphs
        if not any(ch.isdigit() for ch in (paragraphs[0].text if paragraphs else "")):
            return 0.0
    return 1.0


def compare_font_names(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    document = open_docx(result)
    if document is None or not isinstance(rules, Mapping) or "font_name" not in rules:
        return 0.0
    return float(all(run.font.name == rules["font_name"] for p in document.paragraphs for run in p.runs))


def is_first_line_centered(result: str | None, **_: Any) -> float:
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    document = open_docx(result)
    if document is None or not document.paragraphs:
        return 0.0
    return float(document.paragraphs[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER)


def contains_page_break(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    document = open_docx(result)
    if document is None:
        return 0.0
    count = sum(1 for p in document.paragraphs for run in p.runs for br in run.element.iter(f"{_W}br")
                if br.get(f"{_W}type") == "page")
    wanted = rules.get("page_break_count") if isinstance(rules, Mapping) else None
    if wanted is not None and count != wanted:
        return 0.0
    return float(count > 0)


def evaluate_strike_through_last_paragraph(result: str | None, expected: str | None = None, **_: Any) -> float:
    pair = _pair(result, expected, same_text=True)
    if pair is None or not pair[0].paragraphs:
        return 0.0
    return float(all(run.font.strike for run in pair[0].paragraphs[-1].runs))


def check_italic_font_size_14(result: str | None, expected: str | None = None, **_: Any) -> float:
    pair = _pair(result, expected, same_text=True)
    if pair is None:
        return 0.0
    return float(all(run.font.size is not None and run.font.size.pt == 14
                     for p in pair[0].paragraphs for run in p.runs if run.italic))


def evaluate_conversion(result: str | None, **_: Any) -> float:
    document = open_docx(result)
    if document is None:
        return 0.0
    cells = (p for table in document.tables for row in table.rows for cell in row.cells for p in cell.paragraphs)
    for paragraph in (*cells, *document.paragraphs):
        if any(run.text.isupper() for run in paragraph.runs):
            return 0.0
    return 1.0


def evaluate_spacing(result: str | None, **_: Any) -> float:
    document = open_docx(result)
    if document is None or len(document.paragraphs) < 3:
        return 0.0
    spacing = [p.paragraph_format.line_spacing for p in document.paragraphs[:3]]
    return float(spacing == [1.0, 2.0, 1.5])
