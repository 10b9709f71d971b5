"""environments.judges.web_files on real files (PDFs written by Pillow and pypdf, EPUB zips, workbooks written by
openpyxl, HTML and text files).

``check_pdf_pages``, ``compare_result_files``, ``compare_conference_city_in_order``, ``compare_epub`` and
``compare_pdf_images`` are checked against OSWorld's own functions (desktop-env's ``pdf``, ``vscode``, ``table``,
``others`` and ``chrome`` modules; the last with the real PyMuPDF and imagehash, installed here). Upstream's
``compare_htmls`` needs BeautifulSoup, not a dependency here, so its cases are hand-derived (during development it
was also run side by side with upstream on a few thousand generated HTML pairs, with equal scores); the perceptual
hash is checked against imagehash's recipe written with scipy.
"""

from __future__ import annotations

import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import openpyxl
import pytest
from PIL import Image, ImageDraw, ImageFilter
from pypdf import PdfWriter

from environments.judges import web_files as w
from tests.judges.upstream import metrics_module

STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas", "pandas")
CITIES: list[Any] = ["Scottsdale", "Atlanta", ["Lake Tahoe", "Stateline"], ["Banff", "Alberta's Rockies"], "Beijing",
                     ["Montreal", "Montréal"], "San Diego", "Lille", ["Montreal", "Montréal"], "San Juan",
                     ["New York", "NYC"], "Barcelona", "Toulon", "Sydney", ["Los Angeles", "Long Beach", "LA"],
                     "Vancouver", "Stockholm", ["Montreal", "Montréal"], "New Orleans", ["Long Beach", "LA"],
                     "Vancouver"]
ANSWER = ["Scottsdale, AZ", "Atlanta", "Stateline, NV", "Banff", "Beijing", "Montréal", "San Diego", "Lille",
          "Montreal", "San Juan", "New York City", "Barcelona", "Toulon", "Sydney", "Long Beach", "Vancouver",
          "Stockholm", "Montreal", "New Orleans", "Long Beach", "Vancouver"]


def picture(seed: int, size: tuple[int, int] = (120, 90)) -> Image.Image:
    rng = random.Random(seed)
    image = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(8):
        x, y = rng.randrange(size[0]), rng.randrange(size[1])
        draw.rectangle((x, y, x + rng.randrange(40), y + rng.randrange(40)),
                       fill=tuple(rng.randrange(256) for _ in range(3)))
    return image


def pdf(path: Path, images: list[Image.Image], **options: Any) -> str:
    images[0].save(path, save_all=True, append_images=images[1:], **options)
    return str(path)


def blank_pdf(path: Path, pages: int) -> str:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(200, 200)
    writer.write(path)
    return str(path)


def epub(path: Path, chapters: dict[str, str], identifier: str = "urn:uuid:1") -> str:
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("content.opf", '<?xml version="1.0"?>\n<package>\n<metadata>\n'
                      f'<dc:identifier id="uid">{identifier}</dc:identifier>\n<dc:title>Pass Through</dc:title>\n'
                      "</metadata>\n<manifest>\n" + "".join(f'<item href="{n}"/>\n' for n in chapters)
                      + "</manifest>\n</package>\n")
        book.writestr("toc.ncx", "<ncx>\n<navMap>\n" + "".join(
            f'<navPoint id="{n}" playOrder="{i}"><text>{n}</text></navPoint>\n' for i, n in enumerate(chapters))
            + "</navMap>\n</ncx>\n")
        for name, text in chapters.items():
            book.writestr(name, f"<html>\r\n<head><title>{name}</title></head>\n<body>\n"
                          + "".join(f"<p>{line}</p>\n" for line in text.split("\n")) + "</body>\n</html>\n")
    return str(path)


def workbook(path: Path, cities: list[Any]) -> str:
    book = openpyxl.Workbook()
    book.active["C1"] = "City"
    for row, city in enumerate(cities, start=2):
        book.active.cell(row=row, column=3, value=city)
    book.save(path)
    return str(path)


CHAPTERS = {"ch1.html": "It was a dark night.\nThe train passed through.", "ch2.html": "Morning came.\nThe end."}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("web_files")
    x = {f"pages{n}": blank_pdf(root / f"pages{n}.pdf", n) for n in (1, 2)}
    images = {"img_gold": [picture(1)], "img_big": [picture(1).resize((240, 180))], "img_other": [picture(2)],
              "img_palette": [picture(1).convert("P")], "img_palette2": [picture(2).convert("P")],
              "img_blur": [picture(2).filter(ImageFilter.GaussianBlur(3))], "img_pair": [picture(1), picture(2)],
              "img_half": [picture(1), picture(3)],
              **{f"img_{mode}": [picture(4).convert(mode)] for mode in ("1", "L", "LA", "RGBA", "CMYK", "P")},
              "img_mode_gold": [picture(4)]}
    x.update({name: pdf(root / f"{name}.pdf", pictures) for name, pictures in images.items()})
    x["img_lossy"] = pdf(root / "img_lossy.pdf", [picture(1)], quality=30)
    texts = {"n42": "42", "n42f": "42.0", "sentence": "The median price is 42 dollars", "close": "41.99999",
             "n43": "43", "abc": "abc", "abd": "abd", "abc_ws": "\n abc \n", "word": "forty-two"}
    for name, text in texts.items():
        (root / f"{name}.txt").write_text(text, encoding="utf-8")
        x[name] = str(root / f"{name}.txt")
    x["cities_right"] = workbook(root / "right.xlsx", ANSWER)
    x["cities_wrong"] = workbook(root / "wrong.xlsx", [*ANSWER[:5], "Toronto", *ANSWER[6:]])
    x["cities_gap"] = workbook(root / "gap.xlsx", [*ANSWER[:20], None])
    x["cities_number"] = workbook(root / "number.xlsx", [2013, *ANSWER[1:]])
    x["epub_gold"] = epub(root / "gold.epub", CHAPTERS)
    x["epub_same"] = epub(root / "same.epub", CHAPTERS, identifier="urn:uuid:2")
    x["epub_edit"] = epub(root / "edit.epub", {**CHAPTERS, "ch2.html": "Morning came.\nThe beginning."})
    x["epub_more"] = epub(root / "more.epub", {**CHAPTERS, "ch3.html": "Epilogue."})
    x["epub_less"] = epub(root / "less.epub", {"ch1.html": CHAPTERS["ch1.html"]})
    (root / "junk.epub").write_bytes(b"plain text, not a zip")
    x["epub_junk"] = str(root / "junk.epub")
    return x


#: (upstream module, function name, arguments (keys of ``files`` or literals), keyword options)
CASES: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = [
    *[("pdf", "check_pdf_pages", (a, {"relation": relation, "ref_value": ref}), {})
      for a in ("pages1", "pages2", None) for relation, ref in (("eq", 1), ("gt", 1), ("le", 2), ("ne", 2))],
    *[("vscode", "compare_result_files", (a, b), {})
      for a, b in (("n42f", "n42"), ("sentence", "n42"), ("close", "n42"), ("n43", "n42"), ("word", "n42"),
                   ("abc", "abc"), ("abc_ws", "abc"), ("abd", "abc"), ("n42", "abc"), (None, "n42"))],
    *[("table", "compare_conference_city_in_order", (a, {"expected": CITIES}), {})
      for a in ("cities_right", "cities_wrong", "cities_gap", "cities_number")],
    *[("others", "compare_epub", (a, "epub_gold"), {})
      for a in ("epub_same", "epub_edit", "epub_more", "epub_less", "epub_junk", None)],
    ("others", "compare_epub", ("epub_same", "epub_junk"), {}),
    *[("chrome", "compare_pdf_images", (a, b), {})
      for a, b in (("img_gold", "img_gold"), ("img_lossy", "img_gold"), ("img_big", "img_gold"),
                   ("img_palette", "img_gold"), ("img_palette2", "img_gold"), ("img_other", "img_gold"),
                   ("img_blur", "img_other"), ("img_half", "img_pair"), ("img_pair", "img_gold"),
                   ("pages1", "pages2"), ("pages2", "img_gold"), (None, "img_gold"), ("img_gold", "missing.pdf"),
                   *((f"img_{mode}", "img_mode_gold") for mode in ("1", "L", "LA", "RGBA", "CMYK", "P")))],
]


def _resolve(value: Any, files: dict[str, str]) -> Any:
    return files[value] if isinstance(value, str) and value in files else value


@pytest.mark.parametrize("module, name, args, options", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_scores_as_osworld(module: str, name: str, args: tuple[Any, ...], options: dict[str, Any],
                           files: dict[str, str]) -> None:
    values = [_resolve(a, files) for a in args]
    theirs = getattr(metrics_module(module, STUBS), name)(*values, **options)
    mine = getattr(w, name)(*values, **options)
    assert float(mine) == pytest.approx(float(theirs), abs=1e-9), (name, args, mine, theirs)


def test_cases_cover_both_outcomes(files: dict[str, str]) -> None:
    for name in {c[1] for c in CASES}:
        scores = {float(getattr(w, name)(*[_resolve(a, files) for a in args], **options))
                  for _, n, args, options in CASES if n == name}
        assert 1.0 in scores and min(scores) == 0.0, (name, scores)
    assert 0.5 < w.compare_epub(files["epub_edit"], files["epub_gold"]) < 1


def test_epub_and_workbook_beyond_upstream(files: dict[str, str], tmp_path: Path) -> None:
    """Hand-derived: upstream crashes on chapters in a folder (it writes them to a folder it never made) and on
    a file that is not a workbook; a city list too short for C2:C22 is a config error here."""
    nested = {f"OEBPS/{name}": text for name, text in CHAPTERS.items()}
    gold = epub(tmp_path / "nested_gold.epub", nested)
    assert w.compare_epub(epub(tmp_path / "nested.epub", nested, identifier="x"), gold) == 1.0
    assert w.compare_epub(files["epub_edit"], gold) < 1.0
    assert w.compare_epub(str(tmp_path / "missing.epub"), gold) == 0.0
    assert w.compare_conference_city_in_order(files["epub_junk"], {"expected": CITIES}) == 0.0
    with pytest.raises(ValueError, match="21 entries"):
        w.compare_conference_city_in_order(files["cities_right"], {"expected": CITIES[:20]})
    with pytest.raises(ValueError, match="relation"):
        w.check_pdf_pages(files["pages1"], {"relation": "equals", "ref_value": 1})
    assert w.check_pdf_pages(files["epub_junk"], {"relation": "eq", "ref_value": 1}) == 0.0


def test_phash_is_imagehash_recipe() -> None:
    """imagehash.phash: grey, 32x32 Lanczos, DCT-II (scipy.fftpack) on both axes, 8x8 low band > its median."""
    from scipy.fftpack import dct

    for seed in range(12):
        image = picture(seed, (97 + seed, 61))
        pixels = np.asarray(image.convert("L").resize((32, 32), Image.Resampling.LANCZOS))
        low = dct(dct(pixels, axis=0), axis=1)[:8, :8]
        assert (w.phash(image) == (low > np.median(low)).ravel()).all()


def test_pdf_images(tmp_path: Path) -> None:
    gold = pdf(tmp_path / "gold.pdf", [picture(1)])
    assert w.compare_pdf_images(pdf(tmp_path / "same.pdf", [picture(1)]), gold) == 1.0
    assert w.compare_pdf_images(pdf(tmp_path / "lossy.pdf", [picture(1)], quality=30), gold) == 1.0
    assert w.compare_pdf_images(pdf(tmp_path / "big.pdf", [picture(1).resize((240, 180))]), gold) == 1.0
    # Pillow stores palette images hex-encoded (ASCIIHex), with their palette beside
    assert w.compare_pdf_images(pdf(tmp_path / "palette.pdf", [picture(1).convert("P")]), gold) == 1.0
    assert w.compare_pdf_images(pdf(tmp_path / "palette2.pdf", [picture(2).convert("P")]), gold) == 0.0
    assert w.compare_pdf_images(pdf(tmp_path / "other.pdf", [picture(2)]), gold) == 0.0
    assert w.compare_pdf_images(pdf(tmp_path / "blur.pdf", [picture(2).filter(ImageFilter.GaussianBlur(3))]),
                                pdf(tmp_path / "sharp.pdf", [picture(2)])) == 1.0
    pair = pdf(tmp_path / "pair.pdf", [picture(1), picture(2)])
    assert w.compare_pdf_images(pdf(tmp_path / "half.pdf", [picture(1), picture(3)]), pair) == 0.5
    assert w.compare_pdf_images(pair, gold) == 0.0
    blank = blank_pdf(tmp_path / "blank.pdf", 2)
    assert w.compare_pdf_images(blank_pdf(tmp_path / "blank1.pdf", 1), blank) == 1.0
    assert w.compare_pdf_images(blank, gold) == 0.0
    (tmp_path / "junk.pdf").write_bytes(b"not a pdf")
    assert w.compare_pdf_images(str(tmp_path / "junk.pdf"), gold) == 0.0
    assert w.compare_pdf_images(None, gold) == 0.0


CALC_HTML = """<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">
<html>
<head>
\t<meta http-equiv="content-type" content="text/html; charset=utf-8"/>
\t<title></title>
\t<style type="text/css">
\t\tbody,div,table,thead,tbody,tfoot,tr,th,td,p {{ font-family:"Liberation Sans"; font-size:x-small }}
\t</style>
</head>
<body>
<!-- ************************************************************************** -->
<table cellspacing="0" border="0">
\t<tr>
\t\t<td class="{cls}" height="17" align="left">Year</td>
\t\t<td align="right" sdval="2021" sdnum="{sdnum}">{value}</td>
\t</tr>
</table>
<!-- ************************************************************************** -->
</body>
</html>
"""


def test_htmls(tmp_path: Path) -> None:
    def html(name: str, text: str) -> str:
        (tmp_path / name).write_text(text, encoding="utf-8")
        return str(tmp_path / name)

    gold = html("gold.html", CALC_HTML.format(cls="a b", sdnum="1033;", value="2021"))
    same = html("same.html", CALC_HTML.format(cls="a  b", sdnum="1033;", value="2021").replace("\t\t<td", "  <td"))
    sdnum = html("sdnum.html", CALC_HTML.format(cls="a b", sdnum="1033;0;0", value="2021"))
    value = html("value.html", CALC_HTML.format(cls="a b", sdnum="1033;", value="2022"))
    order = html("order.html", CALC_HTML.format(cls="b a", sdnum="1033;", value="2021"))
    assert w.compare_htmls(same, gold) == 1.0  # whitespace-only strings and class token spacing do not count
    assert w.compare_htmls(sdnum, gold) == 0.0
    assert w.compare_htmls(sdnum, gold, ignore_sdnum=True) == 1.0
    assert w.compare_htmls(value, gold, ignore_sdnum=True) == 0.0
    assert w.compare_htmls(order, gold) == 0.0
    style = html("style.html", CALC_HTML.format(cls="a b", sdnum="1033;", value="2021").replace("x-small", "small"))
    assert w.compare_htmls(style, gold) == 0.0  # the style string itself differs
    comment = html("comment.html", CALC_HTML.format(cls="a b", sdnum="1033;", value="2021").replace("****", "==="))
    assert w.compare_htmls(comment, gold) == 0.0
    # the walk stops with the shorter document: a trailing comment adds no text, so nothing differs before it
    assert w.compare_htmls(html("tail.html", "<p>a</p><!--x-->"), html("short.html", "<p>a</p>")) == 1.0
    assert w.compare_htmls(html("more.html", "<p>a</p><p>b</p>"), html("short2.html", "<p>a</p>")) == 0.0
    assert w.compare_htmls(html("pre.html", "<pre>a\n\n</pre>"), html("pre2.html", "<pre>a\n</pre>")) == 0.0
    assert w.compare_htmls(html("div.html", "<div>a\n\n</div>"), html("div2.html", "<div>a\n</div>")) == 0.0
    assert w.compare_htmls(html("ws.html", "<div>a</div>\n\n  <div>b</div>"),
                           html("ws2.html", "<div>a</div>\n<div>b</div>")) == 1.0
    assert w.compare_htmls(str(tmp_path / "missing.html"), gold) == 0.0
    assert w.compare_htmls(None, gold) == 0.0
