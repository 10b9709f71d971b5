"""``compare_image_text`` (:mod:`environments.judges.ocr`): hand-derived cases only.

Upstream's function (``desktop_env/evaluators/metrics/docs.py``) cannot run here: its module imports
easyocr, which needs torchvision, and PyPI has no torchvision for this project's torch; our OCR engine is
Tesseract anyway, so no conformance test against upstream's scores. The expectations follow upstream's
rules: the rule's text must occur, case-sensitively, in the recognized text joined with single spaces; an
alpha channel is dropped (not composited), as easyocr's loader does; missing / unreadable files score 0.

Images are drawn with Pillow in DejaVu fonts (``fonts-dejavu-core``) at 28-32 px, large and crisp enough
that Tesseract reads them exactly, like the terminal screenshot of OSWorld's task 02ce9a50 (rules ``ls`` /
``1s``). X11 screen dumps are written in the layout ``xwd -root`` produces on an Xvfb screen (32 bits per
pixel, LSB first, a 256-entry colormap, padded rows) and, when ImageMagick is installed, by ``convert``.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from environments.judges import ocr
from environments.judges.ocr import compare_image_text

FONTS = Path("/usr/share/fonts/truetype/dejavu")
SANS, MONO = FONTS / "DejaVuSans.ttf", FONTS / "DejaVuSansMono.ttf"



@pytest.fixture(autouse=True)
def _installed() -> None:
    """scripts/install.sh installs all three; a machine without them fails here, never skips."""
    assert MONO.is_file() and SANS.is_file(), "fonts-dejavu-core is missing: bash scripts/install.sh"
    assert shutil.which("tesseract"), "tesseract is missing (Debian tesseract-ocr): bash scripts/install.sh"
    assert shutil.which("convert"), "ImageMagick is missing: bash scripts/install.sh"


def rule(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def draw(lines: list[str], *, font: Path = SANS, size: int = 32, background: Any = "white",
         colors: list[Any] | None = None, mode: str = "RGB", width: int = 900) -> Image.Image:
    face = ImageFont.truetype(str(font), size)
    image = Image.new(mode, (width, int(size * 1.6) * len(lines) + 40), background)
    pen = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        fill = colors[index] if colors else "black"
        pen.text((20, 20 + int(size * 1.6) * index), line, font=face, fill=fill)
    return image


TERMINAL = ["user@ubuntu:~$ ls", "Desktop  Documents  Downloads  Music  Pictures"]


def terminal(*, dark: bool = False) -> Image.Image:
    if dark:  # Ubuntu's terminal: white prompt, blue folder names on aubergine
        return draw(TERMINAL, font=MONO, size=28, background=(48, 10, 36),
                    colors=[(255, 255, 255), (114, 159, 207)])
    return draw(TERMINAL, font=MONO, size=28)


def save(image: Image.Image, path: Path) -> str:
    image.save(path, "PNG")
    return str(path)


def write_xwd(image: Image.Image, path: Path) -> str:
    """``image`` as ``xwd -root`` writes a depth-24 screen: 32 bpp BGRX (LSB first), rows padded, colormap."""
    rgb = np.asarray(image.convert("RGB"))
    height, width = rgb.shape[:2]
    bytes_per_line = width * 4 + 8  # padding the reader must skip
    name = b"xwdump\0"
    header_size = 100 + len(name)
    ncolors = 256
    fields = (header_size, 7, 2, 24, width, height, 0, 0, 32, 0, 32, 32, bytes_per_line, 4,
              0xFF0000, 0x00FF00, 0x0000FF, 8, 256, ncolors, width, height, 0, 0, 0)
    colormap = b"".join(struct.pack(">IHHHBB", i, i * 257, i * 257, i * 257, 7, 0) for i in range(ncolors))
    pixels = np.zeros((height, bytes_per_line), dtype=np.uint8)
    bgrx = np.concatenate([rgb[..., ::-1], np.zeros((height, width, 1), dtype=np.uint8)], axis=-1)
    pixels[:, :width * 4] = bgrx.reshape(height, width * 4)
    path.write_bytes(struct.pack(">25I", *fields) + name + colormap + pixels.tobytes())
    return str(path)


def task_verdict(path: str) -> float:
    """OSWorld task 02ce9a50: three ``compare_image_text`` calls (``ls``, ``1s``, ``1s``) joined by ``or``."""
    return max(compare_image_text(path, rule(text)) for text in ("ls", "1s", "1s"))


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_terminal_screenshot_passes_the_task(tmp_path: Path, dark: bool) -> None:
    # Tesseract reads the monospace "ls" as "ls" or "1s" (the dark one as "1s"): the task accepts both
    path = save(terminal(dark=dark), tmp_path / "ls.png")
    assert task_verdict(path) == 1.0
    # the prompt's last letter and the listing's first word, across the line break: lines join with one space
    assert compare_image_text(path, rule("s Desktop")) == 1.0
    assert compare_image_text(path, rule("Downloads  Music")) == 0.0  # one space, not the drawn two
    assert compare_image_text(path, rule("vim")) == 0.0


def test_substring_anywhere(tmp_path: Path) -> None:
    path = save(draw(["ls Desktop"], font=MONO), tmp_path / "ls.png")
    assert compare_image_text(path, rule("ls")) == 1.0
    assert compare_image_text(path, rule("ls Desktop")) == 1.0
    tools = save(draw(["Tools and files"]), tmp_path / "tools.png")
    assert compare_image_text(tools, rule("ls")) == 1.0  # inside "Tools": a plain substring test
    assert task_verdict(tools) == 1.0


def test_task_rules_on_text_without_them_score_0(tmp_path: Path) -> None:
    path = save(draw(["Desktop Documents Music Pictures"]), tmp_path / "ls.png")
    assert compare_image_text(path, rule("Music Pictures")) == 1.0
    assert compare_image_text(path, rule("ls")) == 0.0
    assert task_verdict(path) == 0.0


def test_digit_rule_and_case_sensitivity(tmp_path: Path) -> None:
    digits = save(draw(["sleep 1s"]), tmp_path / "sleep.png")
    assert compare_image_text(digits, rule("1s")) == 1.0
    capitals = save(draw(["LS -LA"]), tmp_path / "caps.png")
    assert compare_image_text(capitals, rule("LS")) == 1.0
    assert compare_image_text(capitals, rule("ls")) == 0.0


def test_alpha_is_dropped_not_composited(tmp_path: Path) -> None:
    # black text on a fully transparent black canvas: without alpha the picture is all black, no text
    hidden = save(draw(["ls Desktop"], font=MONO, mode="RGBA", background=(0, 0, 0, 0), colors=[(0, 0, 0, 255)]),
                  tmp_path / "hidden.png")
    assert compare_image_text(hidden, rule("ls")) == 0.0
    shown = save(draw(["ls Desktop"], font=MONO, mode="RGBA", background=(255, 255, 255, 0), colors=[(0, 0, 0, 255)]),
                 tmp_path / "shown.png")
    assert compare_image_text(shown, rule("ls")) == 1.0


def test_xwd_reader_decodes_the_pixels(tmp_path: Path) -> None:
    image = terminal(dark=True)
    decoded = ocr.read_xwd(write_xwd(image, tmp_path / "ls.xwd"))
    assert np.array_equal(np.asarray(decoded), np.asarray(image))
    if shutil.which("convert"):  # an independent reader agrees with the file the test wrote
        done = subprocess.run(["convert", f"xwd:{tmp_path / 'ls.xwd'}", str(tmp_path / "back.png")],
                              capture_output=True, check=False)
        assert done.returncode == 0, done.stderr
        assert np.array_equal(np.asarray(Image.open(tmp_path / "back.png").convert("RGB")), np.asarray(image))


def test_x11_screen_dump_named_png_is_read(tmp_path: Path) -> None:
    path = write_xwd(terminal(dark=True), tmp_path / "ls.png")
    assert task_verdict(path) == 1.0
    assert compare_image_text(path, rule("Downloads Music")) == 1.0
    assert compare_image_text(path, rule("vim")) == 0.0


def test_imagemagick_xwd_is_read(tmp_path: Path) -> None:
    source = save(terminal(), tmp_path / "source.png")
    target = tmp_path / "ls.png"
    done = subprocess.run(["convert", source, "-depth", "8", f"xwd:{target}"], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.asarray(ocr.read_xwd(target)), np.asarray(Image.open(source).convert("RGB")))
    assert task_verdict(str(target)) == 1.0


def test_missing_or_unreadable_files_score_0(tmp_path: Path) -> None:
    assert compare_image_text(None, rule("ls")) == 0.0
    assert compare_image_text("", rule("ls")) == 0.0
    assert compare_image_text(str(tmp_path / "absent.png"), rule("ls")) == 0.0
    assert compare_image_text(str(tmp_path), rule("ls")) == 0.0
    text = tmp_path / "ls.png"
    text.write_text("user@ubuntu:~$ ls\n")
    assert compare_image_text(str(text), rule("ls")) == 0.0
    bad_dump = tmp_path / "dump.png"  # an XWD header whose pixel data is cut short
    bad_dump.write_bytes(struct.pack(">25I", 100, 7, 2, 24, 50, 50, 0, 0, 32, 0, 32, 32, 200, 4,
                                     0xFF0000, 0xFF00, 0xFF, 8, 256, 0, 50, 50, 0, 0, 0) + b"\0" * 100)
    assert compare_image_text(str(bad_dump), rule("ls")) == 0.0


@pytest.mark.parametrize("rules", [None, "ls", {"text": "ls"}, {"type": "regex", "text": "l+s"},
                                   {"type": "text"}, {"type": "text", "text": 1}])
def test_bad_rules_raise(tmp_path: Path, rules: Any) -> None:
    with pytest.raises(ValueError, match="compare_image_text"):
        compare_image_text(str(tmp_path / "absent.png"), rules)


def test_missing_tesseract_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = save(terminal(), tmp_path / "ls.png")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(RuntimeError, match="tesseract-ocr"):
        compare_image_text(path, rule("ls"))
    assert compare_image_text(str(tmp_path / "absent.png"), rule("ls")) == 0.0  # no OCR needed
