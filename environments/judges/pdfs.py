"""PDF metrics (OSWorld's names): ``compare_pdfs``.

``compare_pdfs(result, expected)``: the text of every page of each PDF (concatenated, stripped), compared
with rapidfuzz's ``fuzz.ratio`` / 100 as upstream; lists of PDFs pair up and the score is the mean over the
pairs (a pair that cannot be read counts 0). Text comes from pypdf (upstream uses PyMuPDF; both sides of a
comparison go through the same extractor, so equal documents score 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)


def pdf_text(path: str) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() or "" for page in PdfReader(path).pages).strip()


def compare_pdfs(result: str | list[str] | None, expected: str | list[str] | None = None, **_: Any) -> float:
    """Mean text similarity of the result PDF(s) to the gold PDF(s) (see the module docstring)."""
    from pypdf.errors import PdfReadError
    from rapidfuzz import fuzz

    if not result or not expected:
        return 0.0
    results = result if isinstance(result, list) else [result]
    golds = expected if isinstance(expected, list) else [expected]
    total = 0.0
    for mine, gold in zip(results, golds):
        if not (mine and gold and Path(mine).is_file() and Path(gold).is_file()):
            continue
        try:
            total += fuzz.ratio(pdf_text(mine), pdf_text(gold)) / 100
        except (PdfReadError, ValueError, OSError) as exc:
            log.info("pdf cannot be read", result=mine, expected=gold, error=str(exc))
    return total / len(golds)
