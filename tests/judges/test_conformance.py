"""Our judges against OSWorld's own functions (``desktop-env``, loaded by :mod:`tests.judges.upstream`) on the
same inputs: generated images, .docx and .pptx files, LibreOffice settings, archives, text files and browser
records. Every case must score the same (scores within 1e-9). Upstream's third-party imports that none of
the compared functions call are stubs (calling one raises)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.shared import Inches, Pt
from PIL import Image, ImageDraw, ImageEnhance, ImageOps
from pptx import Presentation
from pptx.util import Emu, Inches as PptxInches

from environments.judges import apps, browser, docx_format, files, gimp, impress
from tests.environments.test_metrics_docx_format import write as docx
from tests.environments.test_metrics_gimp import photo, save
from tests.environments.test_metrics_impress import XCU, deck, with_part
from tests.judges.upstream import metrics_module

#: third-party modules upstream's metric modules import that no compared function calls (the module-level imports
#: of gimp, docs, general, chrome and their shared utils)
STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")


def upstream(module: str) -> Any:
    return metrics_module(module, STUBS)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: C901 (one place builds every input)
    root = tmp_path_factory.mktemp("conformance")
    x: dict[str, Any] = {}

    def img(name: str, image: Image.Image) -> str:
        return save(image, root / name)

    x["original"], x["copy"] = img("original.png", photo()), img("copy.png", photo())
    x["other"] = img("other.png", photo(seed=1).rotate(90, expand=True).resize((96, 64)))
    x["smooth"], x["half"] = img("smooth.png", photo(noise=0)), img("half.png", photo(noise=0).resize((48, 32)))
    x["darker"] = img("darker.png", ImageEnhance.Brightness(photo()).enhance(0.7))
    x["brighter"] = img("brighter.png", ImageEnhance.Brightness(photo()).enhance(1.2))
    x["saturated"] = img("saturated.png", ImageEnhance.Color(photo()).enhance(1.6))
    x["dull"] = img("dull.png", ImageEnhance.Color(photo()).enhance(0.5))
    x["contrast"] = img("contrast.png", ImageEnhance.Contrast(photo()).enhance(1.5))
    x["flat"] = img("flat.png", ImageEnhance.Contrast(photo()).enhance(0.6))
    x["indexed"] = img("indexed.png", photo().convert("P", palette=Image.Palette.ADAPTIVE, colors=256))
    x["mirrored"] = img("mirrored.png", ImageOps.mirror(photo()))
    mask = Image.new("RGB", (64, 64), (0, 0, 0))
    ImageDraw.Draw(mask).rectangle((0, 0, 63, 20), fill=(255, 255, 255))
    x["mask"], x["green"] = img("mask.png", mask), img("green.png", Image.new("RGB", (64, 64), (20, 180, 30)))
    red = Image.new("RGB", (64, 64), (20, 180, 30))
    ImageDraw.Draw(red).rectangle((0, 0, 5, 5), fill=(200, 30, 30))
    x["red"] = img("red.png", red)
    for apex in (50, 20):
        scene = Image.new("RGB", (100, 100), (255, 255, 255))
        ImageDraw.Draw(scene).polygon([(apex, 30), (apex - 15, 60), (apex + 15, 60)], fill=(250, 220, 0))
        scene.putpixel((2, 2), (0, 0, 0))
        x[f"triangle{apex}"] = img(f"triangle{apex}.png", scene)
    for left in (2, 60):
        text = Image.new("RGB", (200, 80), (255, 255, 255))
        ImageDraw.Draw(text).text((left, 30), "Hello", fill=(0, 0, 0))
        x[f"text{left}"] = img(f"text{left}.png", text)
    framed = Image.new("RGBA", (100, 100), (0, 0, 0, 0))
    framed.paste(Image.new("RGBA", (40, 30), (9, 9, 9, 255)), (5, 5))
    x["framed"] = img("framed.png", framed)
    (root / "gimprc").write_text("# gimprc\n\n(undo-levels 100)\n(default-image (width 1920))\n")
    x["gimprc"] = str(root / "gimprc")

    def spaced(value: float) -> Any:
        return lambda d: [setattr(p.paragraph_format, "line_spacing", value) for p in d.paragraphs]

    def tabs(at: float) -> Any:
        return lambda d: [p.paragraph_format.tab_stops.add_tab_stop(Inches(at), WD_TAB_ALIGNMENT.RIGHT)
                          for p in d.paragraphs]

    lines = ["Name\tValue", "Alpha beta\tGamma"]
    x["double"], x["double2"] = docx(root / "double.docx", spaced(2.0)), docx(root / "double2.docx", spaced(2.0))
    x["plain"] = docx(root / "plain.docx")
    x["tabs"], x["tabs2"] = docx(root / "tabs.docx", tabs(3), lines), docx(root / "tabs2.docx", tabs(3), lines)
    x["tabs_near"], x["no_tabs"] = docx(root / "near.docx", tabs(3.5), lines), docx(root / "none.docx", None, lines)

    def sub(d: Any) -> None:
        d.paragraphs[0].add_run("2").font.subscript = True

    def centre(d: Any) -> None:
        d.paragraphs[0].alignment = WD_PARAGRAPH_ALIGNMENT.CENTER

    def strike(d: Any) -> None:
        for run in d.paragraphs[-1].runs:
            run.font.strike = True

    def italic(size: int) -> Any:
        def edit(d: Any) -> None:
            run = d.paragraphs[1].runs[0]
            run.italic, run.font.size = True, Pt(size)
        return edit

    def breaks(d: Any) -> None:
        for p in d.paragraphs[:2]:
            p.runs[0].add_break(WD_BREAK.PAGE)

    def footer(text: str) -> Any:
        return lambda d: setattr(d.sections[0].footer.paragraphs[0], "text", text)

    def font(name: str) -> Any:
        return lambda d: [setattr(r.font, "name", name) for p in d.paragraphs for r in p.runs]

    def three(d: Any) -> None:
        for p, v in zip(d.paragraphs, (1.0, 2.0, 1.5)):
            p.paragraph_format.line_spacing = v

    for name, edit in {"sub": sub, "sub2": sub, "centre": centre, "strike": strike, "i14": italic(14),
                       "i12": italic(12), "breaks": breaks, "numbered": footer("Page 1"), "draft": footer("Draft"),
                       "times": font("Times New Roman"), "arial": font("Arial"), "spacing": three}.items():
        x[name] = docx(root / f"{name}.docx", edit)
    x["upper"] = docx(root / "upper.docx", None, ["STILL UPPER", "case"])
    x["lower"] = docx(root / "lower.docx", None, ["all lower", "case"])
    for colour in ("red", "blue"):
        png = root / f"{colour}-pic.png"
        Image.new("RGB", (20, 10), colour).save(png)
        x[f"pic_{colour}"] = docx(root / f"pic-{colour}.docx", lambda d, png=png: d.add_picture(str(png)))

    for presenter, minutes in (("false", 3), ("true", 10)):
        path = root / f"settings-{presenter}.xcu"
        path.write_text(XCU.format(presenter=presenter, minutes=minutes))
        x[f"xcu_{presenter}"] = str(path)
    x["portrait"] = deck(root / "portrait.pptx", portrait=True)
    x["landscape"] = deck(root / "landscape.pptx")
    x["red_bg"] = deck(root / "red-bg.pptx", backgrounds=[(255, 0, 0), (250, 10, 10)])
    x["mixed_bg"] = deck(root / "mixed-bg.pptx", backgrounds=[(255, 0, 0), (0, 0, 255)])
    x["transition"] = deck(root / "transition.pptx", backgrounds=[None, None])
    with_part(x["transition"], "ppt/slides/slide2.xml", lambda xml: xml.replace(
        "</p:sld>", '<p:transition spd="med"><p:dissolve/></p:transition></p:sld>'))
    for name, value in (("numbers", "E02020"), ("numbers_shifted", "0F0202")):
        x[name] = deck(root / f"{name}.pptx")
        with_part(x[name], "ppt/slideMasters/slideMaster1.xml", lambda xml, value=value: xml.replace(
            "</p:sldMaster>", f'<p:extLst><p:ext uri="x"><a:solidFill><a:srgbClr val="{value}"/></a:solidFill>'
                              '<a:solidFill><a:srgbClr val="000000"/></a:solidFill></p:ext></p:extLst></p:sldMaster>'))
    picture = root / "photo.png"
    Image.new("RGB", (40, 30), (10, 120, 200)).save(picture)
    for name, place in {"pic_original": lambda p: (PptxInches(1), PptxInches(1), PptxInches(2), PptxInches(1.5)),
                        "pic_stretched": lambda p: (Emu(0), Emu(0), p.slide_width, p.slide_height)}.items():
        prs = Presentation()
        prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_picture(str(picture), *place(prs))
        prs.save(root / f"{name}.pptx")
        x[name] = str(root / f"{name}.pptx")

    for name, members in {"zip_gold": {"a.txt": b"1", "b/c.txt": b"2"}, "zip_same": {"b/c.txt": b"2", "a.txt": b"1"},
                          "zip_diff": {"a.txt": b"1", "b/c.txt": b"3"}}.items():
        with zipfile.ZipFile(root / f"{name}.zip", "w") as archive:
            for member, data in members.items():
                archive.writestr(member, data)
        x[name] = str(root / f"{name}.zip")
    (root / "log.txt").write_text("12:00:01 start\nno time\n23:59:60 leap\n24:00:00 invalid\n")
    x["log"] = str(root / "log.txt")
    (root / "mine.py").write_text("#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\ndef f():\n\treturn 1   \n\n")
    (root / "gold.py").write_text("def f():\n    return 1\n")
    (root / "fenced.py").write_text("```python\ndef f():\n    return 1\n```\n")
    x["mine_py"], x["gold_py"], x["fenced_py"] = (str(root / n) for n in ("mine.py", "gold.py", "fenced.py"))
    binding = {"key": "ctrl+j", "command": "workbench.action.togglePanel"}
    (root / "keys.json").write_text("// Place your key bindings in this file\n" + json.dumps([binding]))
    x["keys"], x["binding"] = str(root / "keys.json"), binding
    (root / "settings.conf").write_text("a=1\n")
    x["conf"] = str(root / "settings.conf")
    from mutagen.easyid3 import EasyID3

    song = root / "song.mp3"
    song.write_bytes(b"\xff\xfb\x90\x00" + bytes(413))
    tags = EasyID3()
    tags["title"], tags["artist"] = "Missing You", ["Cheng Xiang", "Guest"]
    tags.save(str(song))
    x["song"] = str(song)
    x["filters"] = str(root / "msgFilterRules.dat")
    Path(x["filters"]).write_text(
        'version="9"\nlogging="no"\nname="Urgent"\nenabled="yes"\ntype="17"\naction="Move to folder"\n'
        'actionValue="mailbox://nobody@Local%20Folders/Urgent"\ncondition="AND (subject,contains,urgent) '
        'OR (from,is,\\"boss, the\\")"\nname="Spam"\nenabled="no"\ntype="17"\naction="Delete"\ncondition="ALL"\n')
    return x


URLS = [{"title": "a", "url": "http://a.com/"}, {"title": "b", "url": "http://www.b.com"}]
ROOTS = {"bookmark_bar": {"children": [
    {"type": "folder", "name": "Liked Authors", "children": [{"type": "url", "url": "https://a.org/x"},
                                                             {"type": "url", "url": "https://b.org/y"}]},
    {"type": "folder", "name": "Work", "children": []}, {"type": "url", "url": "https://news.example"}]}}
URGENT = {"name": "Urgent", "action": "Move to folder",
          "condition": ["AND (subject,contains,urgent)", 'OR (from,is,"boss, the")']}

#: (upstream module, function name, ours, argument keys or literals, keyword options)
CASES: list[tuple[str, str, Any, tuple[Any, ...], dict[str, Any]]] = [
    *[("gimp", "check_structure_sim", gimp.check_structure_sim, (a, "original"), {})
      for a in ("copy", "other", "darker")],
    ("gimp", "check_structure_sim", gimp.check_structure_sim, ("half", "original"), {}),
    *[("gimp", "check_structure_sim_resized", gimp.check_structure_sim_resized, (a, b), {})
      for a, b in (("half", "smooth"), ("other", "original"), ("copy", "original"))],
    ("gimp", "check_file_exists_and_structure_sim", gimp.check_file_exists_and_structure_sim, ("copy", "original"), {}),
    *[("gimp", "check_brightness_decrease_and_structure_sim", gimp.check_brightness_decrease_and_structure_sim,
       (a, "original"), {}) for a in ("darker", "brighter", "other")],
    *[("gimp", "check_saturation_increase_and_structure_sim", gimp.check_saturation_increase_and_structure_sim,
       (a, "original"), {}) for a in ("saturated", "dull")],
    *[("gimp", "check_contrast_increase_and_structure_sim", gimp.check_contrast_increase_and_structure_sim,
       (a, "original"), {}) for a in ("contrast", "flat")],
    *[("gimp", "check_palette_and_structure_sim", gimp.check_palette_and_structure_sim, (a, "original"), {})
      for a in ("indexed", "original")],
    *[("gimp", "check_image_mirror", gimp.check_image_mirror, ("original", b), {}) for b in ("mirrored", "original")],
    *[("gimp", "check_green_background", gimp.check_green_background, (a, "mask"), {}) for a in ("green", "red")],
    *[("gimp", "check_triangle_position", gimp.check_triangle_position, (a,), {})
      for a in ("triangle50", "triangle20")],
    *[("gimp", "check_textbox_on_leftside", gimp.check_textbox_on_leftside, (a,), {}) for a in ("text2", "text60")],
    *[("gimp", "check_image_size", gimp.check_image_size, (a, rules), {}) for a, rules in (
        ("original", {"width": 96, "height": 64}), ("original", {"width": 64}),
        ("framed", {"width": 40, "height": 30, "ignore_transparent": True}), ("framed", {"width": 100}))],
    *[("gimp", "check_image_file_size", gimp.check_image_file_size, ("original", {"max_size": n}), {})
      for n in (10, 10 ** 7)],
    *[("gimp", "check_config_status", gimp.check_config_status, ("gimprc", rules), {}) for rules in (
        {"type:": "key-value", "key": "undo-levels", "value": "100"}, {"key": "undo-levels", "value": "5"},
        {"key": ["default-image", "(width"], "value": "1920"})],
    *[("gimp", "compare_image_list", gimp.compare_image_list, (a, "original"), {}) for a in ("copy", "darker")],
    *[("docs", "compare_line_spacing", docx_format.compare_line_spacing, (a, "double"), {})
      for a in ("double2", "plain")],
    *[("docs", "check_tabstops", docx_format.check_tabstops, (a, "tabs"), {})
      for a in ("tabs2", "tabs_near", "no_tabs")],
    ("docs", "check_tabstops", docx_format.check_tabstops, ("tabs", "tabs"), {"word_number_split_by_tabstop": 1}),
    *[("docs", "compare_docx_images", docx_format.compare_docx_images, (a, "pic_red"), {})
      for a in ("pic_red", "pic_blue", "plain")],
    *[("docs", "compare_subscript_contains", docx_format.compare_subscript_contains, (a, "sub2"), {})
      for a in ("sub", "plain")],
    *[("docs", "has_page_numbers_in_footers", docx_format.has_page_numbers_in_footers, (a,), {})
      for a in ("numbered", "draft")],
    *[("docs", "compare_font_names", docx_format.compare_font_names, (a, {"font_name": "Times New Roman"}), {})
      for a in ("times", "arial")],
    *[("docs", "is_first_line_centered", docx_format.is_first_line_centered, (a,), {}) for a in ("centre", "plain")],
    *[("docs", "contains_page_break", docx_format.contains_page_break, (a, rules), {}) for a, rules in (
        ("breaks", {}), ("breaks", {"page_break_count": 2}), ("breaks", {"page_break_count": 1}), ("plain", {}))],
    *[("docs", "evaluate_strike_through_last_paragraph", docx_format.evaluate_strike_through_last_paragraph,
       (a, "plain"), {}) for a in ("strike", "plain")],
    *[("docs", "check_italic_font_size_14", docx_format.check_italic_font_size_14, (a, "plain"), {})
      for a in ("i14", "i12")],
    *[("docs", "evaluate_conversion", docx_format.evaluate_conversion, (a,), {}) for a in ("upper", "lower")],
    *[("docs", "evaluate_spacing", docx_format.evaluate_spacing, (a,), {}) for a in ("spacing", "plain")],
    *[("slides", "check_presenter_console_disable", impress.check_presenter_console_disable, (a,), {})
      for a in ("xcu_false", "xcu_true")],
    *[("slides", "check_auto_saving_time", impress.check_auto_saving_time, (a, {"minutes": 3}), {})
      for a in ("xcu_false", "xcu_true")],
    *[("slides", "check_slide_orientation_Portrait", impress.check_slide_orientation_Portrait, (a,), {})
      for a in ("portrait", "landscape")],
    *[("slides", "check_transition", impress.check_transition, ("transition", rules), {}) for rules in (
        {"slide_idx": 1, "transition_type": "dissolve"}, {"slide_idx": 0, "transition_type": "dissolve"},
        {"slide_idx": 1, "transition_type": "fade"})],
    *[("slides", "check_page_number_colors", impress.check_page_number_colors, (deck_name, {"color": c}), {})
      for deck_name in ("numbers", "numbers_shifted") for c in ("red", "blue", "black")],
    *[("slides", "evaluate_presentation_fill_to_rgb_distance", impress.evaluate_presentation_fill_to_rgb_distance,
       (a, rules), {}) for a, rules in (("red_bg", {"rgb": [255, 0, 0]}),
                                        ("mixed_bg", {"rgb": [255, 0, 0], "original_rgb": [0, 0, 255]}),
                                        ("landscape", {"rgb": [255, 0, 0]}))],
    *[("slides", "check_image_stretch_and_center", impress.check_image_stretch_and_center, (a, "pic_original"), {})
      for a in ("pic_stretched", "pic_original")],
    *[("vscode", "check_json_keybindings", files.check_json_keybindings, ("keys", {"expected": b}), {})
      for b in ({"key": "ctrl+j", "command": "workbench.action.togglePanel"}, {"key": "ctrl+k"})],
    *[("vscode", "compare_zip_files", files.compare_zip_files, (a, "zip_gold"), {}) for a in ("zip_same", "zip_diff")],
    *[("vscode", "compare_config", files.compare_config, ("conf", {"expected": e}), {}) for e in ("a=1\n", "a=2\n")],
    *[("vscode", "compare_answer", files.compare_answer, (a, {"expected": "42"}), {}) for a in ("42", "41")],
    *[("general", "file_contains", files.file_contains, ("log", {"expected": e}), {})
      for e in (["start", "leap"], ["start", "stop"])],
    *[("general", "check_line_number", files.check_line_number, ("log", {"expected": e}), {}) for e in ("2", "3")],
    *[("general", "compare_python_pure_text", files.compare_python_pure_text, (a, "gold_py"), {})
      for a in ("mine_py", "fenced_py")],
    *[("chrome", "is_expected_tabs", browser.is_expected_tabs, (URLS, {"type": "url", "urls": u}), {})
      for u in (["http://b.com", "http://a.com"], ["http://a.com"], ["https://a.com", "http://b.com"])],
    *[("chrome", "is_expected_active_tab", browser.is_expected_active_tab, (tab, {"type": "url", "url": u}), {})
      for tab, u in (({"url": "https://www.x.co.uk/p?q=1"}, "https://x.com/p?q=1"),
                     ({"url": "https://x.com/p?q=1"}, "https://x.com/p?q=2"), ("http://x.com/", "http://x.com"))],
    *[("chrome", "is_expected_active_tab_approximate", browser.is_expected_active_tab_approximate,
       ({"url": "https://x.com/p?q=1"}, {"type": "url", "url": u}), {}) for u in ("https://x.com/p?q=2",
                                                                                  "https://y.com/p")],
    *[("chrome", "is_expected_url_pattern_match", browser.is_expected_url_pattern_match,
       ("https://x.com/search?q=cats", {"expected": e}), {}) for e in ([r"q=cats", r"x\.com"], [r"q=dogs"])],
    *[("chrome", "is_expected_bookmarks", browser.is_expected_bookmarks, (ROOTS, rules), {}) for rules in (
        {"type": "bookmark_bar_folders_names", "names": ["Work", "Liked Authors"]},
        {"type": "bookmark_bar_websites_urls", "urls": ["https://news.example"]},
        {"type": "liked_authors_websites_urls", "urls": [["https://a.org/x", "https://a.org/z"], "https://b.org/y"]},
        {"type": "liked_authors_websites_urls", "urls": ["https://a.org/z", "https://b.org/y"]})],
    *[("others", "check_mp3_meta", files.check_mp3_meta, ("song", rules), {}) for rules in (
        {"title": {"method": "eq", "ref": "Missing You"}, "artist": {"method": "eq", "ref": "Cheng Xiang,Guest"}},
        {"artist": {"method": "eq", "ref": "Cheng Xiang"}}, {"album": {"method": "eq", "ref": ""}},
        {"title": {"method": "re", "ref": "^Missing"}})],
    *[("thunderbird", "check_thunderbird_filter", apps.check_thunderbird_filter, ("filters", rules), {})
      for rules in ({"expect": [URGENT]}, {"expect": [{**URGENT, "action": "Delete"}]},
                    {"expect": [URGENT], "unexpect": [{"name": "Spam"}]})],
]


def _resolve(value: Any, inputs: dict[str, Any]) -> Any:
    return inputs[value] if isinstance(value, str) and value in inputs else value


@pytest.mark.parametrize("module, name, ours, args, options", CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_our_judge_scores_as_osworlds(module: str, name: str, ours: Any, args: tuple[Any, ...],
                                      options: dict[str, Any], inputs: dict[str, Any], tmp_path: Path) -> None:
    values = [_resolve(a, inputs) for a in args]
    theirs = getattr(upstream(module), name)(*values, **options)
    mine = ours(*values, **options)
    assert float(mine) == pytest.approx(float(theirs), abs=1e-9), (name, args, mine, theirs)


def test_archives_score_as_osworlds(tmp_path: Path) -> None:
    """compare_archive unpacks beside its inputs: each implementation gets its own copies."""
    def tree(root: Path, texts: dict[str, str]) -> Path:
        for member, text in texts.items():
            (root / member).parent.mkdir(parents=True, exist_ok=True)
            (root / member).write_text(text)
        return root

    notes = {"notes/a.txt": "alpha\n", "notes/b.txt": "beta\n"}
    archives = {
        "gold": shutil.make_archive(str(tmp_path / "gold"), "zip", tree(tmp_path / "g", notes)),
        "same": shutil.make_archive(str(tmp_path / "same"), "gztar", tree(tmp_path / "s", notes)),
        "half": shutil.make_archive(str(tmp_path / "half"), "zip",
                                    tree(tmp_path / "h", {**notes, "notes/b.txt": "g\n"})),
    }
    chrome = upstream("chrome")
    for candidate in ("same", "half"):
        scores = []
        for who, function in (("ours", files.compare_archive), ("theirs", chrome.compare_archive)):
            work = tmp_path / who / candidate
            work.mkdir(parents=True)
            mine, gold = (shutil.copy(archives[k], work) for k in (candidate, "gold"))
            scores.append(float(function(mine, gold, file_path="notes", file_type="text")))
        assert scores[0] == scores[1], (candidate, scores)
