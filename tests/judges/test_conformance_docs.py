"""``compare_docx_files`` against OSWorld's own (``desktop_env.evaluators.metrics.docs``) on generated documents.

Hypothesis writes a gold document, edits a copy the way a result drifts from its gold (a paragraph split or
merged, blank paragraphs, another case, another order, one character changed, trailing blanks) and picks the
options; both implementations must score the pair the same, within 1e-6. ``.docx`` files come from python-docx,
``.odt`` files are written by hand with the markup LibreOffice uses (spans, nested spans, ``text:s``, tabs, links,
headings, a table, a page header), which upstream reads with odfpy.
"""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import docx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.judges import docx_format
from environments.judges.documents import compare_docx_files
from tests.judges.upstream import metrics_module

#: third-party modules upstream's docs module imports that compare_docx_files never calls
STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")
OPTIONS = ("ignore_blanks", "ignore_case", "ignore_order", "content_only", "fuzzy_match", "delete_empty_lines")
ODF = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "fo": "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0",
}
NAMESPACES = " ".join(f'xmlns:{prefix}="{uri}"' for prefix, uri in ODF.items())


def theirs() -> Callable[..., Any]:
    return metrics_module("docs", STUBS).compare_docx_files


def assert_same_score(result: str | None, expected: str | None, options: dict[str, Any]) -> None:
    want = float(theirs()(result, expected, **options))
    got = compare_docx_files(result, expected, **options)
    assert got == pytest.approx(want, abs=1e-6), (options, got, want)


# --- documents ---------------------------------------------------------------------------------------------------

def write_docx(path: Path, paragraphs: Sequence[str]) -> str:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)  # python-docx writes "\t" as <w:tab/> and "\n" as <w:br/>
    document.save(str(path))
    return str(path)


#: a paragraph's markup: (kind, text) pieces; upstream reads only the plain and span pieces
Piece = tuple[str, str]


def _piece_xml(kind: str, text: str) -> str:
    text = escape(text)
    return {
        "plain": text,
        "span": f'<text:span text:style-name="T1">{text}</text:span>',
        "nested": f"<text:span>a<text:span>{text}</text:span>{text}</text:span>",
        "link": f'<text:a xlink:href="https://example.org" xmlns:xlink="http://www.w3.org/1999/xlink">{text}</text:a>',
        "space": f'<text:s text:c="{len(text) + 1}"/>',
        "tab": "<text:tab/>",
        "break": "<text:line-break/>",
    }[kind]


def write_odt(path: Path, paragraphs: Sequence[Sequence[Piece]], *, heading: str | None = None,
              table_cell: str | None = None, header: str | None = None, manifest: bool = True) -> str:
    body = "".join(f'<text:p text:style-name="P1">{"".join(_piece_xml(*piece) for piece in pieces)}</text:p>'
                   for pieces in paragraphs)
    if heading is not None:
        body = f'<text:h text:outline-level="1">{escape(heading)}</text:h>{body}'
    if table_cell is not None:
        body += (f'<table:table table:name="T"><table:table-column/><table:table-row><table:table-cell>'
                 f"<text:p>{escape(table_cell)}</text:p></table:table-cell></table:table-row></table:table>")
    content = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {NAMESPACES} office:version="1.3">'
               '<office:automatic-styles><style:style style:name="P1" style:family="paragraph"/>'
               '<style:style style:name="T1" style:family="text"><style:text-properties fo:font-weight="bold"/>'
               "</style:style></office:automatic-styles>"
               f"<office:body><office:text>{body}</office:text></office:body></office:document-content>")
    page_header = f"<style:header><text:p>{escape(header)}</text:p></style:header>" if header is not None else ""
    styles = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-styles {NAMESPACES} office:version="1.3">'
              '<office:master-styles><style:master-page style:name="Standard">'
              f"{page_header}</style:master-page></office:master-styles></office:document-styles>")
    entries = "".join(f'<manifest:file-entry manifest:full-path="{name}" manifest:media-type="text/xml"/>'
                      for name in ("content.xml", "styles.xml"))
    listing = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
               'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">'
               '<manifest:file-entry manifest:full-path="/" '
               f'manifest:media-type="application/vnd.oasis.opendocument.text"/>{entries}</manifest:manifest>')
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("mimetype", "application/vnd.oasis.opendocument.text", compress_type=zipfile.ZIP_STORED)
        if manifest:
            package.writestr("META-INF/manifest.xml", listing)
        package.writestr("content.xml", content)
        package.writestr("styles.xml", styles)
    return str(path)


# --- how a result drifts from its gold ---------------------------------------------------------------------------

def _edit(paragraphs: list[str], kind: str, at: int, where: int) -> list[str]:
    out = list(paragraphs)
    if not out:
        return [""] if kind == "blank" else out
    i = at % len(out)
    text = out[i]
    cut = where % (len(text) + 1)
    if kind == "split":
        out[i:i + 1] = [text[:cut], text[cut:]]
    elif kind == "merge" and i + 1 < len(out):
        out[i:i + 2] = [out[i] + " " + out[i + 1]]
    elif kind == "blank":
        out.insert(i, " " * (where % 3))
    elif kind == "case":
        out[i] = text.swapcase()
    elif kind == "swap" and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], out[i]
    elif kind == "typo" and text:
        out[i] = text[:cut] + ("x" if text[cut - 1:cut] != "x" else "y") + text[cut:]
    elif kind == "trailing":
        out[i] = text + " \t"[where % 2]
    return out


EDITS = st.lists(st.tuples(st.sampled_from(["split", "merge", "blank", "case", "swap", "typo", "trailing"]),
                           st.integers(0, 50), st.integers(0, 50)), max_size=3)
TEXT = st.text(alphabet="aAbB .,\t\n", max_size=10)
#: each option absent (upstream's default), on or off
CHOSEN_OPTIONS = st.fixed_dictionaries({}, optional={name: st.booleans() for name in OPTIONS})


def drift(gold: list[str], edits: list[tuple[str, int, int]]) -> list[str]:
    for kind, at, where in edits:
        gold = _edit(gold, kind, at, where)
    return gold


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gold=st.lists(TEXT, max_size=6), edits=EDITS, options=CHOSEN_OPTIONS)
def test_docx_pairs_score_as_upstream(gold: list[str], edits: list[tuple[str, int, int]],
                                      options: dict[str, bool]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        expected = write_docx(Path(folder) / "gold.docx", gold)
        result = write_docx(Path(folder) / "result.docx", drift(gold, edits))
        assert_same_score(result, expected, options)


PIECES = st.lists(st.tuples(st.sampled_from(["plain", "span", "nested", "link", "space", "tab", "break"]),
                            st.text(alphabet="aAb <&", max_size=5)), max_size=4)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gold=st.lists(PIECES, max_size=5), result=st.lists(PIECES, max_size=5), options=CHOSEN_OPTIONS,
       extras=st.fixed_dictionaries({}, optional={"heading": TEXT, "table_cell": TEXT, "header": TEXT}),
       same=st.booleans())
def test_odt_pairs_score_as_upstream(gold: list[list[Piece]], result: list[list[Piece]], options: dict[str, bool],
                                     extras: dict[str, str], same: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        expected = write_odt(Path(folder) / "gold.odt", gold)
        # half the results carry the gold's paragraphs plus markup upstream reads partly or not at all
        candidate = write_odt(Path(folder) / "result.odt", gold if same else result, **extras)
        assert_same_score(candidate, expected, options)


# --- cases named by the differences a reviewer found -------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("docs")
    made = {
        "gold": write_docx(root / "gold.docx", ["Dear team,", "The launch moves to May.", "Regards"]),
        "split": write_docx(root / "split.docx", ["Dear team,", "The launch moves", "to May.", "Regards"]),
        "blank": write_docx(root / "blank.docx", ["Dear team,", "", "The launch moves to May.", "  ", "Regards"]),
        "near": write_docx(root / "near.docx", ["Dear team,", "The launch moves to June.", "Regards"]),
        "upper": write_docx(root / "upper.docx", ["DEAR TEAM,", "The launch moves to MAY.", "Regards"]),
        "shuffled": write_docx(root / "shuffled.docx", ["Regards", "Dear team,", "The launch moves to May."]),
        "odt_gold": write_odt(root / "gold.odt", [[("plain", "Dear team,")], [("span", "Regards")]]),
        "odt_same": write_odt(root / "same.odt", [[("plain", "Dear "), ("span", "team,")], [("plain", "Regards")]],
                              heading="Title ignored by upstream"),
        "odt_link": write_odt(root / "link.odt", [[("link", "Dear team,")], [("span", "Regards")]]),
        "odt_bare": write_odt(root / "bare.odt", [[("plain", "Dear team,")], [("span", "Regards")]], manifest=False),
    }
    (root / "gold.txt").write_text("Dear team,\nThe launch moves to May.\nRegards\n", encoding="utf-8")
    made["txt"] = str(root / "gold.txt")
    (root / "broken.docx").write_bytes(b"not a zip")
    made["broken"] = str(root / "broken.docx")
    made["missing"] = str(root / "missing.docx")
    made["upper_suffix"] = str(root / "GOLD.DOCX")
    Path(made["upper_suffix"]).write_bytes(Path(made["gold"]).read_bytes())
    return made


CASES = [
    ("split", "gold", {}),  # one joined text: a split paragraph still matches
    ("split", "gold", {"ignore_blanks": False}),
    ("blank", "gold", {}),
    ("blank", "gold", {"ignore_blanks": False}),
    ("blank", "gold", {"ignore_blanks": False, "delete_empty_lines": True}),
    ("near", "gold", {"fuzzy_match": True}),  # a similarity, not 0 or 1
    ("near", "gold", {"ignore_blanks": False, "fuzzy_match": True}),
    ("near", "gold", {"content_only": True}),
    ("upper", "gold", {}),
    ("upper", "gold", {"ignore_case": True}),
    ("shuffled", "gold", {}),
    ("shuffled", "gold", {"ignore_order": True}),
    ("shuffled", "gold", {"ignore_blanks": True, "ignore_order": True, "content_only": True,
                          "delete_empty_lines": True}),
    ("txt", "gold", {}),  # a .txt against a .docx: 0
    ("gold", "txt", {"content_only": True}),
    ("odt_gold", "gold", {}),  # mixed kinds: 0
    ("upper_suffix", "gold", {}),  # upstream checks the suffix case-sensitively
    ("broken", "gold", {}),
    ("missing", "gold", {}),
    (None, "gold", {}),
    ("", "gold", {}),
    ("odt_same", "odt_gold", {}),  # headings are not text:p
    ("odt_same", "odt_gold", {"ignore_blanks": False}),
    ("odt_link", "odt_gold", {}),  # upstream drops a link's text
    ("odt_link", "odt_gold", {"content_only": True}),
    ("odt_bare", "odt_gold", {}),  # no manifest: odfpy does not load it
]


@pytest.mark.parametrize("result, expected, options", CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_named_cases_score_as_upstream(result: str | None, expected: str, options: dict[str, Any],
                                       files: dict[str, str]) -> None:
    assert_same_score(files.get(result, result) if result else result, files[expected], options)


def test_named_cases_keep_their_meaning(files: dict[str, str]) -> None:
    """The scores the differences were about, spelled out (each also agrees with upstream above)."""
    assert compare_docx_files(files["split"], files["gold"]) == 1.0
    assert 0.9 < compare_docx_files(files["near"], files["gold"], fuzzy_match=True) < 1.0
    assert 0.9 < compare_docx_files(files["near"], files["gold"], content_only=True) < 1.0
    assert compare_docx_files(files["blank"], files["gold"], ignore_blanks=False, delete_empty_lines=True) == 1.0
    assert compare_docx_files(files["txt"], files["gold"]) == 0.0
    assert compare_docx_files(files["odt_same"], files["odt_gold"]) == 1.0


def test_docx_format_metrics_require_the_same_text_as_upstream(files: dict[str, str]) -> None:
    """docx_format's "same text" step is compare_docx_files with its defaults, as upstream's docx-format metrics
    call theirs: a split paragraph passes it, a changed word does not."""
    upstream_docs = metrics_module("docs", STUBS)
    for name in ("check_italic_font_size_14", "compare_line_spacing", "evaluate_strike_through_last_paragraph"):
        for candidate in ("split", "blank", "near", "gold"):
            want = float(getattr(upstream_docs, name)(files[candidate], files["gold"]))
            assert getattr(docx_format, name)(files[candidate], files["gold"]) == want, (name, candidate)
    assert docx_format.check_italic_font_size_14(files["split"], files["gold"]) == 1.0
    assert docx_format.check_italic_font_size_14(files["near"], files["gold"]) == 0.0
