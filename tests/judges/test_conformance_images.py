"""``compare_images`` against OSWorld's own (``desktop_env.evaluators.metrics.vlc``, scikit-image's SSIM) on
generated images: random pixels of drawn sizes and modes, pairs that differ by noise, brightness, a shift or a
size, with and without the ``reference_base_result`` the tasks pass (0.54, 0.11). Scores agree to 1e-6; where
upstream raises (an image under 7 pixels a side, which no task gives) ours scores 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageEnhance

from environments.judges.images import compare_images
from tests.environments.test_metrics_gimp import photo
from tests.judges.upstream import metrics_module

#: vlc.py's module-level imports that compare_images never calls (only absent ones are stubbed)
STUBS = ("acoustid", "cv2", "imagehash", "librosa", "fastdtw", "scipy")
BASES = (None, 0.54, 0.11)


@pytest.fixture(scope="module")
def upstream() -> Any:
    return metrics_module("vlc", STUBS)


def assert_same_score(upstream: Any, result: str, gold: str, base: float | None) -> float:
    options = {} if base is None else {"reference_base_result": base}
    mine = compare_images(result, gold, **options)
    try:
        theirs = float(upstream.compare_images(result, gold, **options))
    except ValueError:  # scikit-image refuses images smaller than its 7x7 window
        assert mine == 0.0
        return mine
    assert mine == pytest.approx(theirs, abs=1e-6), (base, mine, theirs)
    return mine


@st.composite
def image_pairs(draw: st.DrawFn) -> tuple[Image.Image, Image.Image]:
    width, height = draw(st.integers(4, 48)), draw(st.integers(4, 48))
    mode = draw(st.sampled_from(("L", "RGB", "RGBA", "P")))
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    smooth = draw(st.booleans())
    if smooth:  # a gradient with a little noise: SSIM near 1 for near copies
        x, y = np.meshgrid(np.linspace(0, 1, width), np.linspace(0, 1, height))
        pixels = np.clip(np.stack([200 * x, 200 * y, 100 + 50 * x], axis=2) + rng.normal(0, 3, (height, width, 3)),
                         0, 255).astype(np.uint8)
    gold = Image.fromarray(pixels, "RGB")
    change = draw(st.sampled_from(("same", "noise", "brighter", "shift", "resize", "other")))
    if change == "same":
        result = gold.copy()
    elif change == "noise":
        noisy = pixels.astype(int) + rng.integers(-draw(st.integers(1, 40)), 41, pixels.shape)
        result = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8), "RGB")
    elif change == "brighter":
        result = ImageEnhance.Brightness(gold).enhance(draw(st.floats(0.5, 1.5)))
    elif change == "shift":
        result = Image.fromarray(np.roll(pixels, draw(st.integers(1, 3)), axis=1), "RGB")
    elif change == "resize":
        result = gold.resize((draw(st.integers(4, 64)), draw(st.integers(4, 64))))
    else:
        result = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), "RGB")
    convert = (lambda im: im.convert("P", palette=Image.Palette.ADAPTIVE)) if mode == "P" else (lambda im: im.convert(mode))
    return convert(result), convert(gold)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=image_pairs(), base=st.sampled_from(BASES))
def test_generated_images_score_as_osworlds(upstream: Any, tmp_path: Path, pair: tuple[Image.Image, Image.Image],
                                            base: float | None) -> None:
    result, gold = (tmp_path / "result.png", tmp_path / "gold.png")
    pair[0].save(result)
    pair[1].save(gold)
    assert_same_score(upstream, str(result), str(gold), base)


def test_screenshot_sized_images_score_as_osworlds(upstream: Any, tmp_path: Path) -> None:
    """Wallpaper tasks compare full screenshots: the summed-window SSIM must stay exact at 1920x1080."""
    gold = photo((1920, 1080), seed=3)
    cases = {"same": photo((1920, 1080), seed=3), "darker": ImageEnhance.Brightness(gold).enhance(0.8),
             "other": photo((1920, 1080), seed=4).rotate(180), "smaller": gold.resize((1280, 720)).rotate(3)}
    gold.save(tmp_path / "gold.png")
    scores = {}
    for name, image in cases.items():
        image.save(tmp_path / f"{name}.jpg")  # a lossy copy, as a screenshot saved by an app may be
        for base in BASES:
            scores[name, base] = assert_same_score(upstream, str(tmp_path / f"{name}.jpg"), str(tmp_path / "gold.png"),
                                                   base)
    assert scores["same", None] > 0.9 > scores["other", None]
