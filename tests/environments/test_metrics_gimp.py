"""GIMP's image checks on real image files made with Pillow: each edit the task asks for scores 1, the
unedited or wrongly edited image 0; the multi-channel SSIM agrees with scikit-image's (OSWorld's reference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import skimage.metrics as skimage_metrics  # a dev dependency: the reference OSWorld calls
from PIL import Image, ImageDraw, ImageEnhance, ImageOps

from environments.judges import gimp
from environments.judges.images import structural_similarity


def photo(size: tuple[int, int] = (96, 64), seed: int = 0, noise: float = 4.0) -> Image.Image:
    """A structured colour image: gradients, shapes and a little noise."""
    rng = np.random.default_rng(seed)
    w, h = size
    x, y = np.meshgrid(np.linspace(0, 1, w), np.linspace(0, 1, h))
    pixels = np.stack([160 * x + 40, 140 * y + 50, 90 * (1 - x) + 60], axis=2)
    pixels += rng.normal(0, noise, pixels.shape)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    draw.rectangle((10, 10, 40, 30), fill=(200, 40, 40))
    draw.ellipse((50, 20, 85, 55), fill=(30, 90, 200))
    return image


def save(image: Image.Image, path: Path) -> str:
    image.save(path)
    return str(path)


def test_multichannel_ssim_is_scikit_images_channel_mean(tmp_path: Path) -> None:
    a, b = np.asarray(photo()), np.asarray(ImageEnhance.Contrast(photo()).enhance(1.4))
    ours = np.mean([structural_similarity(a[..., c], b[..., c]) for c in range(3)])
    assert ours == pytest.approx(skimage_metrics.structural_similarity(a, b, win_size=7, channel_axis=2), abs=1e-9)


def test_structure_checks(tmp_path: Path) -> None:
    original = save(photo(), tmp_path / "original.png")
    copy = save(photo(), tmp_path / "copy.png")
    other = save(photo(seed=1).rotate(90, expand=True).resize((96, 64)), tmp_path / "other.png")
    smaller = save(photo().resize((48, 32)), tmp_path / "smaller.png")
    assert gimp.check_structure_sim(copy, original) == 1.0
    assert gimp.check_structure_sim(other, original) == 0.0
    assert gimp.check_structure_sim(smaller, original) == 0.0  # different sizes are never alike
    assert gimp.check_file_exists_and_structure_sim(copy, original) == 1.0
    assert gimp.check_file_exists_and_structure_sim(str(tmp_path / "missing.png"), original) == 0.0
    smooth = save(photo(noise=0), tmp_path / "smooth.png")  # pixel noise does not survive a resize
    half = save(photo(noise=0).resize((48, 32)), tmp_path / "half.png")
    assert gimp.check_structure_sim_resized(half, smooth) == 1.0  # resized back up
    padded = Image.new("RGBA", (140, 100), (0, 0, 0, 0))
    padded.paste(photo(noise=0).convert("RGBA"), (20, 18))
    assert gimp.check_structure_sim_resized(save(padded, tmp_path / "padded.png"), smooth) == 1.0  # content box
    assert gimp.check_structure_sim_resized(other, original) == 0.0
    assert gimp.check_structure_sim(str(tmp_path / "nope.png"), original) == 0.0


def test_brightness_saturation_and_contrast_edits(tmp_path: Path) -> None:
    original = save(photo(), tmp_path / "original.png")
    darker = save(ImageEnhance.Brightness(photo()).enhance(0.7), tmp_path / "darker.png")
    brighter = save(ImageEnhance.Brightness(photo()).enhance(1.2), tmp_path / "brighter.png")
    assert gimp.check_brightness_decrease_and_structure_sim(darker, original) == 1.0
    assert gimp.check_brightness_decrease_and_structure_sim(brighter, original) == 0.0
    unrelated_dark = save(ImageEnhance.Brightness(photo(seed=3).transpose(Image.Transpose.ROTATE_180)).enhance(0.7),
                          tmp_path / "unrelated.png")
    assert gimp.check_brightness_decrease_and_structure_sim(unrelated_dark, original, threshold=0.01) == 0.0

    saturated = save(ImageEnhance.Color(photo()).enhance(1.6), tmp_path / "saturated.png")
    dull = save(ImageEnhance.Color(photo()).enhance(0.5), tmp_path / "dull.png")
    assert gimp.check_saturation_increase_and_structure_sim(saturated, original) == 1.0
    assert gimp.check_saturation_increase_and_structure_sim(dull, original) == 0.0

    contrasty = save(ImageEnhance.Contrast(photo()).enhance(1.5), tmp_path / "contrast.png")
    flat = save(ImageEnhance.Contrast(photo()).enhance(0.6), tmp_path / "flat.png")
    assert gimp.check_contrast_increase_and_structure_sim(contrasty, original) == 1.0
    assert gimp.check_contrast_increase_and_structure_sim(flat, original) == 0.0


def test_palette_mirror_and_green_background(tmp_path: Path) -> None:
    original = save(photo(), tmp_path / "original.png")
    indexed = save(photo().convert("P", palette=Image.Palette.ADAPTIVE, colors=256), tmp_path / "indexed.png")
    assert gimp.check_palette_and_structure_sim(indexed, original) == 1.0
    assert gimp.check_palette_and_structure_sim(original, original) == 0.0  # RGB, not indexed

    mirrored = save(ImageOps.mirror(photo()), tmp_path / "mirrored.png")
    assert gimp.check_image_mirror(original, mirrored) == 1.0
    assert gimp.check_image_mirror(original, original) == 0.0

    mask = Image.new("RGB", (64, 64), (0, 0, 0))  # the object is black, the background anything else
    ImageDraw.Draw(mask).rectangle((0, 0, 63, 20), fill=(255, 255, 255))
    green = Image.new("RGB", (64, 64), (20, 180, 30))
    red = green.copy()
    ImageDraw.Draw(red).rectangle((0, 0, 5, 5), fill=(200, 30, 30))  # a red patch in the background
    target = save(mask, tmp_path / "mask.png")
    assert gimp.check_green_background(save(green, tmp_path / "green.png"), target) == 1.0
    assert gimp.check_green_background(save(red, tmp_path / "red.png"), target) == 0.0


def test_triangle_and_textbox_positions(tmp_path: Path) -> None:
    def scene(apex_x: int) -> str:
        image = Image.new("RGB", (100, 100), (255, 255, 255))
        draw = ImageDraw.Draw(image)
        draw.polygon([(apex_x, 30), (apex_x - 15, 60), (apex_x + 15, 60)], fill=(250, 220, 0))  # centroid y 50
        draw.point((2, 2), fill=(0, 0, 0))  # the rarest colour: upstream's pick is the second rarest
        return save(image, tmp_path / f"triangle-{apex_x}.png")

    assert gimp.check_triangle_position(scene(50)) == 1.0
    assert gimp.check_triangle_position(scene(20)) == 0.0

    def text_at(x: int) -> str:
        image = Image.new("RGB", (200, 80), (255, 255, 255))
        ImageDraw.Draw(image).text((x, 30), "Hello", fill=(0, 0, 0))
        return save(image, tmp_path / f"text-{x}.png")

    assert gimp.check_textbox_on_leftside(text_at(2)) == 1.0
    assert gimp.check_textbox_on_leftside(text_at(60)) == 0.0


def test_size_file_size_config_and_image_lists(tmp_path: Path) -> None:
    image = save(photo((128, 96)), tmp_path / "resized.png")
    assert gimp.check_image_size(image, {"width": 128, "height": 96}) == 1.0
    assert gimp.check_image_size(image, {"height": 96}) == 1.0
    assert gimp.check_image_size(image, {"width": 64}) == 0.0
    framed = Image.new("RGBA", (100, 100), (0, 0, 0, 0))
    framed.paste(Image.new("RGBA", (40, 30), (9, 9, 9, 255)), (5, 5))
    framed_path = save(framed, tmp_path / "framed.png")
    assert gimp.check_image_size(framed_path, {"width": 40, "height": 30, "ignore_transparent": True}) == 1.0
    assert gimp.check_image_size(framed_path, {"width": 100, "height": 100}) == 1.0

    size = Path(image).stat().st_size
    assert gimp.check_image_file_size(image, {"max_size": size + 1}) == 1.0
    assert gimp.check_image_file_size(image, {"max_size": size}) == 0.0

    gimprc = tmp_path / "gimprc"
    gimprc.write_text("# GIMP gimprc\n\n(undo-levels 100)\n(default-image (width 1920))\n", encoding="utf-8")
    assert gimp.check_config_status(str(gimprc), {"type:": "key-value", "key": "undo-levels", "value": "100"}) == 1.0
    assert gimp.check_config_status(str(gimprc), {"key": "undo-levels", "value": "5"}) == 0.0
    assert gimp.check_config_status(str(gimprc), {"key": ["default-image", "(width"], "value": "1920"}) == 1.0
    assert gimp.check_config_status(None, {"key": "undo-levels", "value": "100"}) == 0.0

    gold = save(photo(), tmp_path / "gold.png")
    same = save(photo(), tmp_path / "same.png")
    changed = photo()
    changed.putpixel((3, 3), (0, 0, 0))
    assert gimp.compare_image_list([same], [gold]) == 1.0
    assert gimp.compare_image_list(same, gold) == 1.0
    assert gimp.compare_image_list([same, save(changed, tmp_path / "changed.png")], [gold, gold]) == 0.0
