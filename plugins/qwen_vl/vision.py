"""The Qwen-VL image processor, built from settings or a model directory's preprocessor config.

Uses ``Qwen2VLImageProcessorPil`` (PIL + numpy); the torchvision-backed
processors cannot run without torchvision. The placeholder count of a
screenshot comes from its pixel size alone (``smart_resize``), so rendering a
conversation never decodes a PNG.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Sequence

from core.types import Screenshot

Family = Literal["qwen3_vl", "qwen2_5_vl", "qwen2_vl"]

_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class VisionSettings:
    """Patch geometry and resize bounds of the image processor (Qwen's preprocessor_config.json)."""

    patch_size: int
    merge_size: int
    temporal_patch_size: int
    min_pixels: int
    max_pixels: int
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]

    @classmethod
    def for_family(
        cls, family: Family, *, min_pixels: int | None = None, max_pixels: int | None = None
    ) -> VisionSettings:
        """The released checkpoints' defaults: Qwen3-VL uses 16-pixel patches, Qwen2/2.5-VL 14-pixel ones."""
        if family == "qwen3_vl":
            base = cls(16, 2, 2, 65536, 16777216, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
        elif family in ("qwen2_5_vl", "qwen2_vl"):
            base = cls(14, 2, 2, 3136, 12845056, _CLIP_MEAN, _CLIP_STD)
        else:
            raise ValueError(f"unknown Qwen-VL family {family!r}: use qwen3_vl, qwen2_5_vl or qwen2_vl")
        return base.with_bounds(min_pixels, max_pixels)

    @classmethod
    def from_preprocessor_config(
        cls, config: dict[str, Any], *, min_pixels: int | None = None, max_pixels: int | None = None
    ) -> VisionSettings:
        size = config.get("size") or {}
        base = cls(
            patch_size=int(config.get("patch_size", 14)),
            merge_size=int(config.get("merge_size", 2)),
            temporal_patch_size=int(config.get("temporal_patch_size", 2)),
            min_pixels=int(config.get("min_pixels") or size.get("shortest_edge") or size.get("min_pixels") or 3136),
            max_pixels=int(config.get("max_pixels") or size.get("longest_edge") or size.get("max_pixels") or 12845056),
            image_mean=tuple(config.get("image_mean", _CLIP_MEAN)),  # type: ignore[arg-type]
            image_std=tuple(config.get("image_std", _CLIP_STD)),  # type: ignore[arg-type]
        )
        return base.with_bounds(min_pixels, max_pixels)

    def with_bounds(self, min_pixels: int | None, max_pixels: int | None) -> VisionSettings:
        lo = self.min_pixels if min_pixels is None else min_pixels
        hi = self.max_pixels if max_pixels is None else max_pixels
        if lo <= 0 or hi < lo:
            raise ValueError(f"image pixel bounds min_pixels={lo}, max_pixels={hi}: need 0 < min_pixels <= max_pixels")
        return VisionSettings(**{**asdict(self), "min_pixels": lo, "max_pixels": hi})

    @property
    def factor(self) -> int:
        """Image sides are resized to multiples of this (32 for Qwen3-VL, 28 for Qwen2/2.5-VL)."""
        return self.patch_size * self.merge_size


class ImageProcessor:
    """Screenshots -> (pixel_values, image_grid_thw), and the placeholder count of each screenshot."""

    def __init__(self, settings: VisionSettings) -> None:
        from transformers import Qwen2VLImageProcessorPil

        self.settings = settings
        self._hf = Qwen2VLImageProcessorPil(
            patch_size=settings.patch_size,
            merge_size=settings.merge_size,
            temporal_patch_size=settings.temporal_patch_size,
            min_pixels=settings.min_pixels,
            max_pixels=settings.max_pixels,
            image_mean=list(settings.image_mean),
            image_std=list(settings.image_std),
        )

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, *, min_pixels: int | None = None, max_pixels: int | None = None
    ) -> ImageProcessor:
        path = Path(directory) / "preprocessor_config.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"{str(path)!r} is missing: a Qwen-VL model directory needs its image processor config"
            )
        config = json.loads(path.read_text())
        return cls(VisionSettings.from_preprocessor_config(config, min_pixels=min_pixels, max_pixels=max_pixels))

    def save_pretrained(self, directory: str | Path) -> None:
        self._hf.save_pretrained(str(directory))

    def resized_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) the processor resizes an image to."""
        return _resized_size(self.settings, width, height)

    def image_token_count(self, screenshot: Screenshot) -> int:
        """Visual tokens (``<|image_pad|>`` placeholders) the screenshot becomes in the language model."""
        w, h = self.resized_size(screenshot.width, screenshot.height)
        return (w // self.settings.patch_size) * (h // self.settings.patch_size) // self.settings.merge_size**2

    def process(self, screenshots: Sequence[Screenshot]) -> tuple[Any, Any]:
        """``(pixel_values, image_grid_thw)`` torch tensors for the screenshots, in order."""
        import torch

        if not screenshots:
            channels = 3 * self.settings.temporal_patch_size * self.settings.patch_size**2
            return torch.zeros((0, channels)), torch.zeros((0, 3), dtype=torch.long)
        out = self._hf(images=[s.to_pil() for s in screenshots], return_tensors="pt")
        return out["pixel_values"], out["image_grid_thw"]


@lru_cache(maxsize=4096)
def _resized_size(settings: VisionSettings, width: int, height: int) -> tuple[int, int]:
    # Cached: renderers ask for every screenshot of a conversation on every render.
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    s = settings
    h, w = smart_resize(height, width, factor=s.factor, min_pixels=s.min_pixels, max_pixels=s.max_pixels)
    return w, h
