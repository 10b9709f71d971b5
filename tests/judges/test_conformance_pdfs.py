"""``compare_pdfs`` (:mod:`environments.judges.pdfs`) against OSWorld's own (``desktop_env/evaluators/metrics/
chrome.py``, run with the real PyMuPDF) on the same PDFs, written with PyMuPDF: the same, nearly the same and
different text, several pages, lines with surrounding blanks, accents, an image-only page (no text), plus files
that do not open (missing, empty, not a PDF) and the list shapes the tasks use (``vm_file`` with ``multi`` and
``gives`` hands over a list with None for each file the desktop did not give). Every case must score the same
(within 1e-6). Where upstream raises instead of scoring, ours scores 0 (hand-derived cases at the end)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from PIL import Image

from environments.judges.pdfs import compare_pdfs, pdf_text
from tests.judges import upstream as upstream_loader

#: upstream's chrome.py imports these at module level; compare_pdfs calls none of them (PyMuPDF, installed, is
#: never stubbed: see test_upstream_uses_the_real_pymupdf)
STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")

TEXT = ["Resize cells to fit the page", "Quarter 1: 120 units", "Quarter 2: 135 units", "Total: 255 units"]


@pytest.fixture(scope="module")
def upstream_compare() -> Any:
    return upstream_loader.metrics_module("chrome", STUBS).compare_pdfs


def write_pdf(path: Path, pages: list[list[str]], *, image: bool = False) -> str:
    """A PDF with one page per entry of ``pages`` (its lines set in Helvetica), and an image-only page first when
    ``image``."""
    document = pymupdf.open()
    if image:
        buffer = io.BytesIO()
        Image.new("RGB", (60, 40), (200, 30, 30)).save(buffer, "PNG")
        document.new_page().insert_image(pymupdf.Rect(72, 72, 252, 192), stream=buffer.getvalue())
    for lines in pages:
        page = document.new_page()
        for row, line in enumerate(lines):
            page.insert_text((72, 72 + 18 * row), line, fontsize=12)
    document.save(str(path))
    document.close()
    return str(path)


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("pdfs")
    files = {
        "gold": write_pdf(root / "gold.pdf", [TEXT]),
        "same": write_pdf(root / "same.pdf", [TEXT]),
        "near": write_pdf(root / "near.pdf", [[*TEXT[:2], "Quarter 2: 153 units", TEXT[3]]]),
        "reordered": write_pdf(root / "reordered.pdf", [[TEXT[1], TEXT[0], *TEXT[2:]]]),
        "split": write_pdf(root / "split.pdf", [TEXT[:2], TEXT[2:]]),
        "padded": write_pdf(root / "padded.pdf", [["", "   ", *TEXT, "  "]]),
        "other": write_pdf(root / "other.pdf", [["Completely different content here"]]),
        "accents": write_pdf(root / "accents.pdf", [["Café crème brûlée", "Zoë Ångström"]]),
        "accents_near": write_pdf(root / "accents_near.pdf", [["Cafe creme brulee", "Zoe Angstrom"]]),
        "with_image": write_pdf(root / "with_image.pdf", [TEXT], image=True),
        "image_only": write_pdf(root / "image_only.pdf", [], image=True),
        "image_only2": write_pdf(root / "image_only2.pdf", [], image=True),
    }
    for name in ("alex", "david", "emily"):
        files[f"{name}_gold"] = write_pdf(root / f"{name}_gold.pdf", [[f"Dear {name.title()},", *TEXT]])
        files[name] = write_pdf(root / f"{name}.pdf", [[f"Dear {name.title()},", *TEXT[:3]]])
    (root / "empty.pdf").write_bytes(b"")
    (root / "junk.pdf").write_bytes(b"%PDF-1.4 this is not a real PDF")
    (root / "notes.txt").write_text("Resize cells to fit the page\nQuarter 1: 120 units\n")
    files.update(empty=str(root / "empty.pdf"), junk=str(root / "junk.pdf"), notes=str(root / "notes.txt"),
                 missing=str(root / "missing.pdf"))
    return files


#: (result, expected): names of ``pdfs`` (None as itself), or lists of them
CASES: list[tuple[Any, Any]] = [
    ("same", "gold"), ("near", "gold"), ("reordered", "gold"), ("split", "gold"), ("padded", "gold"),
    ("other", "gold"), ("accents", "accents_near"), ("with_image", "gold"), ("gold", "image_only"),
    ("image_only", "image_only2"), ("notes", "gold"),
    ("missing", "gold"), ("empty", "gold"), ("junk", "gold"), ("gold", "missing"), ("junk", "junk"),
    (None, "gold"), (None, "image_only"), ("gold", None), (None, None),
    (["same", "other"], ["gold", "gold"]), (["same", "missing"], ["gold", "gold"]),
    (["same"], ["gold", "near"]), (["same", "near", "other"], ["gold", "gold"]), ([], ["gold"]),
    (["same", "near"], "gold"),
    # 185f29bd: the gold files (cloud_file) first, then what vm_file fetched, None where the desktop had none
    (["alex_gold", "david_gold", "emily_gold"], ["alex", None, "emily"]),
    (["alex_gold", "david_gold", "emily_gold"], [None, None, None]),
    (["alex_gold", "david_gold", "emily_gold"], ["alex", "david", "emily"]),
    ("same", ["gold", "gold"]),
]


def resolve(value: Any, pdfs: dict[str, str]) -> Any:
    if isinstance(value, list):
        return [resolve(item, pdfs) for item in value]
    return None if value is None else pdfs[value]


def test_upstream_uses_the_real_pymupdf(upstream_compare: Any) -> None:
    assert upstream_compare.__globals__["fitz"].open is pymupdf.open


@pytest.mark.parametrize("result,expected", CASES, ids=[f"{r}-{e}" for r, e in CASES])
def test_scores_as_osworld(upstream_compare: Any, pdfs: dict[str, str], tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch, result: Any, expected: Any) -> None:
    monkeypatch.chdir(tmp_path)  # upstream opens each character of a lone path paired with a list: none exists here
    mine, theirs = resolve(result, pdfs), resolve(expected, pdfs)
    assert compare_pdfs(mine, theirs) == pytest.approx(upstream_compare(mine, theirs), abs=1e-6)


def test_cases_span_the_scores(upstream_compare: Any, pdfs: dict[str, str], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scores = [upstream_compare(resolve(r, pdfs), resolve(e, pdfs)) for r, e in CASES]
    assert 0.0 in scores and 1.0 in scores and any(0.3 < s < 0.99 for s in scores)
    # the partial credit of a multi-file task where the desktop lacks one file
    partial = compare_pdfs(resolve(["alex_gold", "david_gold", "emily_gold"], pdfs),
                           resolve(["alex", None, "emily"], pdfs))
    assert 0.5 < partial < 2 / 3


def test_text_is_pymupdfs(pdfs: dict[str, str]) -> None:
    assert pdf_text(pdfs["gold"]) == "\n".join(TEXT)
    assert pdf_text(pdfs["image_only"]) == "" and pdf_text(None) == ""


def test_where_upstream_raises_ours_scores_zero(upstream_compare: Any, pdfs: dict[str, str]) -> None:
    """Hand-derived: upstream pairs ``None`` with a list of gold files (TypeError) and divides by the number of
    gold files (ZeroDivisionError for none); ours scores both 0."""
    with pytest.raises(TypeError):
        upstream_compare(None, [pdfs["gold"]])
    with pytest.raises(ZeroDivisionError):
        upstream_compare([pdfs["gold"]], [])
    assert compare_pdfs(None, [pdfs["gold"]]) == 0.0 and compare_pdfs([pdfs["gold"]], []) == 0.0
