"""Impress checks (OSWorld's names and semantics): the deck (``.pptx``, python-pptx or its XML), LibreOffice's
user settings (``registrymodifications.xcu``) and the accessibility tree.

* ``check_presenter_console_disable(result)`` — the settings turn ``EnablePresenterScreen`` (Impress/Misc/Start)
  to ``false``.
* ``check_auto_saving_time(result, rules)`` — ``AutoSaveTimeIntervall`` (Common/Save/Document) equals
  ``rules['minutes']``.
* ``check_slide_orientation_Portrait(result)`` — slides narrower than tall.
* ``check_transition(result, rules)`` — slide ``rules['slide_idx']`` (0-based) has a transition of
  ``rules['transition_type']`` (e.g. ``dissolve``).
* ``check_page_number_colors(result, rules)`` — the second-to-last solid RGB colour of the first slide master
  (where upstream finds the slide-number placeholder's) is ``rules['color']`` (red / blue / green: that
  channel 50 above both others; black: all three below 50), its channels read as upstream reads them
  (shifted by one hex digit, see ``_channels``).
* ``evaluate_presentation_fill_to_rgb_distance(result, rules)`` — 1 minus the mean over slides of the solid
  background colour's Euclidean RGB distance to ``rules['rgb']`` (normalized by white's distance to black);
  a slide whose background follows the master uses the master's; a non-solid background, or one still at
  ``rules['original_rgb']``, counts as distance 1.
* ``check_image_stretch_and_center(result, expected)`` — the original's first picture (same bytes) on the
  result's first slide is stretched to the slide and centred, each within half an inch.
* ``check_left_panel(result)`` — the accessibility tree has a ``document-frame`` named ``Slides View``.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any, Mapping
from xml.etree import ElementTree

import structlog

log = structlog.get_logger(__name__)

OOR = "{http://openoffice.org/2001/registry}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
HALF_INCH = 457200  # EMU


def _xcu_value(path: str | None, item_path: str, prop_name: str) -> str | None:
    if not path or not Path(path).is_file():
        return None
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as exc:
        log.info("settings are not XML", path=path, error=str(exc))
        return None
    for item in root.iter("item"):
        if item.get(f"{OOR}path") != item_path:
            continue
        for prop in item.iter("prop"):
            if prop.get(f"{OOR}name") == prop_name:
                value = prop.find("value")
                return value.text if value is not None else None
    return None


def check_presenter_console_disable(result: str | None, *_: Any, **__: Any) -> float:
    value = _xcu_value(result, "/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen")
    return float(value is not None and value.lower() == "false")


def check_auto_saving_time(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    value = _xcu_value(result, "/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall")
    if value is None or not isinstance(rules, Mapping):
        return 0.0
    try:
        return float(int(value) == rules.get("minutes"))
    except ValueError:
        return 0.0


def _deck(path: str | None) -> Any:
    if not path or not Path(path).is_file():
        return None
    from pptx import Presentation

    try:
        return Presentation(path)
    except Exception as exc:  # python-pptx raises many kinds for a broken file
        log.info("not a readable .pptx", path=path, error=f"{type(exc).__name__}: {exc}")
        return None


def check_slide_orientation_Portrait(result: str | None, *_: Any, **__: Any) -> float:  # noqa: N802 (upstream name)
    deck = _deck(result)
    return float(deck is not None and deck.slide_width < deck.slide_height)


def _part(path: str | None, name: str) -> ElementTree.Element | None:
    if not path or not Path(path).is_file():
        return None
    try:
        with zipfile.ZipFile(path) as archive, archive.open(name) as part:
            return ElementTree.parse(part).getroot()
    except (KeyError, zipfile.BadZipFile, ElementTree.ParseError, OSError):
        return None


def check_transition(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    if not isinstance(rules, Mapping):
        return 0.0
    root = _part(result, f"ppt/slides/slide{int(rules['slide_idx']) + 1}.xml")
    transition = root.find(f".//{P}transition") if root is not None else None
    return float(transition is not None and transition.find(f".//{P}{rules['transition_type']}") is not None)


def _channels(value: str) -> tuple[int, int, int]:
    """Upstream reads ``val`` as if it were ``#RRGGBB`` (characters 1-2, 3-4, 5-6), but OOXML writes ``RRGGBB``:
    the channels it compares are shifted by one character. Kept, so scores match upstream's."""
    return int(value[1:3], 16), int(value[3:5], 16), int(value[5:7] or "0", 16)


def check_page_number_colors(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    root = _part(result, "ppt/slideMasters/slideMaster1.xml")
    if root is None or not isinstance(rules, Mapping):
        return 0.0
    colours = [e for fill in root.iter(f"{A}solidFill") for e in fill.iter(f"{A}srgbClr")]
    if len(colours) < 2 or not colours[-2].get("val"):
        return 0.0
    r, g, b = _channels(colours[-2].get("val", ""))
    wanted = rules.get("color")
    ok = {"red": r > g + 50 and r > b + 50, "blue": b > g + 50 and b > r + 50, "green": g > r + 50 and g > b + 50,
          "black": r < 50 and g < 50 and b < 50}
    return float(ok.get(wanted, True))


def evaluate_presentation_fill_to_rgb_distance(result: str | None, rules: Mapping[str, Any] | None = None,
                                               **_: Any) -> float:
    from pptx.enum.dml import MSO_FILL

    deck = _deck(result)
    if deck is None or not isinstance(rules, Mapping) or not len(deck.slides):
        return 0.0
    target, original = tuple(rules["rgb"]), rules.get("original_rgb")

    def solid_rgb(fill: Any) -> tuple[int, int, int] | None:
        try:
            return tuple(fill.fore_color.rgb) if fill.type == MSO_FILL.SOLID else None  # type: ignore[return-value]
        except (AttributeError, TypeError):
            return None

    def distance(slide: Any) -> float:
        fill = slide.background.fill
        if fill.type == MSO_FILL.BACKGROUND:  # follows the master
            fill = slide.slide_layout.slide_master.background.fill
        rgb = solid_rgb(fill)
        if rgb is None or (original is not None and list(rgb) == list(original)):
            return 1.0
        return math.dist(rgb, target) / math.dist((255, 255, 255), (0, 0, 0))

    return 1.0 - sum(distance(slide) for slide in deck.slides) / len(deck.slides)


def check_image_stretch_and_center(result: str | None, expected: str | None = None, **_: Any) -> float:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    modified, original = _deck(result), _deck(expected)
    if modified is None or original is None or not len(modified.slides) or not len(original.slides):
        return 0.0
    pictures = [s for s in original.slides[0].shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE]
    if not pictures:
        return 0.0
    blob = pictures[0].image.blob
    moved = [s for s in modified.slides[0].shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE and s.image.blob == blob]
    if not moved:
        return 0.0
    image, width, height = moved[-1], original.slide_width, original.slide_height
    return float(abs(image.width - width) <= HALF_INCH and abs(image.height - height) <= HALF_INCH
                 and abs(image.left - (width - image.width) / 2) <= HALF_INCH
                 and abs(image.top - (height - image.height) / 2) <= HALF_INCH)


def check_left_panel(result: str | None, *_: Any, **__: Any) -> float:
    if not result:
        return 0.0
    try:
        root = ElementTree.fromstring(result)
    except ElementTree.ParseError:
        return 0.0
    return float(any(frame.get("name") == "Slides View" for frame in root.iter("document-frame")))
