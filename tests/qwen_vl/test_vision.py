"""The PIL Qwen-VL image processor: visual-token counts and processed grids."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.qwen_vl.vision import ImageProcessor, VisionSettings
from tests.qwen_vl.helpers import screenshot


def test_desktop_screenshot_token_counts():
    desktop = screenshot(1280, 800)
    qwen3 = ImageProcessor(VisionSettings.for_family("qwen3_vl"))
    assert qwen3.settings.factor == 32
    assert qwen3.resized_size(1280, 800) == (1280, 800)
    assert qwen3.image_token_count(desktop) == 1000
    qwen25 = ImageProcessor(VisionSettings.for_family("qwen2_5_vl"))
    assert qwen25.settings.factor == 28
    assert qwen25.resized_size(1280, 800) == (1288, 812)
    assert qwen25.image_token_count(desktop) == (1288 // 14) * (812 // 14) // 4


@settings(max_examples=25, deadline=None)
@given(
    family=st.sampled_from(["qwen3_vl", "qwen2_5_vl", "qwen2_vl"]),
    width=st.integers(20, 300),
    height=st.integers(20, 300),
)
def test_processed_grid_matches_the_token_count(family, width, height):
    processor = ImageProcessor(VisionSettings.for_family(family, min_pixels=1024, max_pixels=160 * 160))
    shot = screenshot(width, height, seed=width * 1000 + height)
    pixel_values, grid = processor.process([shot])
    merge = processor.settings.merge_size
    assert grid.shape == (1, 3)
    assert int(grid.prod()) // merge**2 == processor.image_token_count(shot)
    assert pixel_values.shape[0] == int(grid.prod())
    w, h = processor.resized_size(width, height)
    assert w % processor.settings.factor == 0 and h % processor.settings.factor == 0
    assert 1024 <= w * h <= 160 * 160


def test_several_images_concatenate_in_order():
    processor = ImageProcessor(VisionSettings.for_family("qwen3_vl", min_pixels=1024, max_pixels=128 * 128))
    shots = [screenshot(64, 64, 1), screenshot(128, 64, 2)]
    pixel_values, grid = processor.process(shots)
    assert grid.tolist() == [[1, 4, 4], [1, 4, 8]]
    assert pixel_values.shape[0] == 16 + 32
    empty_values, empty_grid = processor.process([])
    assert empty_values.shape[0] == 0 and empty_grid.shape == (0, 3)


def test_each_screenshot_is_preprocessed_once_while_it_stays_in_the_memo():
    settings = VisionSettings.for_family("qwen3_vl", min_pixels=1024, max_pixels=128 * 128)
    a, b, c = screenshot(64, 64, 1), screenshot(128, 64, 2), screenshot(64, 64, 3)
    processor, fresh = ImageProcessor(settings), ImageProcessor(settings, memo_bytes=0)
    first = processor.process([a, b])
    again = processor.process([b, a, c, a])
    assert processor.processed == 3  # a and b came from the memo the second time
    expected = fresh.process([b, a, c, a])
    assert fresh.processed == 3  # duplicates within one call are processed once even without a memo
    assert again[0].equal(expected[0]) and again[1].equal(expected[1])
    assert first[0].equal(fresh.process([a, b])[0])
    one_image = first[0][:16].numel() * first[0].element_size()  # a: 16 patches
    small = ImageProcessor(settings, memo_bytes=one_image)
    small.process([a])
    small.process([c])  # evicts a, the least recently used
    small.process([a])
    assert small.processed == 3


def test_settings_round_trip_through_a_directory(tmp_path):
    processor = ImageProcessor(VisionSettings.for_family("qwen3_vl", min_pixels=2048, max_pixels=99 * 99))
    processor.save_pretrained(tmp_path)
    loaded = ImageProcessor.from_pretrained(tmp_path)
    assert loaded.settings == processor.settings
    assert ImageProcessor.from_pretrained(tmp_path, max_pixels=50_000).settings.max_pixels == 50_000


def test_bad_settings_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="min_pixels <= max_pixels"):
        VisionSettings.for_family("qwen3_vl", min_pixels=5000, max_pixels=100)
    with pytest.raises(ValueError, match="unknown Qwen-VL family"):
        VisionSettings.for_family("llava")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="preprocessor_config.json"):
        ImageProcessor.from_pretrained(tmp_path)
