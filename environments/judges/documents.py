"""Word-processor metrics over ``.docx`` (python-docx) and ``.odt`` (its XML, no extra dependency).

* ``compare_docx_files`` (OSWorld's name) — the text of a result document against the gold document, scored as
  OSWorld scores it (see :func:`compare_docx_files`).
* ``check_document`` — rules on one document: ``contains`` / ``excludes``
  strings, and ``paragraphs`` entries ``{"match": regex, "style": "Heading 1",
  "bold": true, "italic": true, "alignment": "center"}`` that some paragraph
  must satisfy.
* ``compare_document_text`` — the document's text equals a gold text file.
* ``compare_docx_tables`` (OSWorld's name) — the same tables, cell by cell (stripped text).

Where OSWorld's ``compare_docx_files`` reads an ``.odt`` it uses odfpy; this module reads the same paragraphs
from the package's XML (:func:`odfpy_paragraph_texts`). Upstream's behaviour on inputs no task gives is not
mirrored: a ``content.xml`` or ``styles.xml`` that is not well-formed XML is skipped here, where odfpy keeps
whatever paragraphs it parsed before the error, and a :class:`pathlib.Path` is accepted where upstream's suffix
test raises on anything but a string.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence
from xml.etree import ElementTree

import structlog

log = structlog.get_logger(__name__)

_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
_ODF_FO = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
_ODF_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_ODF_MANIFEST = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"


@dataclass
class Paragraph:
    text: str
    style: str | None
    bold: bool
    italic: bool
    alignment: str | None  # left | center | right | justify | None


def load_paragraphs(path: str | Path) -> list[Paragraph]:
    """The paragraphs (headings included) of a ``.docx`` or ``.odt`` file, in order."""
    suffix = Path(path).suffix.lower()
    if suffix == ".docx":
        return _docx_paragraphs(str(path))
    if suffix == ".odt":
        return _odt_paragraphs(str(path))
    if suffix in (".txt", ".md"):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        return [Paragraph(line, None, False, False, None) for line in text.splitlines()]
    raise ValueError(f"document metrics: cannot read {path!r}; supported formats are .docx, .odt and .txt")


def _docx_paragraphs(path: str) -> list[Paragraph]:
    import docx
    from docx.enum.text import WD_ALIGN_PARAGRAPH

    alignments = {
        WD_ALIGN_PARAGRAPH.LEFT: "left",
        WD_ALIGN_PARAGRAPH.CENTER: "center",
        WD_ALIGN_PARAGRAPH.RIGHT: "right",
        WD_ALIGN_PARAGRAPH.JUSTIFY: "justify",
    }
    paragraphs = []
    for p in docx.Document(path).paragraphs:
        runs = [r for r in p.runs if r.text.strip()]
        style_font = p.style.font if p.style is not None else None
        bold = bool(runs) and all(bool(r.bold) or (r.bold is None and bool(style_font and style_font.bold)) for r in runs)
        italic = bool(runs) and all(
            bool(r.italic) or (r.italic is None and bool(style_font and style_font.italic)) for r in runs
        )
        alignment = p.alignment if p.alignment is not None else (
            p.style.paragraph_format.alignment if p.style is not None else None
        )
        paragraphs.append(
            Paragraph(p.text, p.style.name if p.style is not None else None, bold, italic, alignments.get(alignment))
        )
    return paragraphs


def _odt_paragraphs(path: str) -> list[Paragraph]:
    with zipfile.ZipFile(path) as archive:
        content = ElementTree.fromstring(archive.read("content.xml"))
        styles_xml = ElementTree.fromstring(archive.read("styles.xml")) if "styles.xml" in archive.namelist() else None
    styles: dict[str, dict[str, str]] = {}
    for root in (styles_xml, content):
        if root is None:
            continue
        for style in root.iter(f"{{{_ODF_STYLE}}}style"):
            props: dict[str, str] = {"parent": style.get(f"{{{_ODF_STYLE}}}parent-style-name", "")}
            display = style.get(f"{{{_ODF_STYLE}}}display-name")
            if display:
                props["display"] = display
            for child in style:
                for key in ("font-weight", "font-style", "text-align"):
                    value = child.get(f"{{{_ODF_FO}}}{key}")
                    if value:
                        props[key] = value
            styles[style.get(f"{{{_ODF_STYLE}}}name", "")] = props

    def resolve(name: str | None, key: str) -> str | None:
        seen = set()
        while name and name not in seen:
            seen.add(name)
            props = styles.get(name, {})
            if key in props:
                return props[key]
            name = props.get("parent")
        return None

    def visible_name(name: str | None) -> str | None:
        # automatic styles (P1, T2) inherit the user-visible style name from their parent
        seen = set()
        while name and name not in seen:
            seen.add(name)
            props = styles.get(name, {})
            if re.fullmatch(r"[PT]\d+", name) and props.get("parent"):
                name = props["parent"]
                continue
            return props.get("display", name.replace("_20_", " "))
        return None

    body = content.find(f"{{{_ODF_OFFICE}}}body")
    paragraphs = []
    for element in (body.iter() if body is not None else []):
        if element.tag not in (f"{{{_ODF_TEXT}}}p", f"{{{_ODF_TEXT}}}h"):
            continue
        style = element.get(f"{{{_ODF_TEXT}}}style-name")
        text = "".join(element.itertext())
        span_styles = [s.get(f"{{{_ODF_TEXT}}}style-name") for s in element.iter(f"{{{_ODF_TEXT}}}span")]
        weight = resolve(style, "font-weight")
        bold = weight == "bold" or (bool(span_styles) and all(resolve(s, "font-weight") == "bold" for s in span_styles)
                                    and "".join(e.tail or "" for e in element).strip() == ""
                                    and not (element.text or "").strip())
        italic = resolve(style, "font-style") == "italic"
        align = resolve(style, "text-align")
        alignment = {"start": "left", "end": "right"}.get(align or "", align)
        paragraphs.append(Paragraph(text, visible_name(style), bold, italic, alignment))
    return paragraphs


def _load_or_none(path: str | None) -> list[Paragraph] | None:
    if path is None or not Path(path).exists():
        return None
    try:
        return load_paragraphs(path)
    except ValueError:
        raise
    except Exception as exc:  # a corrupt or wrong-format result is a wrong answer
        log.info("document does not load", path=path, error=repr(exc))
        return None


def _norm(text: str, ignore_case: bool) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text.lower() if ignore_case else text


def docx_paragraph_texts(path: str) -> list[str] | None:
    """Each top-level paragraph's text (python-docx's ``Paragraph.text``); None when the file does not load."""
    from docx import Document

    try:
        return [p.text for p in Document(path).paragraphs]
    except Exception as exc:  # noqa: BLE001 - as upstream: python-docx raises many kinds; any means "no document"
        log.info("not a readable .docx", path=path, error=f"{type(exc).__name__}: {exc}")
        return None


def _odf_span_text(span: ElementTree.Element) -> str:
    return (span.text or "") + "".join(child.tail or "" for child in span)


def _odfpy_paragraph_text(paragraph: ElementTree.Element) -> str:
    # OSWorld joins a text:p's own text nodes and the text nodes directly inside its text:span children; text in
    # any other child (links, nested spans, text:s, tabs, line breaks, notes) is dropped.
    parts = [paragraph.text or ""]
    for child in paragraph:
        if child.tag == f"{{{_ODF_TEXT}}}span":
            parts.append(_odf_span_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def odfpy_paragraph_texts(path: str) -> list[str] | None:
    """The texts OSWorld reads from an ``.odt`` (odfpy's ``getElementsByType(P)``): every ``text:p`` (not
    ``text:h``) of ``content.xml`` and then of ``styles.xml`` (headers, footers), each part only where the
    manifest lists it, in document order. None when the package does not open or has no manifest."""
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = ElementTree.fromstring(archive.read("META-INF/manifest.xml"))
            entries = manifest.iter(f"{{{_ODF_MANIFEST}}}file-entry")
            listed = {entry.get(f"{{{_ODF_MANIFEST}}}full-path") for entry in entries}
            parts = [archive.read(name) for name in ("content.xml", "styles.xml")
                     if name in listed and name in archive.namelist()]
    except (OSError, zipfile.BadZipFile, KeyError, ElementTree.ParseError) as exc:
        log.info("not a readable .odt", path=path, error=f"{type(exc).__name__}: {exc}")
        return None
    texts = []
    for part in parts:
        try:
            root = ElementTree.fromstring(part)
        except ElementTree.ParseError as exc:
            log.info("an .odt part is not well-formed XML", path=path, error=str(exc))
            continue
        texts.extend(_odfpy_paragraph_text(p) for p in root.iter(f"{{{_ODF_TEXT}}}p"))
    return texts


def _ratio(first: str, second: str) -> float:
    from rapidfuzz import fuzz

    return fuzz.ratio(first, second) / 100.0


def compare_docx_files(result: str | None, expected: str | None = None, *, ignore_blanks: bool = True,
                       ignore_case: bool = False, ignore_order: bool = False, content_only: bool = False,
                       fuzzy_match: bool = False, delete_empty_lines: bool = False, **_: Any) -> float:
    """OSWorld's ``compare_docx_files``: both files ``.docx`` or both ``.odt`` (any other pair scores 0), compared
    by their paragraph texts.

    ``ignore_order`` sorts the paragraphs and ``delete_empty_lines`` drops blank ones first. ``content_only``
    returns the similarity (rapidfuzz's ratio, 0..1) of the whole texts with every whitespace run made one space.
    Otherwise ``ignore_blanks`` (the default) compares those whole texts once, so a paragraph split in two still
    matches, and ``fuzzy_match`` returns their similarity; with ``ignore_blanks=False`` the paragraph counts must
    agree and paragraphs compare one by one (``fuzzy_match``: the mean similarity). ``ignore_case`` lowers both.
    """
    if not result or not expected:
        return 0.0
    first, second = str(result), str(expected)
    if first.endswith(".docx") and second.endswith(".docx"):
        mine, gold = docx_paragraph_texts(first), docx_paragraph_texts(second)
    elif first.endswith(".odt") and second.endswith(".odt"):
        mine, gold = odfpy_paragraph_texts(first), odfpy_paragraph_texts(second)
    else:
        log.info("compare_docx_files needs two .docx or two .odt files", result=first, expected=second)
        return 0.0
    if mine is None or gold is None:
        return 0.0
    if ignore_order:
        mine, gold = sorted(mine), sorted(gold)
    if delete_empty_lines:
        mine, gold = [p for p in mine if p.strip()], [p for p in gold if p.strip()]
    if content_only or ignore_blanks:
        whole_mine, whole_gold = _norm("\n".join(mine), ignore_case), _norm("\n".join(gold), ignore_case)
        if content_only or fuzzy_match:
            return _ratio(whole_mine, whole_gold)
        return float(whole_mine == whole_gold)
    if len(mine) != len(gold):
        return 0.0
    if ignore_case:
        mine, gold = [p.lower() for p in mine], [p.lower() for p in gold]
    if fuzzy_match:
        return sum(_ratio(a, b) for a, b in zip(mine, gold)) / len(mine) if mine else 1.0
    return float(mine == gold)


def compare_docx_tables(result: str | None, expected: str | None = None, **_: Any) -> float:
    """1 when both ``.docx`` files have the same tables: shapes and every cell's stripped text (OSWorld)."""
    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError

    if not result or not expected or not Path(result).is_file() or not Path(expected).is_file():
        return 0.0
    try:
        tables1, tables2 = Document(result).tables, Document(expected).tables
    except (PackageNotFoundError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        log.info("not a readable docx", error=str(exc))
        return 0.0
    if len(tables1) != len(tables2):
        return 0.0
    for t1, t2 in zip(tables1, tables2):
        if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
            return 0.0
        for i in range(len(t1.rows)):
            for j in range(len(t1.columns)):
                if t1.cell(i, j).text.strip() != t2.cell(i, j).text.strip():
                    return 0.0
    return 1.0


def compare_document_text(result: str | None, expected: str | None = None, *, ignore_case: bool = False,
                          **_: Any) -> float:
    """1 when the document's non-empty paragraphs equal the gold file's non-empty lines (or paragraphs), each with
    its whitespace runs made one space. Any pair of .docx, .odt and .txt files compares."""
    actual, gold = _load_or_none(result), _load_or_none(expected)
    if actual is None or gold is None:
        return 0.0
    mine = [text for text in (_norm(p.text, ignore_case) for p in actual) if text]
    theirs = [text for text in (_norm(p.text, ignore_case) for p in gold) if text]
    return float(mine == theirs)


def _paragraph_matches(p: Paragraph, want: Mapping[str, Any]) -> bool:
    if "match" in want and not re.search(str(want["match"]), p.text):
        return False
    if "text" in want and p.text.strip() != str(want["text"]).strip():
        return False
    if "style" in want and (p.style or "").lower() != str(want["style"]).lower():
        return False
    for key in ("bold", "italic"):
        if key in want and getattr(p, key) != bool(want[key]):
            return False
    if "alignment" in want and (p.alignment or "left") != want["alignment"]:
        return False
    return True


def check_document(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    """1 when the document satisfies every rule (see the module docstring)."""
    paragraphs = _load_or_none(result)
    if paragraphs is None:
        return 0.0
    rules = rules or {}
    full_text = "\n".join(p.text for p in paragraphs)
    contains: Sequence[str] = rules.get("contains", [])
    excludes: Sequence[str] = rules.get("excludes", [])
    if not all(s in full_text for s in contains) or any(s in full_text for s in excludes):
        return 0.0
    for want in rules.get("paragraphs", []):
        if not any(_paragraph_matches(p, want) for p in paragraphs):
            log.info("no paragraph matches", rule=dict(want))
            return 0.0
    if "paragraph_count" in rules:
        count = sum(1 for p in paragraphs if p.text.strip())
        if count != int(rules["paragraph_count"]):
            return 0.0
    return 1.0
