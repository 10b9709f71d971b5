"""environments.judges.office_more against OSWorld's own functions (desktop-env's ``docs`` and ``general`` modules,
loaded by :mod:`tests.judges.upstream`) on real files: ``.docx`` written with python-docx, ``.odt`` with odfpy,
LibreOffice ``.xcu`` settings. Every case must score as upstream does; cases where upstream raises instead of
scoring (a run without a colour, two empty reference lists, a bad config) are hand-derived."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable

import pytest
from docx import Document
from docx.shared import RGBColor

from environments.judges import office_more as m
from tests.judges.upstream import metrics_module

#: third-party modules upstream's docs / general modules import that none of the compared functions calls
STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas", "pandas")


def docx(path: Path, paragraphs: list[str], table: list[list[tuple[str, Any]]] | None = None) -> str:
    document = Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, cells in zip(grid.rows, table):
            for cell, (word, colour) in zip(row.cells, cells):
                run = cell.paragraphs[0].add_run(word)
                if colour is not None:
                    run.font.color.rgb = RGBColor(*colour)
    document.save(path)
    return str(path)


def odt(path: Path, words: list[str], background: str | None) -> str:
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import P, Span

    document = OpenDocumentText()
    style = Style(name="T1", family="text")
    if background:
        style.addElement(TextProperties(backgroundcolor=background))
    document.automaticstyles.addElement(style)
    for word in words:
        paragraph = P(text="Call the ")
        paragraph.addElement(Span(stylename=style, text=word))
        document.text.addElement(paragraph)
    document.save(str(path))
    return str(path)


XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="Standard"><value>Arial</value></prop></item>
{items}</oor:items>
"""
FONT_ITEM = ('<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse">'
             '<value>{font}</value></prop></item>\n')
RED, BLUE = (255, 0, 0), (0, 0, 255)
WORDS = ["apple", "ball", "egg", "cat"]
RECORDS = ["0600,T1,Central,Up", "0605,T2,Admiralty,Up", "0610,T1,Central,Up", "0615,T3,Tsim Sha Tsui,Down"]
REFS = ["Smith, J. (2020). A study of things. Journal of Stuff, 1(2), 3-4.",
        "Doe, A. (2019). Another study. Proceedings of Conf, 5-6."]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("office_more")
    x: dict[str, str] = {}
    x["odt_gold"] = odt(root / "gold.odt", ["candidate", "manager"], None)
    x["odt_yellow"] = odt(root / "yellow.odt", ["candidate", "manager"], "#ffff00")
    x["odt_green"] = odt(root / "green.odt", ["candidate", "manager"], "#00ff00")
    x["odt_clean"] = odt(root / "clean.odt", ["candidate", "manager"], None)
    x["odt_other"] = odt(root / "other.odt", ["candidate", "boss"], None)
    for name, items in {"times": FONT_ITEM.format(font="Times New Roman"), "liberation": FONT_ITEM.format(
            font="Liberation Serif"), "twice": FONT_ITEM.format(font="Arial") + FONT_ITEM.format(
            font="Times New Roman"), "none": ""}.items():
        (root / f"{name}.xcu").write_text(XCU.format(items=items), encoding="utf-8")
        x[f"xcu_{name}"] = str(root / f"{name}.xcu")
    (root / "broken.xcu").write_text("<oor:items", encoding="utf-8")
    x["xcu_broken"] = str(root / "broken.xcu")
    x["train_original"] = docx(root / "train_original.docx", RECORDS + ["", "Header line"])
    x["train_gold"] = docx(root / "train_gold.docx", [RECORDS[0], RECORDS[1], RECORDS[3]])
    x["train_same"] = docx(root / "train_same.docx", [RECORDS[1], "", RECORDS[0], RECORDS[3]])
    x["train_dup"] = docx(root / "train_dup.docx", RECORDS)
    x["train_new"] = docx(root / "train_new.docx", [RECORDS[0], RECORDS[1], "0620,T3,Tsim Sha Tsui,Down"])
    x["train_short"] = docx(root / "train_short.docx", [RECORDS[0], RECORDS[1]])
    x["train_extra"] = docx(root / "train_extra.docx", [RECORDS[0], RECORDS[1], RECORDS[3], "Header line"])

    def table(colours: list[Any]) -> list[list[tuple[str, Any]]]:
        return [[(w, c) for w, c in zip(WORDS[:2], colours[:2])], [(w, c) for w, c in zip(WORDS[2:], colours[2:])]]

    x["colour_gold"] = docx(root / "colour_gold.docx", ["Dolch words"], table([None] * 4))
    x["colour_right"] = docx(root / "colour_right.docx", ["Dolch words"], table([RED, BLUE, RED, BLUE]))
    x["colour_near"] = docx(root / "colour_near.docx", ["Dolch words"], table([(250, 8, 6), BLUE, RED, (4, 2, 250)]))
    x["colour_wrong"] = docx(root / "colour_wrong.docx", ["Dolch words"], table([RED, RED, RED, BLUE]))
    x["colour_text"] = docx(root / "colour_text.docx", ["Dolch word list"], table([RED, BLUE, RED, BLUE]))
    x["lines_gold"] = docx(root / "lines_gold.docx", ["Gemini: answer one", "Gemini: answer two"])
    x["lines_split"] = docx(root / "lines_split.docx", ["Gemini:  answer one", "", "Gemini: answer two"])
    x["lines_same"] = docx(root / "lines_same.docx", ["", "Gemini: answer one", "Gemini: answer two", ""])
    x["lines_space"] = docx(root / "lines_space.docx", ["Gemini: answer one", " ", "Gemini: answer two"])
    x["lines_joined"] = docx(root / "lines_joined.docx", ["Gemini: answer one Gemini: answer two"])
    x["lines_other"] = docx(root / "lines_other.docx", ["Gemini: answer one", "GPT: answer two"])
    x["lines_odt"] = x["odt_gold"]
    body = ["A case study", "Some analysis."]
    x["refs_gold"] = docx(root / "refs_gold.docx", [*body, "References", *REFS])
    x["refs_same"] = docx(root / "refs_same.docx", [*body, "References", "", *REFS, "  "])
    x["refs_typo"] = docx(root / "refs_typo.docx", [*body, "References", REFS[0].replace("Stuff", "Stuf"), REFS[1]])
    x["refs_messy"] = docx(root / "refs_messy.docx", [*body, "References", REFS[0][:30], REFS[1]])
    x["refs_one"] = docx(root / "refs_one.docx", [*body, "References", REFS[0]])
    x["refs_none"] = docx(root / "refs_none.docx", body)
    x["refs_none2"] = docx(root / "refs_none2.docx", [*body, "Bibliography"])
    x["refs_biblio"] = docx(root / "refs_biblio.docx", [*body, "Bibliography", *REFS])
    x["places_exact"] = docx(root / "places_exact.docx",
                             ["福田区正义街1号", "", "福田区振兴路108号 深圳市福田区滨河大道2033号"])
    x["places_fuzzy"] = docx(root / "places_fuzzy.docx",
                             ["福田区正义街1号楼", "福田区振兴路", "滨河大道2033号"])
    x["places_two"] = docx(root / "places_two.docx", ["福田区正义街1号", "福田区振兴路108号"])
    x["places_four"] = docx(root / "places_four.docx", ["a b", "c d"])
    (root / "not.docx").write_bytes(b"not a zip")
    x["broken_docx"] = str(root / "not.docx")
    return x


PLACES = {"expected": ["深圳市福田区正义街1号", "福田区正义街1号", "福田区振兴路108号",
                       "深圳市福田区滨河大道2033号"]}

#: (upstream module, function name, arguments (keys of ``files`` or literals), keyword options)
CASES: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = [
    *[("docs", "check_highlighted_words", (a, "odt_gold"), {})
      for a in ("odt_yellow", "odt_green", "odt_clean", "odt_other", None)],
    *[("docs", "find_default_font", (a, {"font_name": font}), {})
      for a in ("xcu_times", "xcu_liberation", "xcu_twice", "xcu_none", "xcu_broken", None)
      for font in ("Times New Roman", "Liberation Serif")],
    *[("docs", "compare_unique_train_records", (a, ["train_gold", "train_original"]), {})
      for a in ("train_same", "train_gold", "train_dup", "train_new", "train_short", "train_extra", "broken_docx",
                None)],
    ("docs", "compare_unique_train_records", ("train_same", ["train_gold", None]), {}),
    *[("docs", "evaluate_colored_words_in_tables", (a, "colour_gold"), options)
      for a in ("colour_right", "colour_near", "colour_wrong", "colour_text", None)
      for options in ({}, {"threshold": 0.5}, {"threshold": 40})],
    *[("docs", "compare_docx_files_and_ignore_new_lines", (a, "lines_gold"), options)
      for a in ("lines_split", "lines_same", "lines_space", "lines_joined", "lines_other", "lines_odt",
                "broken_docx", None)
      for options in ({}, {"ignore_blanks": False})],
    *[("docs", "compare_references", (a, b), options)
      for a, b in (("refs_same", "refs_gold"), ("refs_typo", "refs_gold"), ("refs_messy", "refs_gold"),
                   ("refs_one", "refs_gold"), ("refs_none", "refs_gold"), ("refs_none", "refs_none2"),
                   ("refs_biblio", "refs_gold"), ("broken_docx", "refs_gold"), (None, "refs_gold"))
      for options in ({}, {"content_only": True, "reference_base_result": 0.93},
                      {"reference_base_result": 0.99}, {"reference_indicator": "Bibliography"})],
    *[("general", "fuzzy_place_math", (a, PLACES), {})
      for a in ("places_exact", "places_fuzzy", "places_two", "places_four", None)],
]


def upstream(module: str) -> Any:
    return metrics_module(module, STUBS)


def _resolve(value: Any, files: dict[str, str]) -> Any:
    if isinstance(value, list):
        return [_resolve(v, files) for v in value]
    return files[value] if isinstance(value, str) and value in files else value


@pytest.mark.parametrize("module, name, args, options", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_scores_as_osworld(module: str, name: str, args: tuple[Any, ...], options: dict[str, Any],
                           files: dict[str, str]) -> None:
    values = [_resolve(a, files) for a in args]
    theirs = getattr(upstream(module), name)(*values, **options)
    mine = getattr(m, name)(*values, **options)
    assert float(mine) == pytest.approx(float(theirs), abs=1e-9), (name, args, options, mine, theirs)


def test_cases_cover_both_outcomes(files: dict[str, str]) -> None:
    """Each compared function scores 1 on some case and below 1 on another, so the conformance cases bite."""
    for name in {c[1] for c in CASES}:
        scores = {float(getattr(m, name)(*[_resolve(a, files) for a in args], **options))
                  for _, n, args, options in CASES if n == name}
        assert 1.0 in scores and min(scores) == 0.0, (name, scores)
    assert 0 < m.compare_references(files["refs_typo"], files["refs_gold"]) < 1
    assert 0 < m.fuzzy_place_math(files["places_fuzzy"], PLACES) < 1


def test_colour_difference_is_skimages_ciede2000() -> None:
    from skimage.color import deltaE_ciede2000, rgb2lab

    rng = random.Random(7)
    pairs = [((255, 0, 0), (255, 0, 0)), ((0, 0, 0), (255, 255, 255)), ((128, 128, 128), (128, 128, 129)),
             *[(tuple(rng.randrange(256) for _ in range(3)), tuple(rng.randrange(256) for _ in range(3)))
               for _ in range(300)]]
    for a, b in pairs:
        theirs = deltaE_ciede2000(rgb2lab([c / 255 for c in a]), rgb2lab([c / 255 for c in b]))
        assert m.delta_e_ciede2000(a, b) == pytest.approx(float(theirs), abs=1e-9), (a, b)


def test_where_upstream_raises(files: dict[str, str], tmp_path: Path) -> None:
    """Hand-derived: upstream crashes on these (an uncoloured run, empty reference lists, a missing settings
    rule); here they score or raise ValueError naming the fix."""
    uncoloured = docx(tmp_path / "plain.docx", ["Dolch words"], [[("apple", RED), ("ball", None)]])
    assert m.evaluate_colored_words_in_tables(uncoloured, files["colour_gold"]) == 0.0
    empty_refs = docx(tmp_path / "empty_refs.docx", ["A case study", "Some analysis.", "References"])
    assert m.compare_references(empty_refs, empty_refs) == 1.0
    assert m.compare_references(empty_refs, files["refs_gold"]) == 0.0
    with pytest.raises(ValueError, match="font_name"):
        m.find_default_font(files["xcu_times"], {"font": "Times New Roman"})
    with pytest.raises(ValueError, match="gold .docx, original .docx"):
        m.compare_unique_train_records(files["train_same"], files["train_gold"])
    with pytest.raises(ValueError, match="reference_base_result"):
        m.compare_references(files["refs_same"], files["refs_gold"], reference_base_result=1)
    with pytest.raises(ValueError, match="list of strings"):
        m.fuzzy_place_math(files["places_exact"], {"expected": "福田区"})
    assert m.check_highlighted_words(files["lines_gold"], files["lines_gold"]) == 0.0  # a .docx is no ODF package


def _registered(name: str) -> Callable[..., float]:
    return getattr(m, name)


def test_every_documented_name_is_a_function() -> None:
    for name in ("check_highlighted_words", "find_default_font", "compare_unique_train_records",
                 "evaluate_colored_words_in_tables", "compare_docx_files_and_ignore_new_lines", "compare_references",
                 "fuzzy_place_math"):
        assert f"``{name}(" in (m.__doc__ or "") and callable(_registered(name))
