"""More Writer / LibreOffice checks with OSWorld's names and semantics (``.docx``, ``.odt``, ``.xcu``).

Where a check first requires "the same text" as the gold document it calls
:func:`environments.judges.documents.compare_docx_files` with its defaults, as upstream calls its own. A file
that cannot be read scores 0.

* ``check_highlighted_words(result, expected)`` — same text as the gold ``.odt``; then 1 when no ``text:span``
  of the result (``content.xml`` or ``styles.xml``) names an automatic style with a property element whose
  ``fo:background-color`` is ``#ffff00`` (LibreOffice's yellow highlight), else 0.
* ``find_default_font(result, rules)`` — in ``registrymodifications.xcu``, the last ``value`` of property
  ``Standard`` under the item whose ``oor:path`` is ``/org.openoffice.Office.Writer/DefaultFont`` equals
  ``rules['font_name']``.
* ``compare_unique_train_records(result, [gold, original])`` — a document's "lines" are its non-empty stripped
  paragraphs; a line of exactly four comma-separated fields gives a train id (the second field, stripped). 1
  when every result line is a line of the original, no train id repeats in the result, the result's ids are
  the gold's (as sets) and the result has as many lines as the gold.
* ``evaluate_colored_words_in_tables(result, expected, threshold=3.5)`` — same text; every run with text in a
  table cell is red when its first letter is a vowel (``aeiou``, any case) and blue otherwise: the CIEDE2000
  difference (sRGB to CIELAB, D65 / 2°) between the run's colour and pure red / blue is at most ``threshold``.
* ``compare_docx_files_and_ignore_new_lines(result, expected, ignore_blanks=True)`` — both ``.docx``; paragraphs
  whose text is empty dropped; with ``ignore_blanks`` the paragraphs joined by newlines, whitespace runs made one
  space and the ends stripped must be equal, else the same paragraphs one by one.
* ``compare_references(result, expected, reference_indicator='References', reference_base_result=0.5)`` — both
  ``.docx``; the first paragraph equal to ``reference_indicator`` starts each reference list (the non-blank
  paragraphs after it). Neither document has one: 1; only one has: 0; lists of different lengths: 0; else the
  mean rapidfuzz ratio / 100 of paired references, ``m``, scores ``(m - base) / (1 - base)`` when
  ``m >= base + 0.01`` and 0 otherwise (two empty lists score 1).
* ``fuzzy_place_math(result, rules)`` — the ``.docx``'s whitespace-separated words must be exactly three; each
  scores its best rapidfuzz ratio / 100 against the strings of ``rules['expected']``; the score is their mean.
"""

from __future__ import annotations

import math
import re
import zipfile
from typing import Any, Mapping, Sequence
from xml.etree import ElementTree

import structlog

from environments.judges.docx_format import open_docx
from environments.judges.documents import compare_docx_files

log = structlog.get_logger(__name__)

_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_FO = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_OOR = "http://openoffice.org/2001/registry"


def _rules(name: str, rules: Any, key: str) -> Any:
    if not isinstance(rules, Mapping) or key not in rules:
        raise ValueError(f"{name}: the expected rules must be a mapping with {key!r} (got {rules!r})")
    return rules[key]


def check_highlighted_words(result: str | None, expected: str | None = None, **_: Any) -> float:
    if not result or not expected or not compare_docx_files(result, expected):
        return 0.0
    try:
        with zipfile.ZipFile(result) as package:
            parts = [ElementTree.fromstring(package.read(name)) for name in ("content.xml", "styles.xml")
                     if name in package.namelist()]
    except (zipfile.BadZipFile, ElementTree.ParseError, OSError) as exc:
        log.info("not a readable ODF document", path=result, error=str(exc))
        return 0.0
    if not parts:
        return 0.0
    highlighted: set[str] = set()
    for part in parts:
        for styles in part.iter(f"{{{_OFFICE}}}automatic-styles"):
            for style in styles:
                if any(prop.get(f"{{{_FO}}}background-color") == "#ffff00" for prop in style):
                    highlighted.add(style.get(f"{{{_STYLE}}}name", ""))
    spans = (span.get(f"{{{_TEXT}}}style-name") for part in parts for span in part.iter(f"{{{_TEXT}}}span"))
    return 0.0 if any(name and name in highlighted for name in spans) else 1.0


def find_default_font(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    expected = _rules("find_default_font", rules, "font_name")
    if not result:
        return 0.0
    font = None
    try:
        root = ElementTree.parse(result).getroot()
        for item in root.iterfind(".//item"):
            if item.get(f"{{{_OOR}}}path") != "/org.openoffice.Office.Writer/DefaultFont":
                continue
            for prop in item.iterfind(".//prop"):
                if prop.get(f"{{{_OOR}}}name") == "Standard":
                    for value in prop.iterfind("value"):
                        font = value.text
    except (ElementTree.ParseError, OSError) as exc:
        log.info("settings file not readable", path=result, error=str(exc))
    return float(font == expected)


def _lines_and_ids(path: str) -> tuple[list[str], list[str]] | None:
    document = open_docx(path)
    if document is None:
        return None
    lines = [p.text.strip() for p in document.paragraphs if p.text.strip()]
    return lines, [line.split(",")[1].strip() for line in lines if len(line.split(",")) == 4]


def compare_unique_train_records(result: str | None, expected: Sequence[str | None] | None = None,
                                 **_: Any) -> float:
    if not isinstance(expected, (list, tuple)) or len(expected) < 2:
        raise ValueError("compare_unique_train_records: expected must be a list [gold .docx, original .docx] "
                         f"(a cloud_file getter with two paths); got {expected!r}")
    if not result or not expected[0] or not expected[1]:
        return 0.0
    mine, gold, original = (_lines_and_ids(path) for path in (result, expected[0], expected[1]))
    if mine is None or gold is None or original is None:
        return 0.0
    (lines, ids), (gold_lines, gold_ids) = mine, gold
    return float(set(lines) <= set(original[0]) and len(ids) == len(set(ids)) and set(ids) == set(gold_ids)
                 and len(lines) == len(gold_lines))


def _lab(rgb: Sequence[int]) -> tuple[float, float, float]:
    """sRGB (0-255) to CIELAB under D65 / 2°, with scikit-image's constants."""
    linear = [((c / 255 + 0.055) / 1.055) ** 2.4 if c / 255 > 0.04045 else c / 255 / 12.92 for c in rgb]
    matrix = ((0.412453, 0.357580, 0.180423), (0.212671, 0.715160, 0.072169), (0.019334, 0.119193, 0.950227))
    xyz = [sum(m * c for m, c in zip(row, linear)) / white for row, white in zip(matrix, (0.95047, 1.0, 1.08883))]
    f = [math.cbrt(v) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e_ciede2000(rgb1: Sequence[int], rgb2: Sequence[int]) -> float:
    """CIEDE2000 colour difference of two sRGB colours (as ``skimage.color.deltaE_ciede2000`` of their Lab)."""
    (l1, a1, b1), (l2, a2, b2) = _lab(rgb1), _lab(rgb2)
    c7 = (0.5 * (math.hypot(a1, b1) + math.hypot(a2, b2))) ** 7
    scale = 1 + 0.5 * (1 - math.sqrt(c7 / (c7 + 25 ** 7)))
    c1, c2 = math.hypot(a1 * scale, b1), math.hypot(a2 * scale, b2)
    h1, h2 = (math.atan2(b, a * scale) % (2 * math.pi) for a, b in ((a1, b1), (a2, b2)))
    lbar = (l1 + l2) / 2
    l_term = (l2 - l1) / (1 + 0.015 * (lbar - 50) ** 2 / math.sqrt(20 + (lbar - 50) ** 2))
    cbar = (c1 + c2) / 2
    c_term = (c2 - c1) / (1 + 0.045 * cbar)
    h_diff, h_sum, cc = h2 - h1, h1 + h2, c1 * c2
    d_h = 0.0 if cc == 0 else h_diff - 2 * math.pi * (h_diff > math.pi) + 2 * math.pi * (h_diff < -math.pi)
    if cc == 0:
        hbar = h_sum
    elif abs(h_diff) > math.pi:
        hbar = (h_sum + (2 * math.pi if h_sum < 2 * math.pi else -2 * math.pi)) / 2
    else:
        hbar = h_sum / 2
    t = (1 - 0.17 * math.cos(hbar - math.radians(30)) + 0.24 * math.cos(2 * hbar)
         + 0.32 * math.cos(3 * hbar + math.radians(6)) - 0.20 * math.cos(4 * hbar - math.radians(63)))
    h_term = 2 * math.sqrt(cc) * math.sin(d_h / 2) / (1 + 0.015 * cbar * t)
    c7 = cbar ** 7
    rotation = math.radians(30) * math.exp(-(((math.degrees(hbar) - 275) / 25) ** 2))
    r_term = -math.sin(2 * rotation) * 2 * math.sqrt(c7 / (c7 + 25 ** 7)) * c_term * h_term
    return math.sqrt(max(l_term ** 2 + c_term ** 2 + h_term ** 2 + r_term, 0.0))


def evaluate_colored_words_in_tables(result: str | None, expected: str | None = None, *, threshold: float = 3.5,
                                     **_: Any) -> float:
    if not result or not expected or not compare_docx_files(result, expected):
        return 0.0
    document = open_docx(result)
    if document is None:
        return 0.0
    for table in document.tables:
        for row in table.rows:
            for cell in row.cells:
                for run in (run for paragraph in cell.paragraphs for run in paragraph.runs if run.text):
                    wanted = (255, 0, 0) if run.text[0].lower() in "aeiou" else (0, 0, 255)
                    colour = run.font.color.rgb
                    if colour is None or delta_e_ciede2000(tuple(colour), wanted) > float(threshold):
                        return 0.0
    return 1.0


def _paragraph_texts(result: str | None, expected: str | None) -> tuple[list[str], list[str]] | None:
    if not result or not expected or not (result.endswith(".docx") and expected.endswith(".docx")):
        return None
    first, second = open_docx(result), open_docx(expected)
    if first is None or second is None:
        return None
    return [p.text for p in first.paragraphs], [p.text for p in second.paragraphs]


def compare_docx_files_and_ignore_new_lines(result: str | None, expected: str | None = None, *,
                                            ignore_blanks: bool = True, **_: Any) -> float:
    texts = _paragraph_texts(result, expected)
    if texts is None:
        return 0.0
    mine, gold = ([t for t in side if t != ""] for side in texts)
    if ignore_blanks:
        return float(re.sub(r"\s+", " ", "\n".join(mine)).strip() == re.sub(r"\s+", " ", "\n".join(gold)).strip())
    return float(mine == gold)


def compare_references(result: str | None, expected: str | None = None, *, reference_indicator: str = "References",
                       reference_base_result: float = 0.5, **_: Any) -> float:
    from rapidfuzz import fuzz

    base = float(reference_base_result)
    if not 0 <= base < 1:
        raise ValueError(f"compare_references: reference_base_result must be in [0, 1), got {base}")
    texts = _paragraph_texts(result, expected)
    if texts is None:
        return 0.0
    starts = [side.index(reference_indicator) if reference_indicator in side else -1 for side in texts]
    if starts == [-1, -1]:
        return 1.0
    if -1 in starts:
        return 0.0
    mine, gold = ([p for p in side[start + 1:] if p.strip()] for side, start in zip(texts, starts))
    if len(mine) != len(gold):
        return 0.0
    if not mine:
        return 1.0
    mean = sum(fuzz.ratio(a, b) / 100 for a, b in zip(mine, gold)) / len(mine)
    return (mean - base) / (1 - base) if mean >= base + 0.01 else 0.0


def fuzzy_place_math(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    from rapidfuzz import fuzz

    answers = _rules("fuzzy_place_math", rules, "expected")
    if isinstance(answers, str) or not isinstance(answers, Sequence) or not all(isinstance(a, str) for a in answers):
        raise ValueError(f"fuzzy_place_math: rules['expected'] must be a list of strings, got {answers!r}")
    document = open_docx(result)
    if document is None:
        return 0.0
    words = [word for paragraph in document.paragraphs for word in paragraph.text.split()]
    if len(words) != 3:
        return 0.0
    return sum(max([fuzz.ratio(word, answer) / 100 for answer in answers], default=0.0) for word in words) / 3
