"""Image metrics (OSWorld's names): ``compare_images`` by structural similarity (SSIM).

``compare_images(result, expected, reference_base_result=None)``: both images in grayscale, resized (Lanczos)
to the smaller size as upstream picks it (the lexicographically smaller ``(width, height)``), then the mean
SSIM with scikit-image's defaults -- a 7x7 uniform window, sample covariance, K1 = 0.01, K2 = 0.03, data
range 255, the 3-pixel border left out -- computed here with numpy. With ``reference_base_result`` b the
score is ``(ssim - b) / (1 - b)`` when ``ssim >= b + 0.01``, else 0 (the task's wallpaper must have changed
towards the gold one). Unreadable or missing images score 0, and so do images under 7 pixels a side; upstream
raises on both (no task gives them). Scores equal upstream's to 1e-6 (tests/judges/test_conformance_images.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import structlog

log = structlog.get_logger(__name__)

WINDOW = 7
K1, K2 = 0.01, 0.03
DATA_RANGE = 255.0
BASE_EPSILON = 0.01


def _box_mean(image: np.ndarray, size: int) -> np.ndarray:
    """Mean over every ``size`` x ``size`` window that fits (a 'valid' uniform filter), by an integral image."""
    integral = np.pad(image, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    total = integral[size:, size:] - integral[:-size, size:] - integral[size:, :-size] + integral[:-size, :-size]
    return total / (size * size)


def structural_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two same-shape grayscale images (scikit-image's defaults, see the module docstring)."""
    if a.shape != b.shape:
        raise ValueError(f"images differ in shape: {a.shape} vs {b.shape}")
    if min(a.shape) < WINDOW:
        raise ValueError(f"images of {a.shape} are smaller than the {WINDOW}x{WINDOW} SSIM window")
    x, y = a.astype(np.float64), b.astype(np.float64)
    ux, uy = _box_mean(x, WINDOW), _box_mean(y, WINDOW)
    uxx, uyy, uxy = _box_mean(x * x, WINDOW), _box_mean(y * y, WINDOW), _box_mean(x * y, WINDOW)
    n = WINDOW * WINDOW
    norm = n / (n - 1)  # sample covariance
    vx, vy, vxy = norm * (uxx - ux * ux), norm * (uyy - uy * uy), norm * (uxy - ux * uy)
    c1, c2 = (K1 * DATA_RANGE) ** 2, (K2 * DATA_RANGE) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return float(s.mean())


def _gray(path: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.convert("L")
    except (OSError, UnidentifiedImageError) as exc:
        log.info("not a readable image", path=path, error=str(exc))
        return None


def compare_images(result: str | None, expected: str | None = None, *, reference_base_result: float | None = None,
                   **_: Any) -> float:
    """SSIM of the result image against the gold one (see the module docstring)."""
    from PIL import Image

    if not result or not expected or not Path(result).is_file() or not Path(expected).is_file():
        return 0.0
    first, second = _gray(result), _gray(expected)
    if first is None or second is None:
        return 0.0
    size = min(first.size, second.size)  # upstream's choice: tuples compare width first
    a = np.asarray(first.resize(size, Image.Resampling.LANCZOS))
    b = np.asarray(second.resize(size, Image.Resampling.LANCZOS))
    try:
        similarity = structural_similarity(a, b)
    except ValueError as exc:
        log.info("images cannot be compared", error=str(exc))
        return 0.0
    if reference_base_result is None:
        return similarity
    base = float(reference_base_result)
    return (similarity - base) / (1 - base) if similarity >= base + BASE_EPSILON else 0.0
