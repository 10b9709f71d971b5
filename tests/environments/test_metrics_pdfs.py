"""``compare_pdfs`` on PDFs LibreOffice Writer exports (the application the tasks use)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from docx import Document

from environments.judges.pdfs import compare_pdfs, pdf_text



def exported(tmp_path: Path, name: str, paragraphs: list[str]) -> str:
    assert shutil.which("soffice"), "LibreOffice (soffice) is missing: bash scripts/install.sh installs it"
    doc = Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    source = tmp_path / f"{name}.docx"
    doc.save(source)
    subprocess.run(["soffice", "--headless", f"-env:UserInstallation=file://{tmp_path}/profile", "--convert-to",
                    "pdf", "--outdir", str(tmp_path), str(source)], check=True, capture_output=True, timeout=240)
    return str(tmp_path / f"{name}.pdf")


def test_pdf_text_similarity_as_upstream(tmp_path: Path) -> None:
    text = ["Resize cells to fit the page", "Quarter 1: 120 units", "Quarter 2: 135 units"]
    gold = exported(tmp_path, "gold", text)
    same = exported(tmp_path, "same", text)
    near = exported(tmp_path, "near", [*text[:2], "Quarter 2: 153 units"])
    other = exported(tmp_path, "other", ["Completely different content here"])
    assert "Quarter 1: 120 units" in pdf_text(gold)
    assert compare_pdfs(same, gold) == 1.0
    assert 0.9 < compare_pdfs(near, gold) < 1.0
    assert compare_pdfs(other, gold) < 0.5
    assert compare_pdfs([same, other], [gold, gold]) == pytest.approx((1.0 + compare_pdfs(other, gold)) / 2)
    junk = tmp_path / "junk.pdf"
    junk.write_bytes(b"%PDF-1.4 broken")
    assert compare_pdfs(str(junk), gold) == 0.0 and compare_pdfs(None, gold) == 0.0
    assert compare_pdfs([same, str(tmp_path / "missing.pdf")], [gold, gold]) == 0.5


def test_without_pymupdf_a_pdf_metric_names_the_extra_instead_of_scoring_0(monkeypatch, tmp_path) -> None:
    import importlib.util

    from core.errors import ScaleCUAError
    from environments.judges.web_files import compare_pdf_images

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pymupdf" else real(name, *a))
    for metric in (compare_pdfs, compare_pdf_images):
        with pytest.raises(ScaleCUAError, match=r"scalecua\[pdf\]"):
            metric(str(tmp_path / "a.pdf"), str(tmp_path / "b.pdf"))
