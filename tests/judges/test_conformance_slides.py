"""``compare_pptx_files`` against OSWorld's own (``desktop_env.evaluators.metrics.slides``) on generated decks.

Hypothesis draws a gold deck (slides with a background, speaker notes and shapes: text boxes whose runs carry
font, size, bold, italic, underline, colour and strike-through, paragraphs with alignment, level and bullet
characters, tables, pictures, rectangles, connectors, freeforms, groups and title placeholders) and a result deck
that equals it except where a few drawn values are redrawn (a near miss) or a slide, shape, paragraph or run is
dropped. Both implementations score the pair under each option set the OSWorld tasks pass and must agree. Where
upstream raises (inputs no task gives), ours must score 0.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.dml import MSO_THEME_COLOR
from pptx.enum.shapes import MSO_CONNECTOR, MSO_SHAPE
from pptx.enum.text import MSO_UNDERLINE, PP_ALIGN
from pptx.oxml.ns import qn
from pptx.util import Emu, Pt

from environments.judges.slides import compare_pptx_files
from tests.judges.upstream import metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")

#: the option sets OSWorld's tasks pass to compare_pptx_files (``_note`` comments left out)
TASK_OPTIONS: list[dict[str, Any]] = [
    {},
    {"examine_shape": False},
    {"examine_bullets": False, "examine_shape": False},
    {"examine_modify_height": True, "examine_shape": False},
    {"examine_right_position": True, "examine_shape": False},
    {"examine_shape": False, "examine_table_bottom_position": True},
    {"examine_shape": False, "examine_title_bottom_position": True},
    {"examine_shape": False, "examine_top_position": True},
    {"approximately_tolerance": 0.01, "examine_image_size": True, "examine_shape": False},
    {"examine_alignment": False, "examine_font_name": False, "examine_font_size": False, "examine_shape": False},
    {"examine_alignment": False, "examine_bullets": False, "examine_color_rgb": False, "examine_font_bold": False,
     "examine_font_italic": False, "examine_font_size": False, "examine_font_underline": False,
     "examine_strike_through": False},
]

# Small domains, so that a redrawn value often equals the old one or lies within the 0.5 % / 1 % tolerance, and
# positions straddle the thresholds of the task-specific rules (3600000, 4320000, 1980000 EMU).
LEFTS = (914400, 917000, 4400000, 4572000)
TOPS = (457200, 459000, 1900000, 3700000)
SIZES = (1828800, 1835000, 2743200)
TEXTS = ("Alpha", "Alpha ", "Beta", "", "Product Comparison", "Elaborate on what you want to discuss.")
FONTS = (None, "Arial", "Calibri")
POINTS = (None, 18, 24)  # points (a Pt does not survive deepcopy)
TRISTATE = (None, True, False)
UNDERLINES = (None, True, False, MSO_UNDERLINE.DOUBLE_LINE)
COLOURS = (None, (255, 0, 0), (0, 0, 255), MSO_THEME_COLOR.ACCENT_1)
STRIKES = (None, "sngStrike", "noStrike")
ALIGNMENTS = (None, PP_ALIGN.LEFT, PP_ALIGN.CENTER)
BULLETS = (None, "•", "-")
BACKGROUNDS = (None, RGBColor(255, 255, 255), RGBColor(250, 0, 0))
NOTES = (None, "say hello", "say hello ")
KINDS = ("text", "text", "table", "picture", "rect", "line", "freeform", "group", "title")


class Twin:
    """Draws each value twice: the gold deck's, and the result's -- usually the same, sometimes redrawn."""

    def __init__(self, data: st.DataObject, change: int) -> None:
        self.data, self.change = data, change

    def pick(self, domain: tuple[Any, ...]) -> tuple[Any, Any]:
        gold = self.data.draw(st.sampled_from(domain))
        redraw = self.data.draw(st.integers(0, self.change)) == 0
        return gold, (self.data.draw(st.sampled_from(domain)) if redraw else gold)

    def count(self, low: int, high: int) -> tuple[int, int]:
        """How many items the gold deck has, and the result (now and then one fewer)."""
        n = self.data.draw(st.integers(low, high))
        return n, (n - 1 if n > low and self.data.draw(st.integers(0, self.change * 2)) == 0 else n)


def _pair(items: list[tuple[Any, Any]]) -> tuple[list[Any], list[Any]]:
    return [a for a, _ in items], [b for _, b in items]


def twin_run(t: Twin) -> tuple[dict[str, Any], dict[str, Any]]:
    fields = {"text": TEXTS, "font": FONTS, "size": POINTS, "bold": TRISTATE, "italic": TRISTATE,
              "underline": UNDERLINES, "colour": COLOURS, "strike": STRIKES}
    picked = {k: t.pick(v) for k, v in fields.items()}
    return {k: v[0] for k, v in picked.items()}, {k: v[1] for k, v in picked.items()}


def twin_paragraphs(t: Twin) -> tuple[list[Any], list[Any]]:
    n, m = t.count(1, 2)
    gold, result = [], []
    for i in range(n):
        runs_n, runs_m = t.count(1, 2)
        runs = [twin_run(t) for _ in range(runs_n)]
        align, level, bullet = t.pick(ALIGNMENTS), t.pick((0, 0, 1)), t.pick(BULLETS)
        gold.append({"align": align[0], "level": level[0], "bullet": bullet[0], "runs": [r[0] for r in runs]})
        if i < m:
            result.append({"align": align[1], "level": level[1], "bullet": bullet[1],
                           "runs": [r[1] for r in runs[:runs_m]]})
    return gold, result


def twin_shape(t: Twin) -> tuple[dict[str, Any], dict[str, Any]]:
    kind = t.data.draw(st.sampled_from(KINDS))
    box = [t.pick(LEFTS), t.pick(TOPS), t.pick(SIZES), t.pick(SIZES)]
    gold, result = {"kind": kind, "box": [b[0] for b in box]}, {"kind": kind, "box": [b[1] for b in box]}
    if kind in ("text", "rect", "title"):
        gold["paragraphs"], result["paragraphs"] = twin_paragraphs(t)
    elif kind == "group":
        inner = [twin_paragraphs(t) for _ in range(t.data.draw(st.integers(1, 2)))]
        gold["children"], result["children"] = _pair(inner)
    elif kind == "table":
        rows, cols = t.pick((1, 2)), t.pick((1, 2))
        runs = [twin_run(t) for _ in range(4)]
        gold["table"], result["table"] = (rows[0], cols[0], [r[0] for r in runs]), (rows[1], cols[1], [r[1] for r in runs])
    return gold, result


def twin_deck(t: Twin) -> tuple[list[Any], list[Any]]:
    n, m = t.count(1, 3)
    gold, result = [], []
    for i in range(n):
        background, notes = t.pick(BACKGROUNDS), t.pick(NOTES)
        shapes_n, shapes_m = t.count(0, 3)
        shapes = [twin_shape(t) for _ in range(shapes_n)]
        gold.append({"background": background[0], "notes": notes[0], "shapes": [s[0] for s in shapes]})
        if i < m:
            result.append({"background": background[1], "notes": notes[1], "shapes": [s[1] for s in shapes[:shapes_m]]})
    return gold, result


# -- writing a deck --------------------------------------------------------------------------


def _format_run(run: Any, spec: dict[str, Any]) -> None:
    run.text = spec["text"]
    font = run.font
    font.name, font.size, font.bold, font.italic, font.underline = (
        spec["font"], spec["size"] and Pt(spec["size"]), spec["bold"], spec["italic"], spec["underline"])
    if isinstance(spec["colour"], tuple):
        font.color.rgb = RGBColor(*spec["colour"])
    elif spec["colour"] is not None:
        font.color.theme_color = spec["colour"]
    if spec["strike"] is not None:
        run._r.get_or_add_rPr().set("strike", spec["strike"])


def _fill_text(frame: Any, paragraphs: list[dict[str, Any]]) -> None:
    for index, spec in enumerate(paragraphs):
        paragraph = frame.paragraphs[0] if index == 0 else frame.add_paragraph()
        if spec["align"] is not None:
            paragraph.alignment = spec["align"]
        if spec["level"]:
            paragraph.level = spec["level"]
        if spec["bullet"] is not None:
            paragraph._p.get_or_add_pPr().append(paragraph._p.makeelement(qn("a:buChar"), {"char": spec["bullet"]}))
        for run_spec in spec["runs"]:
            _format_run(paragraph.add_run(), run_spec)


def _add_shape(slide: Any, shapes: Any, spec: dict[str, Any], picture: Path) -> None:
    left, top, width, height = (Emu(v) for v in spec["box"])
    kind = spec["kind"]
    if kind == "text":
        _fill_text(shapes.add_textbox(left, top, width, height).text_frame, spec["paragraphs"])
    elif kind == "rect":
        _fill_text(shapes.add_shape(MSO_SHAPE.RECTANGLE, left, top, width, height).text_frame, spec["paragraphs"])
    elif kind == "title":
        title = slide.shapes.title
        title.left, title.top, title.width, title.height = left, top, width, height
        _fill_text(title.text_frame, spec["paragraphs"])
    elif kind == "picture":
        shapes.add_picture(str(picture), left, top, width, height)
    elif kind == "line":
        shapes.add_connector(MSO_CONNECTOR.STRAIGHT, left, top, left + width, top + height)
    elif kind == "freeform":
        builder = shapes.build_freeform(left, top, scale=1.0)
        builder.add_line_segments([(left + width, top), (left + width, top + height)])
        builder.convert_to_shape()
    elif kind == "group":
        group = shapes.add_group_shape()
        for offset, paragraphs in enumerate(spec["children"]):
            _fill_text(group.shapes.add_textbox(left, top + offset * 10000, width, height).text_frame, paragraphs)
    elif kind == "table":
        rows, cols, runs = spec["table"]
        table = shapes.add_table(rows, cols, left, top, width, height).table
        for index, run_spec in enumerate(runs[: rows * cols]):
            _format_run(table.cell(index // cols, index % cols).text_frame.paragraphs[0].add_run(), run_spec)


def write_deck(path: Path, slides: list[dict[str, Any]], picture: Path) -> str:
    prs = Presentation()
    for spec in slides:
        has_title = any(s["kind"] == "title" for s in spec["shapes"])
        slide = prs.slides.add_slide(prs.slide_layouts[5 if has_title else 6])
        if spec["background"] is not None:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = spec["background"]
        if spec["notes"] is not None:
            slide.notes_slide.notes_text_frame.text = spec["notes"]
        titles = [s for s in spec["shapes"] if s["kind"] == "title"][:1]  # the layout has one title placeholder
        for shape in titles + [s for s in spec["shapes"] if s["kind"] != "title"]:
            _add_shape(slide, slide.shapes, shape, picture)
    prs.save(path)
    return str(path)


# -- the comparison --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Any:
    return metrics_module("slides", STUBS)


@pytest.fixture(scope="module")
def picture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pictures") / "blue.png"
    Image.new("RGB", (40, 30), (10, 120, 200)).save(path)
    return path


def assert_same_score(upstream: Any, result: str, gold: str, options: dict[str, Any]) -> float:
    mine = compare_pptx_files(result, gold, **options)
    try:  # enable_debug only switches upstream's logging off (its default is on, and loud)
        theirs = float(upstream.compare_pptx_files(result, gold, **options, enable_debug=False))
    except Exception:  # noqa: BLE001 (upstream raises on inputs no task gives: ours stays robust and scores 0)
        assert mine == 0.0, options
        return mine
    assert mine == pytest.approx(theirs, abs=1e-6), (options, mine, theirs)
    return mine


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), change=st.sampled_from((4, 12, 40)))
def test_generated_decks_score_as_osworlds(upstream: Any, picture: Path, tmp_path: Path, data: st.DataObject,
                                           change: int) -> None:
    gold_spec, result_spec = twin_deck(Twin(data, change))
    gold = write_deck(tmp_path / "gold.pptx", gold_spec, picture)
    result = write_deck(tmp_path / "result.pptx", result_spec, picture)
    for options in TASK_OPTIONS:
        assert_same_score(upstream, result, gold, options)


def test_a_deck_matches_itself_and_near_misses_fail_as_upstreams(upstream: Any, picture: Path, tmp_path: Path) -> None:
    """Fixed cases that must cover both outcomes, whatever hypothesis draws."""
    run = {"text": "Alpha", "font": "Arial", "size": 18, "bold": True, "italic": None, "underline": None,
           "colour": (255, 0, 0), "strike": None}
    paragraph = {"align": PP_ALIGN.CENTER, "level": 1, "bullet": "•", "runs": [run, {**run, "text": "Beta"}]}
    shapes = [{"kind": "title", "box": [914400, 3700000, 1828800, 1828800], "paragraphs": [
                  {**paragraph, "runs": [{**run, "text": "Product Comparison"}]}]},
              {"kind": "text", "box": [914400, 457200, 1828800, 1828800], "paragraphs": [paragraph]},
              {"kind": "table", "box": [4572000, 3700000, 1828800, 1828800], "table": (1, 2, [run, run])},
              {"kind": "picture", "box": [4572000, 457200, 1828800, 1828800]},
              {"kind": "group", "box": [917000, 459000, 1828800, 1828800], "children": [[paragraph]]}]
    def slide() -> dict[str, Any]:
        return {"background": RGBColor(250, 0, 0), "notes": "say hello", "shapes": copy.deepcopy(shapes)}

    gold = write_deck(tmp_path / "gold.pptx", [slide(), slide(), slide()], picture)
    assert assert_same_score(upstream, gold, gold, {}) == 1.0
    # (edit, score under the default options): the empty run makes upstream's bullet extraction raise, which it
    # takes as "no bullet difference"
    near_misses = {
        "bold": (lambda s: s[1]["paragraphs"][0]["runs"][0].update(bold=False), 0.0),
        "bullet": (lambda s: s[1]["paragraphs"][0].update(bullet="-"), 0.0),
        "bullet beside an empty run": (lambda s: (s[1]["paragraphs"][0].update(bullet="-"),
                                                  s[2]["table"][2][1].update(text="")), 1.0),
        "level": (lambda s: s[1]["paragraphs"][0].update(level=0), 0.0),
        "table colour": (lambda s: s[2]["table"][2][0].update(colour=(0, 0, 255)), 0.0),
        "moved within tolerance": (lambda s: s[3]["box"].__setitem__(0, 4580000), 1.0),
        "moved": (lambda s: s[3]["box"].__setitem__(1, 1900000), 0.0),
        "group alignment": (lambda s: s[4]["children"][0][0].update(align=PP_ALIGN.LEFT), 0.0),
    }
    for name, (edit, expected) in near_misses.items():
        slides = [slide(), slide(), slide()]
        edit(slides[1]["shapes"])
        result = write_deck(tmp_path / "result.pptx", slides, picture)
        gold = write_deck(tmp_path / "gold.pptx", [slide(), slide(), slide()], picture)
        if name == "bullet beside an empty run":  # the gold deck has the empty run too
            slides = [slide(), slide(), slide()]
            slides[1]["shapes"][2]["table"][2][1].update(text="")
            gold = write_deck(tmp_path / "gold.pptx", slides, picture)
        for options in TASK_OPTIONS:
            score = assert_same_score(upstream, result, gold, options)
            if not options:
                assert score == expected, name
