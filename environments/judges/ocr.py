"""Text read from an image by OCR (OSWorld's ``compare_image_text``, from its ``metrics/docs.py``).

* ``compare_image_text(result, rules)`` — 1 when ``rules['text']`` occurs (case-sensitive substring) in the
  text read from the image at ``result``, else 0. The recognized text is joined with single spaces: upstream
  joins easyocr's text boxes with ``' '``; here Tesseract's lines, each stripped, empty ones dropped, are
  joined with ``' '`` (within a line Tesseract already separates words by one space), so text that wraps onto
  the next line matches across the break (``"ls Desktop"`` for a prompt ending in ``ls`` above a listing).
  ``rules`` is a rule getter's ``{"type": "text", "text": ...}``; only type ``text`` exists. Options: none.
  A ``None``/empty path, a missing file or one that is neither an image Pillow reads nor an X11 screen dump
  scores 0, as upstream (whose OCR errors all score 0). X11 screen dumps (what ``xwd -root`` writes, often
  under a ``.png`` name) are decoded here: TrueColor, 16/24/32 bits per pixel, either byte order.

OCR engine: upstream uses easyocr (``Reader(['en'])``: a CRAFT text detector and a CRNN recognizer on
PyTorch). easyocr needs torchvision, which has no wheel for this project's torch, so this module runs
Tesseract (the ``tesseract`` CLI from the Debian package ``tesseract-ocr``, which pulls in the English model
``tesseract-ocr-eng``) with ``-l eng`` and its default automatic page segmentation. The image is first
converted to RGB with Pillow (an alpha channel dropped, not composited, as easyocr's loader does) and handed
to Tesseract as PNG. The engines may read differently:

* small text (under about 10 px tall), low contrast, anti-aliased or subpixel-rendered glyphs, and text on
  busy or gradient backgrounds: Tesseract binarizes the page first and is more likely to drop or garble it;
* light-on-dark text (terminal themes) is read by Tesseract through its inverted-line retry, usually but
  not always as well as dark-on-light;
* scattered labels (icons on a desktop, UI widgets), rotated or curved text: easyocr detects text regions
  anywhere, Tesseract's layout analysis expects lines of text and may miss isolated words;
* look-alike glyphs (``l``/``1``/``I``, ``O``/``0``) are confused by both, not always the same way — the
  OSWorld task using this metric lists both ``ls`` and ``1s`` for that reason.

A missing ``tesseract`` binary raises :class:`RuntimeError` naming the Debian package (only when an image is
to be read: a missing file scores 0 without OCR); so does Tesseract failing on the converted image. A bad
``rules`` raises :class:`ValueError` (upstream logs it and scores 0).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import structlog

log = structlog.get_logger(__name__)

TESSERACT_PACKAGE = "tesseract-ocr"
TESSERACT_TIMEOUT_S = 120
XWD_VERSION = 7
_XWD_HEADER = struct.Struct(">25I")  # XWDFileHeader: 25 big-endian CARD32 fields, then the window name
_XWD_COLOR_SIZE = 12  # one XWDColor entry: pixel (CARD32), red/green/blue (CARD16), flags, pad
_TRUE_COLOR, _DIRECT_COLOR = 4, 5


def _text_rule(rules: Any) -> str:
    if not isinstance(rules, Mapping):
        raise ValueError(f"compare_image_text: expected rules {{'type': 'text', 'text': ...}} (a rule getter's "
                         f"rules), got {rules!r}")
    if rules.get("type") != "text":
        raise ValueError(f"compare_image_text: rules type {rules.get('type')!r} is not supported; use 'text'")
    text = rules.get("text")
    if not isinstance(text, str):
        raise ValueError(f"compare_image_text: rules need 'text' (the string to find), got {rules!r}")
    return text


def _channel(values: np.ndarray, mask: int) -> np.ndarray:
    """The bits of ``mask`` in each pixel value, scaled to 0..255."""
    if mask == 0:
        return np.zeros(values.shape, dtype=np.uint8)
    shift = (mask & -mask).bit_length() - 1
    top = mask >> shift
    return ((values >> shift) & top).astype(np.uint64) * 255 // top


def read_xwd(path: str | Path) -> Any:
    """An X11 screen dump (XWD version 7, TrueColor/DirectColor, 16/24/32 bits per pixel) as a Pillow RGB
    image; :class:`ValueError` for anything else."""
    from PIL import Image

    raw = Path(path).read_bytes()
    if len(raw) < _XWD_HEADER.size:
        raise ValueError("too short for an XWD header")
    fields = _XWD_HEADER.unpack_from(raw)
    header_size, version, pixmap_format, _depth, width, height = fields[:6]
    byte_order, bits_per_pixel, bytes_per_line, visual_class = fields[7], fields[11], fields[12], fields[13]
    red_mask, green_mask, blue_mask, ncolors = fields[14], fields[15], fields[16], fields[19]
    if version != XWD_VERSION or header_size < _XWD_HEADER.size or pixmap_format != 2:
        raise ValueError("not an XWD version 7 ZPixmap dump")
    if visual_class not in (_TRUE_COLOR, _DIRECT_COLOR) or bits_per_pixel not in (16, 24, 32):
        raise ValueError(f"unsupported XWD visual class {visual_class} / {bits_per_pixel} bits per pixel")
    pixel_bytes = bits_per_pixel // 8
    if width == 0 or height == 0 or bytes_per_line < width * pixel_bytes:
        raise ValueError(f"inconsistent XWD geometry {width}x{height}, {bytes_per_line} bytes per line")
    start = header_size + ncolors * _XWD_COLOR_SIZE
    if len(raw) < start + bytes_per_line * height:
        raise ValueError("XWD pixel data is truncated")
    rows = np.frombuffer(raw, dtype=np.uint8, count=bytes_per_line * height, offset=start)
    cells = rows.reshape(height, bytes_per_line)[:, :width * pixel_bytes].reshape(height, width, pixel_bytes)
    weights = [8 * i for i in range(pixel_bytes)]
    if byte_order == 1:  # MSBFirst
        weights.reverse()
    values = np.zeros((height, width), dtype=np.uint64)
    for index, weight in enumerate(weights):
        values |= cells[..., index].astype(np.uint64) << np.uint64(weight)
    rgb = np.stack([_channel(values, mask) for mask in (red_mask, green_mask, blue_mask)], axis=-1)
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


def _load_rgb(path: str) -> Any:
    """The image as RGB (Pillow's formats, then X11 screen dumps), or ``None`` when it is neither."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.load()
            return image.convert("RGB")
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        pillow_error = str(exc)
    try:
        return read_xwd(path)
    except (OSError, ValueError) as exc:
        log.info("not a readable image", path=path, pillow=pillow_error, xwd=str(exc))
        return None


def tesseract_binary() -> str:
    """The ``tesseract`` executable on ``PATH``; :class:`RuntimeError` naming the package when it is absent."""
    binary = shutil.which("tesseract")
    if binary is None:
        raise RuntimeError(f"compare_image_text needs the Tesseract OCR engine: no 'tesseract' on PATH; install "
                           f"the Debian package {TESSERACT_PACKAGE} (apt-get install -y {TESSERACT_PACKAGE})")
    return binary


def ocr_text(image: Any) -> str:
    """Tesseract's English reading of a Pillow image: its non-empty lines, stripped, joined with one space."""
    binary = tesseract_binary()
    env = {**os.environ, "OMP_THREAD_LIMIT": os.environ.get("OMP_THREAD_LIMIT", "1")}
    with tempfile.TemporaryDirectory(prefix="ocr-") as folder:
        source = Path(folder) / "image.png"
        image.save(source, "PNG")
        try:
            done = subprocess.run([binary, str(source), "stdout", "-l", "eng"], capture_output=True, env=env,
                                  timeout=TESSERACT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"compare_image_text: tesseract took over {TESSERACT_TIMEOUT_S} s on a "
                               f"{image.size[0]}x{image.size[1]} image") from None
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"compare_image_text: tesseract failed (exit {done.returncode}): {stderr} — the "
                           f"English model comes with the Debian package tesseract-ocr-eng")
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    return " ".join(line.strip() for line in lines if line.strip())


def compare_image_text(result: str | None, rules: Any = None, **_: Any) -> float:
    """1 when ``rules['text']`` occurs in the text OCR reads from the image at ``result``."""
    target = _text_rule(rules)
    if not result or not Path(result).is_file():
        return 0.0
    image = _load_rgb(str(result))
    if image is None:
        return 0.0
    text = ocr_text(image)
    found = target in text
    log.info("compare_image_text", target=target, ocr=text, found=found)
    return 1.0 if found else 0.0
