"""Impress checks on real decks written with python-pptx, LibreOffice settings files and an accessibility
tree: the asked-for state scores 1, the unchanged one 0."""

from __future__ import annotations

import zipfile
from pathlib import Path

from PIL import Image
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Emu, Inches

from environments.judges import impress as m

XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry">
<item oor:path="/org.openoffice.Office.Impress/Misc/Start"><prop oor:name="EnablePresenterScreen" oor:op="fuse">\
<value>{presenter}</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse">\
<value>{minutes}</value></prop></item>
</oor:items>
"""


def test_libreoffice_settings(tmp_path: Path) -> None:
    settings = tmp_path / "registrymodifications.xcu"
    settings.write_text(XCU.format(presenter="false", minutes=3), encoding="utf-8")
    assert m.check_presenter_console_disable(str(settings)) == 1.0
    assert m.check_auto_saving_time(str(settings), {"minutes": 3}) == 1.0
    assert m.check_auto_saving_time(str(settings), {"minutes": 10}) == 0.0
    settings.write_text(XCU.format(presenter="true", minutes=10), encoding="utf-8")
    assert m.check_presenter_console_disable(str(settings)) == 0.0
    assert m.check_presenter_console_disable(str(tmp_path / "missing.xcu")) == 0.0


def deck(path: Path, *, portrait: bool = False, backgrounds: list[tuple[int, int, int] | None] | None = None) -> str:
    prs = Presentation()
    if portrait:
        prs.slide_width, prs.slide_height = prs.slide_height, prs.slide_width
    for colour in backgrounds or [None]:
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        if colour is not None:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = RGBColor(*colour)
    prs.save(path)
    return str(path)


def test_orientation_and_background_colours(tmp_path: Path) -> None:
    assert m.check_slide_orientation_Portrait(deck(tmp_path / "portrait.pptx", portrait=True)) == 1.0
    assert m.check_slide_orientation_Portrait(deck(tmp_path / "landscape.pptx")) == 0.0
    exact = deck(tmp_path / "red.pptx", backgrounds=[(255, 0, 0), (255, 0, 0)])
    assert m.evaluate_presentation_fill_to_rgb_distance(exact, {"rgb": [255, 0, 0]}) == 1.0
    half = deck(tmp_path / "half.pptx", backgrounds=[(255, 0, 0), (0, 0, 255)])
    score = m.evaluate_presentation_fill_to_rgb_distance(half, {"rgb": [255, 0, 0], "original_rgb": [0, 0, 255]})
    assert score == 0.5  # the second slide kept its original colour: distance 1
    plain = deck(tmp_path / "plain.pptx")  # follows a master without a solid fill
    assert m.evaluate_presentation_fill_to_rgb_distance(plain, {"rgb": [255, 0, 0]}) == 0.0


def with_part(pptx: str, name: str, edit) -> None:  # type: ignore[no-untyped-def]
    """Rewrite one part of a saved deck (python-pptx writes no transitions)."""
    source = Path(pptx)
    with zipfile.ZipFile(source) as archive:
        parts = {info.filename: archive.read(info.filename) for info in archive.infolist()}
    parts[name] = edit(parts[name].decode("utf-8")).encode("utf-8")
    with zipfile.ZipFile(source, "w") as archive:
        for part, data in parts.items():
            archive.writestr(part, data)


def test_transitions_and_page_number_colours(tmp_path: Path) -> None:
    pptx = deck(tmp_path / "t.pptx", backgrounds=[None, None])
    with_part(pptx, "ppt/slides/slide2.xml", lambda xml: xml.replace(
        "</p:sld>", '<p:transition spd="med"><p:dissolve/></p:transition></p:sld>'))
    assert m.check_transition(pptx, {"slide_idx": 1, "transition_type": "dissolve"}) == 1.0
    assert m.check_transition(pptx, {"slide_idx": 0, "transition_type": "dissolve"}) == 0.0
    assert m.check_transition(pptx, {"slide_idx": 1, "transition_type": "fade"}) == 0.0
    assert m.check_transition(pptx, {"slide_idx": 5, "transition_type": "dissolve"}) == 0.0

    def numbers(name: str, value: str) -> str:
        path = deck(tmp_path / name)
        with_part(path, "ppt/slideMasters/slideMaster1.xml", lambda xml: xml.replace(
            "</p:sldMaster>", f'<p:extLst><p:ext uri="x"><a:solidFill><a:srgbClr val="{value}"/></a:solidFill>'
                              '<a:solidFill><a:srgbClr val="000000"/></a:solidFill></p:ext></p:extLst></p:sldMaster>'))
        return path

    # upstream reads val as "#RRGGBB" though OOXML writes "RRGGBB": 0F0202 reads as (240, 32, 2), "red";
    # a true red E02020 reads as (2, 2, 0), "black" (tests/judges/test_conformance.py holds us to it)
    assert m.check_page_number_colors(numbers("shifted.pptx", "0F0202"), {"color": "red"}) == 1.0
    assert m.check_page_number_colors(numbers("shifted.pptx", "0F0202"), {"color": "blue"}) == 0.0
    assert m.check_page_number_colors(numbers("red.pptx", "E02020"), {"color": "red"}) == 0.0
    assert m.check_page_number_colors(numbers("red.pptx", "E02020"), {"color": "black"}) == 1.0


def test_picture_stretched_and_centred(tmp_path: Path) -> None:
    png = tmp_path / "photo.png"
    Image.new("RGB", (40, 30), (10, 120, 200)).save(png)

    def picture_deck(name: str, place) -> str:  # type: ignore[no-untyped-def]
        prs = Presentation()
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        left, top, width, height = place(prs)
        slide.shapes.add_picture(str(png), left, top, width, height)
        prs.save(tmp_path / name)
        return str(tmp_path / name)

    original = picture_deck("original.pptx", lambda p: (Inches(1), Inches(1), Inches(2), Inches(1.5)))
    stretched = picture_deck("stretched.pptx", lambda p: (Emu(0), Emu(0), p.slide_width, p.slide_height))
    assert m.check_image_stretch_and_center(stretched, original) == 1.0
    assert m.check_image_stretch_and_center(original, original) == 0.0


def test_left_panel_from_the_accessibility_tree() -> None:
    shown = ('<desktop-frame><application name="soffice"><document-frame name="Slides View"/></application>'
             '</desktop-frame>')
    assert m.check_left_panel(shown) == 1.0
    assert m.check_left_panel(shown.replace("Slides View", "Outline View")) == 0.0
    assert m.check_left_panel("not xml <") == 0.0
