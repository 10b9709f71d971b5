"""HTML, EPUB, PDF, spreadsheet-column and plain-result comparisons with OSWorld's names and semantics.

A file that is missing or cannot be read scores 0 (upstream raises for some of these).

* ``check_pdf_pages(result, rules)`` — the PDF's page count compared with ``rules['ref_value']`` by
  ``rules['relation']``, an :mod:`operator` comparison name (``eq``, ``ne``, ``lt``, ``le``, ``gt``, ``ge``).
* ``compare_pdf_images(result, expected)`` — the images each page's resources list (PyMuPDF's
  ``page.get_images(full=True)``, page by page), each the bytes ``extract_image`` gives opened by Pillow (one it
  cannot open is skipped), as upstream: none in either PDF scores 1, different counts 0, otherwise the share of
  pairs whose perceptual hashes (imagehash's ``phash``: grey, 32×32 Lanczos, 2-D DCT-II, the 8×8 low band above
  its median) differ in at most 5 of 64 bits.
* ``compare_htmls(result, expected, ignore_sdnum=False)`` — both files parsed (lxml's HTML parser) into the tree
  BeautifulSoup's ``lxml`` builder makes, walked in document order side by side up to the shorter walk: strings
  must be equal; elements must have the same name, the same stripped text (their text strings, leaving out
  comments and, outside ``script`` / ``style`` / ``template`` / ``rt`` / ``rp`` themselves, those elements'
  strings), and the same attributes (``class``-like ones as token lists; ``sdnum`` left out with
  ``ignore_sdnum``). Whitespace-only strings outside ``pre`` / ``textarea`` count as one newline or space.
* ``compare_epub(result, expected)`` — each EPUB's ``toc.ncx`` (lines holding ``navPoint`` dropped) and
  ``content.opf`` (lines holding ``dc:identifier`` dropped), both at the archive's root, and its ``.html``
  members (line breaks removed, re-serialised pretty-printed by ``lxml.html``), sorted by name and paired in
  order; the sum of the pairs' line-level ``difflib`` ratios over the result's part count. Not a zip: 0.
* ``compare_result_files(result, expected)`` — two text files, stripped: when the gold is a number, 1 if the
  gold text occurs in the result or the result is a number within 1e-4 of it; otherwise 1 when they are equal.
* ``compare_conference_city_in_order(result, rules)`` — cells ``C2:C22`` of the workbook's active sheet, in
  order: each holds its entry of ``rules['expected']`` (a string that must occur in the cell, or a list of
  strings one of which must); a cell that is not text fails.
"""

from __future__ import annotations

import difflib
import io
import operator
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import structlog

from environments.judges.pdfs import require_pymupdf

log = structlog.get_logger(__name__)

_RELATIONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _readable(path: str | None) -> bool:
    return bool(path) and Path(str(path)).is_file()


def check_pdf_pages(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    if not isinstance(rules, Mapping) or rules.get("relation") not in _RELATIONS or "ref_value" not in rules:
        raise ValueError(f"check_pdf_pages: rules need 'relation' (one of {', '.join(_RELATIONS)}) and "
                         f"'ref_value'; got {rules!r}")
    if not _readable(result):
        return 0.0
    try:
        pages = len(PdfReader(str(result)).pages)
    except (PyPdfError, ValueError, OSError) as exc:
        log.info("pdf cannot be read", path=result, error=str(exc))
        return 0.0
    return float(getattr(operator, rules["relation"])(pages, rules["ref_value"]))


def _pdf_images(path: str) -> list[Any]:
    """Every image the pages' resources list, page by page, as Pillow opens PyMuPDF's extracted bytes."""
    import pymupdf
    from PIL import Image

    images = []
    with pymupdf.open(path) as document:
        for page in document:
            for entry in page.get_images(full=True):
                data = document.extract_image(entry[0])["image"]
                try:
                    images.append(Image.open(io.BytesIO(data)))
                except Exception as exc:  # as upstream: an image Pillow cannot open (for any reason) is skipped
                    log.info("pdf image cannot be opened", path=path, page=page.number, error=repr(exc))
    return images


def phash(image: Any) -> Any:
    """imagehash's ``phash`` bits (64 booleans) of a PIL image."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(image.convert("L").resize((32, 32), Image.Resampling.LANCZOS), dtype=float)
    basis = 2 * np.cos(np.pi * np.outer(np.arange(8), 2 * np.arange(32) + 1) / 64)  # DCT-II rows 0-7
    low = basis @ pixels @ basis.T
    return (low > np.median(low)).ravel()


def compare_pdf_images(result: str | None, expected: str | None = None, **_: Any) -> float:
    require_pymupdf("compare_pdf_images")
    if not _readable(result) or not _readable(expected):
        return 0.0
    try:
        mine, gold = _pdf_images(str(result)), _pdf_images(str(expected))
        if len(mine) != len(gold):
            return 0.0
        if not mine:
            return 1.0
        close = sum(int((phash(a) != phash(b)).sum()) <= 5 for a, b in zip(mine, gold))
    except Exception as exc:  # PyMuPDF and Pillow raise many kinds for a broken file (upstream crashes there)
        log.info("pdf images cannot be read", error=repr(exc))
        return 0.0
    return close / len(mine)


_SPACES = " \n\t\x0c\r"
_CONTAINERS = ("rt", "rp", "style", "script", "template")
_TOKEN_ATTRS = {"*": {"class", "accesskey", "dropzone"}, "a": {"rel", "rev"}, "link": {"rel", "rev"},
                "td": {"headers"}, "th": {"headers"}, "form": {"accept-charset"}, "object": {"archive"},
                "area": {"rel"}, "icon": {"sizes"}, "iframe": {"sandbox"}, "output": {"for"}}


@dataclass
class _Node:
    name: str | None  # None: a string
    kind: str = "text"  # a string's kind: text | comment | doctype | pi | a container's name
    value: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    children: list[_Node] = field(default_factory=list)


class _SoupTree:
    """lxml parser target that builds the tree BeautifulSoup's lxml builder would."""

    def __init__(self) -> None:
        self.stack = [_Node("[document]")]
        self.pending: list[str] = []

    def _flush(self, kind: str = "text") -> None:
        if not self.pending:
            return
        text, self.pending = "".join(self.pending), []
        if all(c in _SPACES for c in text) and not any(t.name in ("pre", "textarea") for t in self.stack[1:]):
            text = "\n" if "\n" in text else " "
        containers = [t.name for t in self.stack if t.name in _CONTAINERS]
        if kind == "text" and containers:
            kind = str(containers[-1])
        self.stack[-1].children.append(_Node(None, kind, text))

    def start(self, tag: str, attrib: Mapping[str, str], nsmap: Any = None) -> None:
        self._flush()
        listed = _TOKEN_ATTRS["*"] | _TOKEN_ATTRS.get(tag.lower(), set())
        attrs = {k: (re.findall(r"\S+", v) if k in listed else v) for k, v in attrib.items()}
        node = _Node(tag, attrs=attrs)
        self.stack[-1].children.append(node)
        self.stack.append(node)

    def end(self, tag: str) -> None:
        self._flush()
        if any(t.name == tag for t in self.stack[1:]):
            while self.stack.pop().name != tag:
                pass

    def data(self, text: str) -> None:
        self.pending.append(text)

    def _string(self, text: str, kind: str) -> None:
        self._flush()
        self.pending.append(text)
        self._flush(kind)

    def comment(self, text: str) -> None:
        self._string(text, "comment")

    def pi(self, target: str, data: str) -> None:
        self._string(f"{target} {data}", "pi")

    def doctype(self, name: str | None, public: str | None, system: str | None) -> None:
        value = name or ""
        if public is not None:
            value += f' PUBLIC "{public}"' + (f' "{system}"' if system is not None else "")
        elif system is not None:
            value += f' SYSTEM "{system}"'
        self._string(value, "doctype")

    def close(self) -> _Node:
        self._flush()
        return self.stack[0]


def _soup(path: str) -> _Node:
    from lxml import etree

    text = Path(path).read_text(encoding="utf-8").removeprefix("\N{BYTE ORDER MARK}")
    target = _SoupTree()
    if not text.strip(_SPACES):
        return target.close()  # lxml reports nothing for an empty document
    parser = etree.HTMLParser(target=target, recover=True)
    parser.feed(text)
    return parser.close()


def _walk(node: _Node) -> Iterator[_Node]:
    stack = list(reversed(node.children))
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _text(tag: _Node) -> str:
    kind = tag.name if tag.name in _CONTAINERS else "text"
    return "".join(n.value for n in _walk(tag) if n.name is None and n.kind == kind)


def compare_htmls(result: str | None, expected: str | None = None, *, ignore_sdnum: bool = False,
                  **_: Any) -> float:
    if not _readable(result) or not _readable(expected):
        return 0.0
    try:
        first, second = _soup(str(result)), _soup(str(expected))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        log.info("html cannot be read", error=str(exc))
        return 0.0
    for a, b in zip(_walk(first), _walk(second)):
        if a.name is None or b.name is None:
            if a.name != b.name or a.value != b.value:
                return 0.0
            continue
        if a.name != b.name or _text(a).strip() != _text(b).strip():
            return 0.0
        attrs_a, attrs_b = a.attrs, b.attrs
        if ignore_sdnum:
            attrs_a, attrs_b = ({k: v for k, v in attrs.items() if k != "sdnum"} for attrs in (a.attrs, b.attrs))
        if attrs_a != attrs_b:
            return 0.0
    return 1.0


def _html_lines(data: bytes) -> list[str]:
    import lxml.html
    from lxml.etree import ParserError

    flat = data.decode("utf-8", errors="replace").replace("\n", "").replace("\r", "")
    try:
        tree = lxml.html.fromstring(flat.encode())
    except ParserError:  # an empty document
        return []
    return lxml.html.tostring(tree, pretty_print=True, encoding="unicode").splitlines()


def _epub_parts(path: str) -> list[list[str]]:
    parts: dict[str, list[str]] = {}
    try:
        with zipfile.ZipFile(path) as book:
            names = book.namelist()
            for name, dropped in (("toc.ncx", "navPoint"), ("content.opf", "dc:identifier")):
                if name in names:
                    text = book.read(name).decode("utf-8", errors="replace")
                    parts[name] = [line for line in text.splitlines() if dropped not in line]
            for name in names:
                if name.endswith(".html"):
                    parts[name] = _html_lines(book.read(name))
    except (zipfile.BadZipFile, OSError) as exc:
        log.info("epub cannot be read", path=path, error=str(exc))
        return []
    return [parts[name] for name in sorted(parts)]


def compare_epub(result: str | None, expected: str | None = None, **_: Any) -> float:
    if not _readable(result) or not _readable(expected):
        return 0.0
    mine, gold = _epub_parts(str(result)), _epub_parts(str(expected))
    if not mine:
        return 0.0
    return sum(difflib.SequenceMatcher(None, a, b).ratio() for a, b in zip(mine, gold)) / len(mine)


def compare_result_files(result: str | None, expected: str | None = None, **_: Any) -> float:
    if not _readable(result) or not _readable(expected):
        return 0.0
    try:
        mine, gold = (Path(str(p)).read_text(encoding="utf-8").strip() for p in (result, expected))
    except (OSError, UnicodeDecodeError) as exc:
        log.info("result file cannot be read", error=str(exc))
        return 0.0
    try:
        number = float(gold)
    except ValueError:
        return float(mine == gold)
    if gold in mine:
        return 1.0
    try:
        return float(abs(float(mine) - number) < 1e-4)
    except ValueError:
        return 0.0


def compare_conference_city_in_order(result: str | None, rules: Mapping[str, Any] | None = None,
                                     **_: Any) -> float:
    import openpyxl

    cities = rules.get("expected") if isinstance(rules, Mapping) else None
    if (not isinstance(cities, list) or len(cities) < 21 or not all(
            isinstance(c, str) or (isinstance(c, list) and all(isinstance(s, str) for s in c)) for c in cities)):
        raise ValueError("compare_conference_city_in_order: rules['expected'] must list 21 entries (cells C2:C22), "
                         f"each a string or a list of strings; got {cities!r}")
    if not _readable(result):
        return 0.0
    try:
        sheet = openpyxl.load_workbook(str(result)).active
        cells = [cell.value for row in sheet["C2:C22"] for cell in row]
    except Exception as exc:  # openpyxl raises many kinds for a file that is not a workbook
        log.info("workbook cannot be read", path=result, error=repr(exc))
        return 0.0
    for cell, wanted in zip(cells, cities):
        options = [wanted] if isinstance(wanted, str) else wanted
        if not isinstance(cell, str) or not any(option in cell for option in options):
            return 0.0
    return 1.0
