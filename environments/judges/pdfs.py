"""PDF metrics (OSWorld's names): ``compare_pdfs``.

``compare_pdfs(result, expected)``: the text PyMuPDF extracts from every page of each PDF (``page.get_text()``
concatenated, then stripped), compared with rapidfuzz's ``fuzz.ratio`` / 100, as upstream does. A gold that is not
a list pairs the two arguments one to one; lists pair up in order (to the shorter) and the score is their sum over
the number of gold files. A pair that cannot be opened or read adds 0. ``None`` opens, as in PyMuPDF, as an empty
document (no text): a file a ``vm_file`` getter could not fetch scores 0 against any gold that has text.

PyMuPDF is the optional extra ``scalecua[pdf]`` (it is AGPL-3.0); without it these metrics raise an error naming
the extra rather than score every PDF 0. pypdf, which ships with the project, extracts text differently (upstream's
ratios would not be reproduced), so it is not a fallback.
"""

from __future__ import annotations

from typing import Any

import structlog

from core.errors import ScaleCUAError

log = structlog.get_logger(__name__)


def require_pymupdf(metric: str) -> None:
    """PyMuPDF is importable, or an error naming the extra that installs it."""
    import importlib.util

    if importlib.util.find_spec("pymupdf") is None:
        raise ScaleCUAError(f"{metric} reads PDFs with PyMuPDF, as OSWorld does: pip install 'scalecua[pdf]' "
                            "(pymupdf, AGPL-3.0)")


def pdf_text(path: str | None) -> str:
    """Every page's text as PyMuPDF extracts it, concatenated and stripped (``None``: an empty document)."""
    import pymupdf

    with pymupdf.open(path) as document:
        return "".join(page.get_text() for page in document).strip()


def compare_pdfs(result: str | list[str | None] | None, expected: str | list[str | None] | None = None,
                 **_: Any) -> float:
    """Mean text similarity of the result PDF(s) to the gold PDF(s) (see the module docstring)."""
    from rapidfuzz import fuzz

    require_pymupdf("compare_pdfs")
    if not isinstance(expected, list):
        result, expected = [result], [expected]
    elif not isinstance(result, list):
        return 0.0  # upstream pairs the characters of the one path with the gold files: none of them opens
    if not expected:
        return 0.0  # upstream divides by zero
    total = 0.0
    for mine, gold in zip(result, expected):
        try:
            total += fuzz.ratio(pdf_text(mine), pdf_text(gold)) / 100
        except Exception as exc:  # PyMuPDF raises many kinds for a missing, empty or broken file
            log.info("pdf cannot be read", result=mine, expected=gold, error=repr(exc))
    return total / len(expected)
