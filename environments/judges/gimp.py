"""GIMP's image checks (OSWorld's names and semantics): edits judged by comparing the agent's image with
the original or a gold one.

Each is called ``metric(result, expected)`` with the getters' local paths (which of the two is the agent's
output is the task's choice, as upstream). Shared rules:

* *structure alike* (``structure_check_by_ssim``): both images at least 7 x 7, converted to RGB, the same
  size, and the mean SSIM over the three channels (scikit-image's defaults, :mod:`environments.judges.images`)
  at least the threshold (0.9 unless a metric says otherwise); different sizes are not alike.
* *structure alike by MSE*: the first image resized (Lanczos) to the second's size, both RGB scaled to
  [0, 1], mean squared difference below the threshold.
* brightness is the mean of the grayscale image; contrast the standard deviation of all pixel values;
  saturation the mean of the HSV image's S channel.

A missing or unreadable image scores 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import structlog

from environments.judges.images import WINDOW, structural_similarity

log = structlog.get_logger(__name__)

SSIM_THRESHOLD = 0.9


def _open(path: str | None) -> Any:
    from PIL import Image, UnidentifiedImageError

    if not path or not Path(path).is_file():
        return None
    try:
        image = Image.open(path)
        image.load()
        return image
    except (OSError, UnidentifiedImageError) as exc:
        log.info("not a readable image", path=path, error=str(exc))
        return None


def structure_alike(first: Any, second: Any, threshold: float = SSIM_THRESHOLD) -> bool:
    """Mean SSIM over the RGB channels of two same-size images is at least ``threshold``."""
    if min(first.size) < WINDOW or min(second.size) < WINDOW or first.size != second.size:
        return False
    a, b = np.asarray(first.convert("RGB")), np.asarray(second.convert("RGB"))
    score = float(np.mean([structural_similarity(a[..., c], b[..., c]) for c in range(3)]))
    return score >= threshold


def structure_alike_by_mse(first: Any, second: Any, threshold: float) -> bool:
    from PIL import Image

    if first.size != second.size:
        first = first.resize(second.size, Image.Resampling.LANCZOS)
    a = np.asarray(first.convert("RGB"), dtype=np.float32) / 255
    b = np.asarray(second.convert("RGB"), dtype=np.float32) / 255
    return float(np.mean((a - b) ** 2)) < threshold


def brightness(image: Any) -> float:
    return float(np.asarray(image.convert("L"), dtype=np.float64).mean())


def _normalize_brightness(image: Any, target: float) -> Any:
    factor = target / max(brightness(image), 1e-12)
    return image.point(lambda value: min(255, max(0, int(value * factor))))


def _pair(result: str | None, expected: str | None) -> tuple[Any, Any] | None:
    first, second = _open(result), _open(expected)
    return None if first is None or second is None else (first, second)


def check_structure_sim(result: str | None, expected: str | None = None, **_: Any) -> float:
    """1 when the two images have the same size and alike structure."""
    pair = _pair(result, expected)
    return float(pair is not None and structure_alike(*pair))


def check_structure_sim_resized(result: str | None, expected: str | None = None, **_: Any) -> float:
    """``result`` cropped to its non-transparent content (when it has transparency), resized to ``expected``'s
    size, then alike in structure."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    source, target = pair
    if source.mode in ("RGBA", "LA") or "transparency" in source.info:
        source = source.convert("RGBA")
        box = source.getchannel("A").getbbox()
        if box is None:
            return 0.0  # fully transparent
        source = source.crop(box).convert("RGB")
    return float(structure_alike(source.resize(target.size), target.convert("RGB")))


def check_file_exists_and_structure_sim(result: str | None, expected: str | None = None, **_: Any) -> float:
    """The exported file exists and is alike in structure with the original."""
    return check_structure_sim(result, expected)


def check_brightness_decrease_and_structure_sim(result: str | None, expected: str | None = None, *,
                                                threshold: float = 0.03, **_: Any) -> float:
    """``result`` darker than ``expected``, and alike by MSE once both are normalized to brightness 128."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    source, target = pair
    darker = brightness(target) > brightness(source)
    alike = structure_alike_by_mse(_normalize_brightness(source, 128), _normalize_brightness(target, 128),
                                   float(threshold))
    return float(darker and alike)


def check_saturation_increase_and_structure_sim(result: str | None, expected: str | None = None,
                                                **_: Any) -> float:
    """``result`` more saturated than ``expected``, with alike hue and value channels."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    source, target = (image.convert("RGB").convert("HSV") for image in pair)
    h1, s1, v1 = source.split()
    h2, s2, v2 = target.split()
    more = float(np.asarray(s2, dtype=np.float64).mean()) < float(np.asarray(s1, dtype=np.float64).mean())
    return float(more and structure_alike(h1, h2) and structure_alike(v1, v2))


def check_contrast_increase_and_structure_sim(result: str | None, expected: str | None = None,
                                              **_: Any) -> float:
    """``result`` of higher contrast than ``expected``, structure alike at SSIM 0.65."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    source, target = pair
    higher = float(np.asarray(target, dtype=np.float32).std()) < float(np.asarray(source, dtype=np.float32).std())
    return float(higher and structure_alike(source, target, 0.65))


def check_palette_and_structure_sim(result: str | None, expected: str | None = None, **_: Any) -> float:
    """``result`` is a palette ('P' mode) image, alike in structure with ``expected``."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    source, target = pair
    return float(source.mode == "P" and structure_alike(source.convert("RGB"), target))


def check_image_mirror(result: str | None, expected: str | None = None, **_: Any) -> float:
    """``expected`` is ``result`` flipped left-right (structure alike at SSIM 0.99)."""
    from PIL import Image

    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    source, target = pair
    return float(structure_alike(source.transpose(Image.Transpose.FLIP_LEFT_RIGHT), target, 0.99))


def check_green_background(result: str | None, expected: str | None = None, **_: Any) -> float:
    """Wherever ``expected`` is not black, ``result`` is green (G above both R and B).

    Upstream walks the pixels as ``array[x, y]``, so only square images (the task's) compare pixel to pixel;
    here the two images must have the same size, compared at the same positions."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    source, target = (np.asarray(image.convert("RGB"), dtype=np.int16) for image in pair)
    if source.shape != target.shape:
        return 0.0
    background = np.any(target != 0, axis=2)
    r, g, b = source[..., 0], source[..., 1], source[..., 2]
    return float(bool(np.all(((g > r) & (g > b))[background])))


def check_triangle_position(result: str | None, **_: Any) -> float:
    """The pixels of one colour have their centroid within 5 % of the image's size of its centre. The colour is
    upstream's pick: the second *least* common one (colours sorted by ascending count, index 1), which on a
    two-colour image is the background, not the triangle its comment intends; kept, so scores match."""
    image = _open(result)
    if image is None:
        return 0.0
    pixels = np.asarray(image.convert("RGB"))
    colours, counts = np.unique(pixels.reshape(-1, 3), axis=0, return_counts=True)
    if len(colours) < 2:
        return 0.0
    triangle = colours[np.argsort(counts, kind="stable")][1]
    centroid = np.argwhere(np.all(pixels == triangle, axis=2)).mean(axis=0)
    centre = np.array(pixels.shape[:2]) / 2
    return float(bool(np.all(np.abs(centroid - centre) < 0.05 * np.array(pixels.shape[:2]))))


def check_textbox_on_leftside(result: str | None, **_: Any) -> float:
    """The leftmost dark pixel (gray < 128) lies within the image's left 5 %."""
    image = _open(result)
    if image is None:
        return 0.0
    gray = np.asarray(image.convert("L"))
    columns = np.flatnonzero((gray < 128).any(axis=0))
    leftmost = int(columns[0]) if columns.size else gray.shape[1]
    return float(leftmost < gray.shape[1] * 0.05)


def check_image_size(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    """The image's width / height equal ``rules``' (either may be absent); with ``ignore_transparent`` (or any
    image carrying a transparency key, as upstream's condition reads) the size of its non-transparent box."""
    image = _open(result)
    if image is None or not isinstance(rules, Mapping):
        return 0.0
    if (rules.get("ignore_transparent", False) and image.mode in ("RGBA", "LA")) or "transparency" in image.info:
        box = image.convert("RGBA").getchannel("A").getbbox()
        width, height = (box[2] - box[0], box[3] - box[1]) if box else (0, 0)
    else:
        width, height = image.size
    return float((rules.get("width") is None or width == rules["width"])
                 and (rules.get("height") is None or height == rules["height"]))


def check_image_file_size(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    """The file is smaller than ``rules['max_size']`` bytes."""
    if not result or not os.path.isfile(result) or not isinstance(rules, Mapping) or "max_size" not in rules:
        return 0.0
    return float(os.path.getsize(result) < rules["max_size"])


def check_config_status(result: str | None, rules: Mapping[str, Any] | None = None, **_: Any) -> float:
    """A gimprc line ``(key ... value)`` whose first word is ``rules['key']`` (or first two words, for a
    two-element key) and whose last word is ``rules['value']``."""
    if not result or not os.path.isfile(result) or not isinstance(rules, Mapping):
        return 0.0
    key, value = rules.get("key"), rules.get("value")
    for line in Path(result).read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        items = line.strip().lstrip("(").rstrip(")").split()
        if not items:
            continue
        if isinstance(key, str) and items[0] == key and items[-1] == value:
            return 1.0
        if isinstance(key, list) and len(key) == 2 and items[:2] == key and items[-1] == value:
            return 1.0
    return 0.0


def compare_image_list(result: Any, expected: Any = None, **_: Any) -> float:
    """Every result image equals its gold one pixel for pixel (the result resized with Lanczos to the gold
    size and converted to its mode first)."""
    from PIL import Image, ImageChops

    results = result if isinstance(result, list) else [result]
    golds = expected if isinstance(expected, list) else [expected]
    for mine, gold in zip(results, golds):
        pair = _pair(mine, gold)
        if pair is None:
            return 0.0
        produced, wanted = pair
        if produced.size != wanted.size:
            produced = produced.resize(wanted.size, Image.Resampling.LANCZOS)
        if produced.mode != wanted.mode:
            produced = produced.convert(wanted.mode)
        if ImageChops.difference(produced, wanted).getbbox():
            return 0.0
    return 1.0
