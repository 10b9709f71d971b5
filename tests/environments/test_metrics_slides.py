"""``compare_pptx_files`` on real decks written by python-pptx, and on decks LibreOffice Impress saved."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.text import PP_ALIGN
from pptx.util import Emu, Pt

from environments.judges.slides import compare_pptx_files

Edit = Callable[[object], None]


def deck(path: Path, edit: Edit | None = None) -> str:
    """Two slides: a title + bulleted body, and a text box + a 2x2 table; ``edit`` changes the deck first."""
    prs = Presentation()
    first = prs.slides.add_slide(prs.slide_layouts[1])
    first.shapes.title.text = "Quarterly results"
    body = first.placeholders[1].text_frame
    body.text = "Revenue grew"
    item = body.add_paragraph()
    item.text, item.level = "Costs fell", 1
    first.notes_slide.notes_text_frame.text = "mention the margin"
    second = prs.slides.add_slide(prs.slide_layouts[6])
    box = second.shapes.add_textbox(Emu(914400), Emu(914400), Emu(3657600), Emu(914400))
    run = box.text_frame.paragraphs[0].add_run()
    run.text, run.font.size, run.font.name = "Plain words", Pt(18), "DejaVu Sans"
    table = second.shapes.add_table(2, 2, Emu(914400), Emu(2743200), Emu(3657600), Emu(1371600)).table
    for r in range(2):
        for c in range(2):
            table.cell(r, c).text = f"{r}{c}"
    if edit is not None:
        edit(prs)
    prs.save(path)
    return str(path)


def slide(n: int) -> Callable[[object], object]:
    return lambda prs: prs.slides[n]  # type: ignore[attr-defined]


def edit_run(prs) -> object:  # type: ignore[no-untyped-def]
    return prs.slides[1].shapes[0].text_frame.paragraphs[0].runs[0]


EDITS: dict[str, tuple[Edit, dict]] = {
    # the slide's bullets carry the text too, so both checks go off
    "text": (lambda p: setattr(slide(0)(p).shapes.title, "text", "Quarterly losses"),
             {"examine_text": False, "examine_bullets": False}),
    "moved": (lambda p: setattr(slide(1)(p).shapes[0], "left", Emu(2000000)), {"examine_shape": False}),
    "bold": (lambda p: setattr(edit_run(p).font, "bold", True), {"examine_font_bold": False}),
    "italic": (lambda p: setattr(edit_run(p).font, "italic", True), {"examine_font_italic": False}),
    "size": (lambda p: setattr(edit_run(p).font, "size", Pt(24)), {"examine_font_size": False}),
    "font": (lambda p: setattr(edit_run(p).font, "name", "Liberation Serif"), {"examine_font_name": False}),
    "colour": (lambda p: setattr(edit_run(p).font.color, "rgb", RGBColor(0xFF, 0, 0)), {}),
    "underline": (lambda p: setattr(edit_run(p).font, "underline", True), {"examine_font_underline": False}),
    "centred": (lambda p: setattr(slide(1)(p).shapes[0].text_frame.paragraphs[0], "alignment", PP_ALIGN.CENTER),
                {"examine_alignment": False}),
    "indent": (lambda p: setattr(slide(0)(p).placeholders[1].text_frame.paragraphs[1], "level", 2),
               {"examine_indent": False, "examine_bullets": False}),
    "notes": (lambda p: setattr(slide(0)(p).notes_slide.notes_text_frame, "text", "skip it"), {"examine_note": False}),
    "strike": (lambda p: edit_run(p).font._rPr.set("strike", "sngStrike"), {"examine_strike_through": False}),
    "cell": (lambda p: setattr(slide(1)(p).shapes[1].table.cell(0, 0), "text", "changed"), None),
}


def test_identical_decks_match_and_unset_formatting_equals_its_default(tmp_path: Path) -> None:
    gold = deck(tmp_path / "gold.pptx")
    assert compare_pptx_files(deck(tmp_path / "same.pptx"), gold) == 1.0

    def explicit_defaults(prs) -> None:  # type: ignore[no-untyped-def]
        edit_run(prs).font.bold = False  # unset and False both mean "not bold" ...
        prs.slides[1].shapes[0].text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT  # ... unset means left

    assert compare_pptx_files(deck(tmp_path / "defaults.pptx", explicit_defaults), gold) == 1.0


@pytest.mark.parametrize("name", sorted(EDITS))
def test_each_difference_fails_and_its_option_switches_the_check_off(tmp_path: Path, name: str) -> None:
    gold = deck(tmp_path / "gold.pptx")
    edit, relaxed = EDITS[name]
    changed = deck(tmp_path / f"{name}.pptx", edit)
    if name == "colour":  # colours are compared only when both runs have an RGB one (as upstream) ...
        assert compare_pptx_files(changed, gold) == 1.0
        gold = deck(tmp_path / "blue.pptx", lambda p: setattr(edit_run(p).font.color, "rgb", RGBColor(0, 0, 0xFF)))
        relaxed = {"examine_color_rgb": False}
    assert compare_pptx_files(changed, gold) == 0.0
    if relaxed is not None:  # table cells' text is always compared through their runs
        assert compare_pptx_files(changed, gold, **relaxed) == 1.0


def test_a_slide_more_or_a_shape_more_fails_unless_the_slide_count_is_not_examined(tmp_path: Path) -> None:
    gold = deck(tmp_path / "gold.pptx")
    extra = deck(tmp_path / "extra.pptx", lambda p: p.slides.add_slide(p.slide_layouts[6]))
    assert compare_pptx_files(extra, gold) == 0.0
    assert compare_pptx_files(extra, gold, examine_number_of_slides=False) == 1.0  # zip over the common slides
    shape = deck(tmp_path / "shape.pptx", lambda p: p.slides[1].shapes.add_textbox(0, 0, 914400, 914400))
    assert compare_pptx_files(shape, gold, examine_shape=False) == 0.0


def test_tolerance_and_task_specific_position_rules(tmp_path: Path) -> None:
    gold = deck(tmp_path / "gold.pptx")
    nudged = deck(tmp_path / "nudged.pptx", lambda p: setattr(p.slides[1].shapes[0], "left", Emu(914400 + 3000)))
    assert compare_pptx_files(nudged, gold) == 1.0  # within 0.5 %
    assert compare_pptx_files(nudged, gold, approximately_tolerance=0.001) == 0.0
    # OSWorld's "move the picture/shape to the right" rule on slide 2: the result's left must exceed both the
    # gold's and 4320000 EMU
    right = deck(tmp_path / "right.pptx", lambda p: setattr(p.slides[1].shapes[1], "left", Emu(5000000)))
    assert compare_pptx_files(right, gold, examine_right_position=True, examine_shape=False) == 1.0
    assert compare_pptx_files(gold, right, examine_right_position=True, examine_shape=False) == 0.0


def test_bad_input_scores_zero_and_a_misspelt_option_is_an_error(tmp_path: Path) -> None:
    gold = deck(tmp_path / "gold.pptx")
    junk = tmp_path / "junk.pptx"
    junk.write_bytes(b"not a zip")
    assert compare_pptx_files(str(junk), gold) == 0.0
    assert compare_pptx_files(str(tmp_path / "missing.pptx"), gold) == 0.0
    assert compare_pptx_files(None, gold) == 0.0
    assert compare_pptx_files(gold, gold, _note="a comment in the task", enable_debug=False) == 1.0
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['examine_shapes'\]"):
        compare_pptx_files(gold, gold, examine_shapes=False)


def test_decks_saved_by_libreoffice_impress_compare_as_upstream_expects(tmp_path: Path) -> None:
    """The real application writes the decks the tasks judge: a deck Impress re-saves matches itself, and an
    edit made before saving is still found."""
    assert shutil.which("soffice"), "LibreOffice (soffice) is missing: bash scripts/install.sh installs it"
    out = tmp_path / "out"

    def impress(source: str, name: str) -> str:
        work = tmp_path / name
        work.mkdir()
        shutil.copy(source, work / "deck.pptx")
        subprocess.run(["soffice", "--headless", f"-env:UserInstallation=file://{tmp_path}/profile",
                        "--convert-to", "pptx:Impress MS PowerPoint 2007 XML", "--outdir", str(out / name),
                        str(work / "deck.pptx")], check=True, capture_output=True, timeout=240)
        return str(out / name / "deck.pptx")

    gold = impress(deck(tmp_path / "gold.pptx"), "gold")
    again = impress(deck(tmp_path / "gold2.pptx"), "again")
    edited = impress(deck(tmp_path / "bold.pptx", EDITS["bold"][0]), "bold")
    assert compare_pptx_files(again, gold) == 1.0
    assert compare_pptx_files(edited, gold) == 0.0
