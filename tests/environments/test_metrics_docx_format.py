"""Writer formatting checks on real .docx files written with python-docx: the asked-for formatting scores 1,
the document without it 0."""

from __future__ import annotations

from pathlib import Path

from docx import Document
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.shared import Inches, Pt
from PIL import Image

from environments.judges import docx_format as f

TEXT = ["Introduction to the report", "The body of the report goes here", "In conclusion"]


def write(path: Path, edit=None, text=TEXT) -> str:  # type: ignore[no-untyped-def]
    document = Document()
    for line in text:
        document.add_paragraph(line)
    if edit is not None:
        edit(document)
    document.save(path)
    return str(path)


def test_line_spacing_tabstops_and_images(tmp_path: Path) -> None:
    def double(document):  # type: ignore[no-untyped-def]
        for paragraph in document.paragraphs:
            paragraph.paragraph_format.line_spacing = 2.0

    gold = write(tmp_path / "gold.docx", double)
    assert f.compare_line_spacing(write(tmp_path / "double.docx", double), gold) == 1.0
    assert f.compare_line_spacing(write(tmp_path / "plain.docx"), gold) == 0.0
    assert f.compare_line_spacing(write(tmp_path / "other.docx", double, text=["x", "y", "z"]), gold) == 0.0

    def tabs(at: float):  # type: ignore[no-untyped-def]
        def edit(document):  # type: ignore[no-untyped-def]
            for paragraph in document.paragraphs:
                paragraph.paragraph_format.tab_stops.add_tab_stop(Inches(at), WD_TAB_ALIGNMENT.RIGHT)
        return edit

    lines = ["Name\tValue", "Alpha beta\tGamma"]
    tab_gold = write(tmp_path / "tabs-gold.docx", tabs(3), lines)
    assert f.check_tabstops(write(tmp_path / "tabs.docx", tabs(3), lines), tab_gold) == 1.0
    near = f.check_tabstops(write(tmp_path / "tabs-near.docx", tabs(3.5), lines), tab_gold)
    assert 0.0 < near < 1.0  # 0.5 inch off on a 6 inch line: 1 - 0.5 / 6
    assert abs(near - (1 - 0.5 / 6)) < 1e-3
    assert f.check_tabstops(write(tmp_path / "no-tabs.docx", None, lines), tab_gold) == 0.0
    assert f.check_tabstops(tab_gold, tab_gold, word_number_split_by_tabstop=1) == 0.0  # "Alpha beta": 2 words
    assert f.check_tabstops(tab_gold, tab_gold, word_number_split_by_tabstop=1, index=1) == 1.0

    def picture(colour):  # type: ignore[no-untyped-def]
        png = tmp_path / f"{colour}.png"
        Image.new("RGB", (20, 10), colour).save(png)
        return lambda document: document.add_picture(str(png))

    red = write(tmp_path / "red.docx", picture("red"))
    assert f.compare_docx_images(write(tmp_path / "red2.docx", picture("red")), red) == 1.0
    assert f.compare_docx_images(write(tmp_path / "blue.docx", picture("blue")), red) == 0.0
    assert f.compare_docx_images(write(tmp_path / "none.docx"), red) == 0.0


def test_run_and_paragraph_formatting(tmp_path: Path) -> None:
    def sub(document):  # type: ignore[no-untyped-def]
        document.paragraphs[0].add_run("2").font.subscript = True

    with_sub = write(tmp_path / "sub.docx", sub)
    assert f.compare_subscript_contains(with_sub, write(tmp_path / "sub-gold.docx", sub)) == 1.0
    assert f.compare_subscript_contains(write(tmp_path / "nosub.docx"), with_sub) == 0.0

    def font(name):  # type: ignore[no-untyped-def]
        def edit(document):  # type: ignore[no-untyped-def]
            for paragraph in document.paragraphs:
                for run in paragraph.runs:
                    run.font.name = name
        return edit

    assert f.compare_font_names(write(tmp_path / "times.docx", font("Times New Roman")),
                                {"font_name": "Times New Roman"}) == 1.0
    assert f.compare_font_names(write(tmp_path / "arial.docx", font("Arial")), {"font_name": "Times New Roman"}) == 0.0

    def centre(document):  # type: ignore[no-untyped-def]
        document.paragraphs[0].alignment = WD_PARAGRAPH_ALIGNMENT.CENTER

    assert f.is_first_line_centered(write(tmp_path / "centred.docx", centre)) == 1.0
    assert f.is_first_line_centered(write(tmp_path / "left.docx")) == 0.0

    def strike(document):  # type: ignore[no-untyped-def]
        for run in document.paragraphs[-1].runs:
            run.font.strike = True

    plain = write(tmp_path / "plain.docx")
    assert f.evaluate_strike_through_last_paragraph(write(tmp_path / "struck.docx", strike), plain) == 1.0
    assert f.evaluate_strike_through_last_paragraph(plain, plain) == 0.0

    def italic(size):  # type: ignore[no-untyped-def]
        def edit(document):  # type: ignore[no-untyped-def]
            run = document.paragraphs[1].runs[0]
            run.italic, run.font.size = True, Pt(size)
        return edit

    assert f.check_italic_font_size_14(write(tmp_path / "i14.docx", italic(14)), plain) == 1.0
    assert f.check_italic_font_size_14(write(tmp_path / "i12.docx", italic(12)), plain) == 0.0

    def spacing(document):  # type: ignore[no-untyped-def]
        for paragraph, value in zip(document.paragraphs, (1.0, 2.0, 1.5)):
            paragraph.paragraph_format.line_spacing = value

    assert f.evaluate_spacing(write(tmp_path / "spacing.docx", spacing)) == 1.0
    assert f.evaluate_spacing(plain) == 0.0
    assert f.evaluate_conversion(write(tmp_path / "lower.docx", text=["all lower", "case text"])) == 1.0
    assert f.evaluate_conversion(write(tmp_path / "upper.docx", text=["STILL UPPER", "case text"])) == 0.0


def test_page_breaks_footers_and_bad_files(tmp_path: Path) -> None:
    def breaks(n):  # type: ignore[no-untyped-def]
        def edit(document):  # type: ignore[no-untyped-def]
            for paragraph in document.paragraphs[:n]:
                paragraph.runs[0].add_break(WD_BREAK.PAGE)
        return edit

    two = write(tmp_path / "two.docx", breaks(2))
    assert f.contains_page_break(two, {}) == 1.0
    assert f.contains_page_break(two, {"page_break_count": 2}) == 1.0
    assert f.contains_page_break(two, {"page_break_count": 1}) == 0.0
    assert f.contains_page_break(write(tmp_path / "none.docx"), {}) == 0.0

    def footer(text):  # type: ignore[no-untyped-def]
        return lambda document: setattr(document.sections[0].footer.paragraphs[0], "text", text)

    assert f.has_page_numbers_in_footers(write(tmp_path / "numbered.docx", footer("Page 1"))) == 1.0
    assert f.has_page_numbers_in_footers(write(tmp_path / "unnumbered.docx", footer("Draft"))) == 0.0

    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"not a zip")
    assert f.compare_line_spacing(str(broken), two) == 0.0
    assert f.is_first_line_centered(str(broken)) == 0.0
    assert f.compare_font_names(None, {"font_name": "Arial"}) == 0.0
