"""``compare_docx_tables`` against OSWorld's own (``desktop_env.evaluators.metrics.docs``) on generated .docx
files: zero to two tables of drawn shapes, cells whose text differs by a value or by surrounding whitespace,
merged cells, a paragraph more in a cell, and a table dropped. Both must score every pair the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docx import Document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.judges.documents import compare_docx_tables
from tests.judges.upstream import metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")
TEXTS = ("", "a", " a ", "a\n", "b", "1.0", "1")


@pytest.fixture(scope="module")
def upstream() -> Any:
    return metrics_module("docs", STUBS)


@st.composite
def table_specs(draw: st.DrawFn) -> dict[str, Any]:
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    cells = draw(st.lists(st.sampled_from(TEXTS), min_size=rows * cols, max_size=rows * cols))
    merge = draw(st.booleans()) and cols > 1
    return {"rows": rows, "cols": cols, "cells": cells, "merge": merge, "extra": draw(st.sampled_from((None, "", "x")))}


@st.composite
def document_pairs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    gold = draw(st.lists(table_specs(), max_size=2))
    result = [dict(t, cells=list(t["cells"])) for t in gold]
    for _ in range(draw(st.integers(0, 2))):
        if not result:
            break
        table = result[draw(st.integers(0, len(result) - 1))]
        what = draw(st.sampled_from(("cell", "cell", "merge", "extra", "rows", "drop")))
        if what == "cell":
            table["cells"][draw(st.integers(0, len(table["cells"]) - 1))] = draw(st.sampled_from(TEXTS))
        elif what == "merge":
            table["merge"] = not table["merge"] and table["cols"] > 1
        elif what == "extra":
            table["extra"] = draw(st.sampled_from((None, "", "x")))
        elif what == "rows":
            table["rows"] = draw(st.integers(1, 3))
            table["cells"] = (table["cells"] * 3)[: table["rows"] * table["cols"]]
        else:
            result.remove(table)
    return result, gold


def write(path: Path, tables: list[dict[str, Any]]) -> str:
    document = Document()
    document.add_paragraph("Before the tables")
    for spec in tables:
        table = document.add_table(rows=spec["rows"], cols=spec["cols"])
        for index, text in enumerate(spec["cells"]):
            table.cell(index // spec["cols"], index % spec["cols"]).text = text
        if spec["extra"] is not None:  # a second paragraph in the first cell
            table.cell(0, 0).add_paragraph(spec["extra"])
        if spec["merge"]:
            table.cell(0, 0).merge(table.cell(0, 1))
        document.add_paragraph("between")
    document.save(path)
    return str(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=document_pairs())
def test_generated_tables_score_as_osworlds(upstream: Any, tmp_path: Path,
                                            pair: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    result, gold = write(tmp_path / "result.docx", pair[0]), write(tmp_path / "gold.docx", pair[1])
    theirs = float(upstream.compare_docx_tables(result, gold))
    assert compare_docx_tables(result, gold) == pytest.approx(theirs, abs=1e-6)


def test_bad_inputs_score_as_osworlds(upstream: Any, tmp_path: Path) -> None:
    gold = write(tmp_path / "gold.docx", [{"rows": 1, "cols": 1, "cells": ["a"], "merge": False, "extra": None}])
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    for result in (None, "", str(tmp_path / "missing.docx"), str(tmp_path / "broken.docx"), gold):
        theirs = float(upstream.compare_docx_tables(result, gold))
        assert compare_docx_tables(result, gold) == theirs, result
