"""The Qwen-VL image processor, built from settings or a model directory's preprocessor config.

Uses ``Qwen2VLImageProcessorPil`` (PIL + numpy); the torchvision-backed
processors cannot run without torchvision. The placeholder count of a
screenshot comes from its pixel size alone (``smart_resize``), so rendering a
conversation never decodes a PNG.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
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


#: bytes of preprocessed pixels an image processor keeps for screenshots it has seen (least recently used out)
MEMO_BYTES = 256 << 20


class ImageProcessor:
    """Screenshots -> (pixel_values, image_grid_thw), and the placeholder count of each screenshot.

    A screenshot is preprocessed once while it stays in a bounded memo keyed by its PNG's content: a rollout
    re-renders the last K screenshots with every turn and a training step holds each in several segments,
    and the processor treats every image on its own, so the memo changes no value.
    """

    def __init__(self, settings: VisionSettings, *, memo_bytes: int = MEMO_BYTES) -> None:
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
        self.memo_bytes = memo_bytes
        self._memo: OrderedDict[bytes, tuple[Any, Any]] = OrderedDict()
        self._memo_size = 0
        self._lock = threading.Lock()
        self.processed = 0  # screenshots actually preprocessed (memo misses)

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
        keys = [hashlib.sha1(s.png).digest() for s in screenshots]
        with self._lock:
            found = {k: self._memo[k] for k in keys if k in self._memo}
            for k in found:
                self._memo.move_to_end(k)
        missing = {k: s for k, s in zip(keys, screenshots) if k not in found}
        if missing:
            out = self._hf(images=[s.to_pil() for s in missing.values()], return_tensors="pt")
            grids = out["image_grid_thw"]
            pieces = torch.split(out["pixel_values"], grids.prod(dim=-1).tolist())
            fresh = {k: (p, g) for k, p, g in zip(missing, pieces, grids)}
            found.update(fresh)
            self._remember(fresh)
        return torch.cat([found[k][0] for k in keys]), torch.stack([found[k][1] for k in keys])

    def _remember(self, fresh: dict[bytes, tuple[Any, Any]]) -> None:
        with self._lock:
            self.processed += len(fresh)
            for key, (pixels, grid) in fresh.items():
                size = pixels.numel() * pixels.element_size()
                if size > self.memo_bytes or key in self._memo:
                    continue
                self._memo[key] = (pixels, grid)
                self._memo_size += size
            while self._memo_size > self.memo_bytes:
                _, (pixels, _) = self._memo.popitem(last=False)
                self._memo_size -= pixels.numel() * pixels.element_size()


@lru_cache(maxsize=4096)
def _resized_size(settings: VisionSettings, width: int, height: int) -> tuple[int, int]:
    # Cached: renderers ask for every screenshot of a conversation on every render.
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    s = settings
    h, w = smart_resize(height, width, factor=s.factor, min_pixels=s.min_pixels, max_pixels=s.max_pixels)
    return w, h
