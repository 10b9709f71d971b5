"""``compare_images``: our numpy SSIM agrees with scikit-image's (the reference OSWorld calls), on random
images and on a real screenshot of an Xvfb display; upstream's resize and base-score rules."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import skimage.metrics as skimage_metrics  # a dev dependency: the reference OSWorld calls
from PIL import Image, ImageDraw

from environments.judges.images import compare_images, structural_similarity


def test_our_ssim_equals_scikit_images_on_random_and_structured_images() -> None:
    rng = np.random.default_rng(0)
    for shape in ((7, 7), (40, 64), (123, 77)):
        a = rng.integers(0, 256, shape, dtype=np.uint8)
        b = np.clip(a.astype(int) + rng.integers(-40, 40, shape), 0, 255).astype(np.uint8)
        for x, y in ((a, b), (a, a), (a, 255 - a)):
            assert structural_similarity(x, y) == pytest.approx(skimage_metrics.structural_similarity(x, y), abs=1e-9)


def test_a_real_screenshot_against_an_edited_copy(tmp_path: Path) -> None:
    assert shutil.which("Xvfb") and shutil.which("import"), "Xvfb / ImageMagick missing: run bash scripts/install.sh"
    shot = tmp_path / "screen.png"
    read, write = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "320x200x24"], pass_fds=(write,),
                            stderr=subprocess.DEVNULL)
    os.close(write)
    try:
        display = ":" + os.read(read, 16).decode().strip()  # written once the server accepts clients
        subprocess.run(["import", "-display", display, "-window", "root", str(shot)], check=True, capture_output=True)
    finally:
        os.close(read)
        xvfb.terminate()
        xvfb.wait()
    image = Image.open(shot).convert("RGB")
    ImageDraw.Draw(image).text((10, 10), "SSIM", fill=(255, 255, 255))
    image.save(tmp_path / "edited.png")
    gray = [np.asarray(Image.open(p).convert("L")) for p in (shot, tmp_path / "edited.png")]
    ours = compare_images(str(shot), str(tmp_path / "edited.png"))
    assert ours == pytest.approx(skimage_metrics.structural_similarity(*gray), abs=1e-9) and ours < 1.0
    assert compare_images(str(shot), str(shot)) == pytest.approx(1.0)


def test_resize_to_the_smaller_size_and_the_base_score_rule(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    big = rng.integers(0, 256, (80, 120), dtype=np.uint8)
    Image.fromarray(big).save(tmp_path / "big.png")
    Image.fromarray(big).resize((60, 40), Image.Resampling.LANCZOS).save(tmp_path / "small.png")
    plain = compare_images(str(tmp_path / "big.png"), str(tmp_path / "small.png"))
    assert 0.5 < plain <= 1.0
    assert compare_images(str(tmp_path / "big.png"), str(tmp_path / "small.png"),
                          reference_base_result=plain - 0.2) == pytest.approx(0.2 / (1 - plain + 0.2))
    assert compare_images(str(tmp_path / "big.png"), str(tmp_path / "small.png"), reference_base_result=plain) == 0.0
    (tmp_path / "junk.png").write_bytes(b"no image")
    assert compare_images(str(tmp_path / "junk.png"), str(tmp_path / "big.png")) == 0.0
    assert compare_images(None, str(tmp_path / "big.png")) == 0.0
    Image.fromarray(big[:5, :5]).save(tmp_path / "tiny.png")
    assert compare_images(str(tmp_path / "tiny.png"), str(tmp_path / "big.png")) == 0.0  # below the SSIM window
