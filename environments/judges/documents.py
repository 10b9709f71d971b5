"""Word-processor metrics over ``.docx`` (python-docx) and ``.odt`` (its XML, no extra dependency).

* ``compare_docx_files`` (OSWorld's name) — same paragraph text as the gold file.
* ``check_document`` — rules on one document: ``contains`` / ``excludes``
  strings, and ``paragraphs`` entries ``{"match": regex, "style": "Heading 1",
  "bold": true, "italic": true, "alignment": "center"}`` that some paragraph
  must satisfy.
* ``compare_document_text`` — the document's text equals a gold text file.
* ``compare_docx_tables`` (OSWorld's name) — the same tables, cell by cell (stripped text).
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


def _norm(text: str, ignore_blanks: bool, ignore_case: bool) -> str:
    if ignore_blanks:
        text = re.sub(r"\s+", " ", text).strip()
    return text.lower() if ignore_case else text


def compare_docx_files(result: str | None, expected: str | None = None, *, ignore_blanks: bool = True,
                       ignore_case: bool = False, ignore_order: bool = False, content_only: bool = False,
                       **_: Any) -> float:
    """1 when both documents have the same non-empty paragraphs (text only)."""
    actual, gold = _load_or_none(result), _load_or_none(expected)
    if actual is None or gold is None:
        return 0.0
    a = [_norm(p.text, ignore_blanks, ignore_case) for p in actual]
    b = [_norm(p.text, ignore_blanks, ignore_case) for p in gold]
    if ignore_blanks:
        a, b = [t for t in a if t], [t for t in b if t]
    if content_only:
        return float(_norm(" ".join(a), True, ignore_case) == _norm(" ".join(b), True, ignore_case))
    if ignore_order:
        a, b = sorted(a), sorted(b)
    return float(a == b)


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
    """1 when the document's non-empty paragraphs equal the gold text file's non-empty lines."""
    return compare_docx_files(result, expected, ignore_blanks=True, ignore_case=ignore_case)


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
