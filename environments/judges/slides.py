"""Presentation metrics over ``.pptx`` (python-pptx): OSWorld's ``compare_pptx_files``.

``compare_pptx_files(result, expected, **options)`` is 1 when the result deck matches the gold deck under
OSWorld's semantics and 0 at the first difference. What is compared, in order (each ``examine_*`` option
switches one check; defaults as upstream):

* the number of slides (``examine_number_of_slides``);
* per slide: the solid background colour, the layout master's when the slide inherits it
  (``examine_background_color``); the speaker notes, stripped (``examine_note``); the number of shapes;
  the number of shapes with a text frame, groups searched (always);
* per shape pair, the position rules of the few tasks that need them (``examine_title_bottom_position``,
  ``examine_table_bottom_position``, ``examine_right_position``, ``examine_top_position``,
  ``examine_shape_for_shift_size``: upstream's thresholds in EMU, slide numbers 1-based), then left / top /
  width / height within a relative ``approximately_tolerance`` (``examine_shape``), ``examine_image_size``
  (pictures: size only) and ``examine_modify_height`` (shapes without text and freeforms: height only);
* tables: the same rows and columns, per cell the same paragraphs and runs, and per run the colour
  (``examine_color_rgb``), bold and italic (unset counts as off) and underline;
* text frames: the stripped text (``examine_text``), the number of paragraphs, per paragraph the alignment
  (unset counts as left; ``examine_alignment``), text, level (``examine_indent``) and number of runs, per run
  font name, size, bold, italic, RGB colour (only when both runs have one), underline, strike-through
  (``examine_*``) and the slide's bullets (level, character, text of each non-empty paragraph;
  ``examine_bullets``). As upstream, the bullets are not compared when either slide has an empty run (an empty
  ``<a:t/>``: upstream's text join raises and its bare ``except`` skips the check);
* with ``examine_alignment``, the alignment of every paragraph of every text frame, groups included.

Scores equal upstream's on generated decks under every option set the tasks pass
(``tests/judges/test_conformance_slides.py``). Where upstream raises on input no task gives, this module scores
0 instead: a missing or unreadable file, a table paired with a shape that is no table, a position or size that
is unset on one side only, and a notes page without a body placeholder (read here as no notes).

Options that start with ``_`` are comments (tasks carry ``_note``); any other unknown option is an error, so a
misspelt check never silently passes.
"""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path
from typing import Any, Iterator, Mapping
from xml.etree import ElementTree

import structlog

log = structlog.get_logger(__name__)

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_SOLID, _INHERITED = 1, 5  # MSO_FILL.SOLID, MSO_FILL.BACKGROUND
_FREEFORM, _PICTURE, _TABLE = 5, 13, 19  # MSO_SHAPE_TYPE


@dataclasses.dataclass(frozen=True)
class Checks:
    number_of_slides: bool = True
    shape: bool = True
    text: bool = True
    indent: bool = True
    font_name: bool = True
    font_size: bool = True
    font_bold: bool = True
    font_italic: bool = True
    color_rgb: bool = True
    font_underline: bool = True
    strike_through: bool = True
    alignment: bool = True
    title_bottom_position: bool = False
    table_bottom_position: bool = False
    right_position: bool = False
    top_position: bool = False
    shape_for_shift_size: bool = False
    image_size: bool = False
    modify_height: bool = False
    bullets: bool = True
    background_color: bool = True
    note: bool = True
    tolerance: float = 0.005

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Checks:
        unknown = unknown_options(options)
        if unknown:
            raise ValueError(f"compare_pptx_files: unknown option(s) {sorted(unknown)}; known: "
                             f"{sorted(_option_names())}")
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key == "approximately_tolerance":
                values["tolerance"] = float(value)
            elif key.startswith("examine_"):
                values[key.removeprefix("examine_")] = bool(value)
        return cls(**values)


def _option_names() -> set[str]:
    return {f"examine_{f.name}" for f in dataclasses.fields(Checks) if f.name != "tolerance"} | {"approximately_tolerance"}


def unknown_options(options: Mapping[str, Any]) -> list[str]:
    """``compare_pptx_files`` options it does not read (``_``-prefixed notes and ``enable_debug`` are ignored, as
    upstream ignores them)."""
    return [key for key in options if not (key.startswith("_") or key == "enable_debug" or key in _option_names())]


class Mismatch(Exception):
    """The first difference found (its message says where)."""


def compare_pptx_files(result: str | None, expected: str | None = None, **options: Any) -> float:
    """1 when the result deck matches the gold deck (see the module docstring), else 0."""
    checks = Checks.from_options(options)
    if not result or not expected:
        return 0.0
    decks = []
    for path in (result, expected):
        deck = _open(path)
        if deck is None:
            return 0.0
        decks.append(deck)
    try:
        _compare(decks[0], decks[1], checks)
    except Mismatch as exc:
        log.debug("pptx decks differ", result=result, expected=expected, where=str(exc))
        return 0.0
    return 1.0


def _open(path: str) -> Any:
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    if not Path(path).is_file():
        return None
    try:
        return Presentation(path)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        log.info("not a readable pptx", path=path, error=str(exc))
        return None


# -- the walk -------------------------------------------------------------------------------


def _compare(deck1: Any, deck2: Any, c: Checks) -> None:
    if c.number_of_slides and len(deck1.slides) != len(deck2.slides):
        raise Mismatch(f"{len(deck1.slides)} slides vs {len(deck2.slides)}")
    for number, (slide1, slide2) in enumerate(zip(deck1.slides, deck2.slides), start=1):
        where = f"slide {number}"
        if c.background_color and _background(slide1) != _background(slide2):
            raise Mismatch(f"{where}: background colour")
        if c.note and _notes(slide1) != _notes(slide2):
            raise Mismatch(f"{where}: speaker notes")
        if len(slide1.shapes) != len(slide2.shapes):
            raise Mismatch(f"{where}: {len(slide1.shapes)} shapes vs {len(slide2.shapes)}")
        bullets = _SlideBullets(slide1, slide2)
        for index, (shape1, shape2) in enumerate(zip(slide1.shapes, slide2.shapes), start=1):
            _compare_shape(shape1, shape2, number, f"{where} shape {index}", c, bullets)
        texts1, texts2 = list(_text_shapes(slide1.shapes)), list(_text_shapes(slide2.shapes))
        if len(texts1) != len(texts2):
            raise Mismatch(f"{where}: {len(texts1)} text frames vs {len(texts2)} (groups included)")
        if c.alignment:
            for index, (shape1, shape2) in enumerate(zip(texts1, texts2), start=1):
                if c.text and shape1.text.strip() != shape2.text.strip():
                    raise Mismatch(f"{where} text frame {index}: text")
                paragraphs1, paragraphs2 = shape1.text_frame.paragraphs, shape2.text_frame.paragraphs
                if len(paragraphs1) != len(paragraphs2):
                    raise Mismatch(f"{where} text frame {index}: paragraph count")
                for p1, p2 in zip(paragraphs1, paragraphs2):
                    if _alignment(p1) != _alignment(p2):
                        raise Mismatch(f"{where} text frame {index}: alignment")


def _compare_shape(s1: Any, s2: Any, slide: int, where: str, c: Checks, bullets: _SlideBullets) -> None:
    same_box = _same_box(s1, s2, c.tolerance)
    text1, text2 = s1.has_text_frame, s2.has_text_frame
    if c.title_bottom_position:
        if text1 and text2 and s1.text == s2.text:
            if s1.text == "Product Comparison" and (s1.top <= s2.top or s1.top < 3600000):
                raise Mismatch(f"{where}: the title is not moved to the bottom")
        elif not same_box:
            raise Mismatch(f"{where}: position or size")
    if c.table_bottom_position:
        if slide == 3 and s1.shape_type == _TABLE and s2.shape_type == _TABLE:
            if s1.top <= s2.top or s1.top < 3600000:
                raise Mismatch(f"{where}: the table is not moved to the bottom")
        elif not same_box:
            raise Mismatch(f"{where}: position or size")
    if c.right_position and slide == 2 and not text1 and not text2:
        if s1.left <= s2.left or s1.left < 4320000:
            raise Mismatch(f"{where}: the shape is not moved to the right")
    if c.top_position and slide == 2 and s1.shape_type == _PICTURE and s2.shape_type == _PICTURE:
        if s1.top >= s2.top or s1.top > 1980000:
            raise Mismatch(f"{where}: the picture is not moved to the top")
    if c.shape_for_shift_size and not same_box:
        if not (text1 and text2 and s1.text == s2.text == "Elaborate on what you want to discuss."):
            raise Mismatch(f"{where}: position or size")
    if c.shape and not same_box:
        raise Mismatch(f"{where}: position or size")
    if c.image_size:
        if s1.shape_type == _PICTURE and s2.shape_type == _PICTURE:
            if not (_close(s1.width, s2.width, c.tolerance) and _close(s1.height, s2.height, c.tolerance)):
                raise Mismatch(f"{where}: picture size")
        elif not same_box:
            raise Mismatch(f"{where}: position or size")
    if c.modify_height:
        if (not text1 and not text2) or (s1.shape_type == _FREEFORM and s2.shape_type == _FREEFORM):
            if not _close(s1.height, s2.height, c.tolerance):
                raise Mismatch(f"{where}: height")
        elif not same_box:
            raise Mismatch(f"{where}: position or size")
    if s1.shape_type == _TABLE:
        _compare_table(s1, s2, where, c)
    if text1 and text2:
        _compare_text_frame(s1, s2, where, c, bullets)


def _compare_table(s1: Any, s2: Any, where: str, c: Checks) -> None:
    if not getattr(s2, "has_table", False):
        raise Mismatch(f"{where}: a table vs a shape that is none")
    t1, t2 = s1.table, s2.table
    if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
        raise Mismatch(f"{where}: table size")
    for row in range(len(t1.rows)):
        for col in range(len(t1.columns)):
            cell = f"{where} cell [{row},{col}]"
            paragraphs1, paragraphs2 = t1.cell(row, col).text_frame.paragraphs, t2.cell(row, col).text_frame.paragraphs
            if len(paragraphs1) != len(paragraphs2):
                raise Mismatch(f"{cell}: paragraph count")
            for p1, p2 in zip(paragraphs1, paragraphs2):
                if len(p1.runs) != len(p2.runs):
                    raise Mismatch(f"{cell}: run count")
                for r1, r2 in zip(p1.runs, p2.runs):
                    f1, f2 = r1.font, r2.font
                    if c.color_rgb and _colours_differ(f1, f2):
                        raise Mismatch(f"{cell}: font colour")
                    if bool(f1.bold) != bool(f2.bold) or bool(f1.italic) != bool(f2.italic):
                        raise Mismatch(f"{cell}: bold or italic")
                    if _underlines_differ(f1.underline, f2.underline):
                        raise Mismatch(f"{cell}: underline")


def _compare_text_frame(s1: Any, s2: Any, where: str, c: Checks, bullets: _SlideBullets) -> None:
    if c.text and s1.text.strip() != s2.text.strip():
        raise Mismatch(f"{where}: text {s1.text.strip()!r} vs {s2.text.strip()!r}")
    paragraphs1, paragraphs2 = s1.text_frame.paragraphs, s2.text_frame.paragraphs
    if len(paragraphs1) != len(paragraphs2):
        raise Mismatch(f"{where}: paragraph count")
    for number, (p1, p2) in enumerate(zip(paragraphs1, paragraphs2), start=1):
        at = f"{where} paragraph {number}"
        if c.alignment and _alignment(p1) != _alignment(p2):
            raise Mismatch(f"{at}: alignment")
        if c.text and p1.text != p2.text:
            raise Mismatch(f"{at}: text")
        if c.indent and p1.level != p2.level:
            raise Mismatch(f"{at}: level")
        if len(p1.runs) != len(p2.runs):
            raise Mismatch(f"{at}: run count")
        for r1, r2 in zip(p1.runs, p2.runs):
            f1, f2 = r1.font, r2.font
            if c.font_name and f1.name != f2.name:
                raise Mismatch(f"{at}: font name {f1.name!r} vs {f2.name!r}")
            if c.font_size and f1.size != f2.size:
                raise Mismatch(f"{at}: font size")
            if c.font_bold and bool(f1.bold) != bool(f2.bold):
                raise Mismatch(f"{at}: bold")
            if c.font_italic and bool(f1.italic) != bool(f2.italic):
                raise Mismatch(f"{at}: italic")
            if c.color_rgb and _colours_differ(f1, f2):
                raise Mismatch(f"{at}: font colour")
            if c.font_underline and _underlines_differ(f1.underline, f2.underline):
                raise Mismatch(f"{at}: underline")
            if c.strike_through and _strike(r1) != _strike(r2):
                raise Mismatch(f"{at}: strike-through")
            if c.bullets and not bullets.same():
                raise Mismatch(f"{at}: the slide's bullets")


# -- properties -------------------------------------------------------------------------------


def _close(a: Any, b: Any, tolerance: float) -> bool:
    if a == b:
        return True
    if a is None or b is None or a == 0 or b == 0:
        return False
    return abs(a - b) / max(abs(a), abs(b)) <= tolerance


def _same_box(s1: Any, s2: Any, tolerance: float) -> bool:
    return all(_close(getattr(s1, k), getattr(s2, k), tolerance) for k in ("left", "top", "width", "height"))


def _background(slide: Any) -> Any:
    fill = slide.background.fill
    if fill.type == _SOLID:
        return fill.fore_color.rgb
    if fill.type == _INHERITED:
        master = slide.slide_layout.slide_master.background.fill
        return master.fore_color.rgb if master.type == _SOLID else None
    return None


def _notes(slide: Any) -> str:
    frame = slide.notes_slide.notes_text_frame if slide.has_notes_slide else None
    return frame.text.strip() if frame is not None else ""  # a notes page without a body: no notes


def _alignment(paragraph: Any) -> Any:
    from pptx.enum.text import PP_ALIGN

    return paragraph.alignment if paragraph.alignment is not None else PP_ALIGN.LEFT


def _rgb(font: Any) -> Any:
    try:
        return font.color.rgb
    except AttributeError:  # no colour, or a theme colour: nothing to compare
        return None


def _colours_differ(f1: Any, f2: Any) -> bool:
    a, b = _rgb(f1), _rgb(f2)
    return a is not None and b is not None and a != b


def _underlines_differ(u1: Any, u2: Any) -> bool:
    if u1 == u2:
        return False
    return (u1 is not None and u2 is not None) or u1 is True or u2 is True


def _strike(run: Any) -> str:
    rPr = run._r.rPr  # noqa: N806 (the XML element's name)
    return rPr.get("strike", "noStrike") if rPr is not None else "noStrike"


def _text_shapes(shapes: Any) -> Iterator[Any]:
    for shape in shapes:
        if shape.has_text_frame:
            yield shape
        if getattr(shape, "shape_type", None) == 6:  # MSO_SHAPE_TYPE.GROUP
            yield from _text_shapes(shape.shapes)


class _SlideBullets:
    """The bullets of the two slides (level, character, text of each non-empty paragraph), compared once."""

    def __init__(self, slide1: Any, slide2: Any) -> None:
        self.slides = (slide1, slide2)
        self._same: bool | None = None

    def same(self) -> bool:
        if self._same is None:
            a, b = (_bullets(s.part.blob) for s in self.slides)
            # upstream skips the comparison when either slide's XML does not read (its ``except`` takes all)
            self._same = a is None or b is None or a == b
        return self._same


def _bullets(xml: bytes) -> list[tuple[str, str | None, str]] | None:
    """(level, bullet character, text) of each paragraph with non-blank text; None where upstream's extraction
    raises: XML that does not parse, or an empty ``<a:t/>`` (an empty run) in any paragraph of the slide."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return None
    out = []
    for paragraph in root.iter(f"{_A}p"):
        pieces = [t.text for t in paragraph.iter(f"{_A}t")]
        if None in pieces:
            return None
        text = "".join(pieces)  # type: ignore[arg-type]
        if not text.strip():
            continue
        properties = paragraph.find(f"{_A}pPr")
        if properties is None:
            level, char = "No Level", "No Bullet"
        else:
            level = properties.get("lvl", "0")  # an absent level counts as 0, an empty one stays empty
            bullet = properties.find(f"{_A}buChar")
            char = bullet.get("char") if bullet is not None else "No Bullet"
        out.append((level, char, text))
    return out
