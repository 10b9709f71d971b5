"""Each distinct screenshot of a training step through the frozen vision tower once.

Sliding-window segmentation puts a screenshot into about 1.8 segments on average (up to K), and a
segment's images go through the vision tower with every micro-batch that holds it. The tower is frozen
(paper, section 3.4), so its output for a screenshot cannot change within a step: a
:class:`StepVisionCache` encodes every distinct screenshot of the step once (by content: the PNG's
SHA-1), keeps the per-image features on the device up to a byte budget, and hands each micro-batch the
features of its images in placeholder order, for the reference pass and the actor pass alike
(transformers' ``mm_encoder_outputs`` input). Screenshots beyond the budget are encoded with the
micro-batch that needs them, as without a cache, and counted.

The features object is the model's own ``get_image_features`` output: ``pooler_output`` a tuple with one
tensor per image and, for Qwen3-VL, ``deepstack_features`` a list (one entry per deepstack layer) of such
tuples. Each image is encoded independently by the tower (its own attention window), so a cached feature
equals the one a batched call computes, to float tolerance.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from core.types import Screenshot, Segment

#: images per vision-tower call while filling the cache (bounds the tower's activations)
ENCODE_CHUNK = 16

EncodeFn = Callable[[Sequence[Screenshot]], Any]


def screenshot_key(screenshot: Screenshot) -> bytes:
    """The cache key: the PNG's full SHA-1 (equal pixels encoded differently are distinct screenshots)."""
    return hashlib.sha1(screenshot.png).digest()


@dataclass
class _Features:
    pooler: Any
    deepstack: list[Any] | None
    nbytes: int


def _split(output: Any) -> list[_Features]:
    """Per-image features of one ``get_image_features`` output."""
    pooler = list(output.pooler_output)
    deep = getattr(output, "deepstack_features", None)
    out = []
    for i, p in enumerate(pooler):
        layers = None if deep is None else [layer[i] for layer in deep]
        nbytes = p.numel() * p.element_size() + sum(t.numel() * t.element_size() for t in layers or ())
        out.append(_Features(p, layers, nbytes))
    return out


@dataclass
class CacheStats:
    """What one step's cache did: ``encoded`` counts vision-tower encodings of single screenshots."""

    distinct: int = 0
    references: int = 0  # screenshot occurrences over the step's segments (what no cache would encode)
    encoded: int = 0
    cached: int = 0
    cached_bytes: int = 0
    over_budget: int = 0

    def metrics(self) -> dict[str, float]:
        return {
            "vision/distinct_images": float(self.distinct),
            "vision/image_references": float(self.references),
            "vision/encodings": float(self.encoded),
            "vision/encodings_per_distinct": self.encoded / self.distinct if self.distinct else 0.0,
            "vision/cached_images": float(self.cached),
            "vision/cache_mib": self.cached_bytes / 2**20,
            "vision/over_budget_images": float(self.over_budget),
        }


@dataclass
class StepVisionCache:
    """Vision features of one step's screenshots, filled once by :meth:`fill`, read per micro-batch."""

    encode: EncodeFn
    tokens: Callable[[Screenshot], int]  # visual tokens of a screenshot (its features' first dimension)
    budget_bytes: int
    output_type: type | None = None
    stats: CacheStats = field(default_factory=CacheStats)
    _features: dict[bytes, _Features] = field(default_factory=dict)
    _bytes_per_token: int | None = None

    def fill(self, segments: Iterable[Segment]) -> None:
        """Encode every distinct screenshot of ``segments`` once, keeping features while the budget allows.

        A screenshot's feature size is its visual-token count times a per-token size learned from the first
        encoding, so screenshots that would not fit are never encoded here (they are at micro-batch time).
        """
        distinct: dict[bytes, Screenshot] = {}
        for seg in segments:
            for image in seg.images:
                self.stats.references += 1
                distinct.setdefault(screenshot_key(image), image)
        self.stats.distinct = len(distinct)
        pending = [(k, s) for k, s in distinct.items() if k not in self._features]
        while pending:
            chunk: list[tuple[bytes, Screenshot]] = []
            planned = self.stats.cached_bytes
            for key, shot in pending[: 1 if self._bytes_per_token is None else ENCODE_CHUNK]:
                size = self.tokens(shot) * (self._bytes_per_token or 0)
                if planned + size > self.budget_bytes:
                    break
                chunk.append((key, shot))
                planned += size
            if not chunk:
                break
            pending = pending[len(chunk):]
            full = False
            for (key, shot), feats in zip(chunk, self._encode([s for _, s in chunk])):
                self._bytes_per_token = self._bytes_per_token or -(-feats.nbytes // max(self.tokens(shot), 1))
                if full or self.stats.cached_bytes + feats.nbytes > self.budget_bytes:
                    pending.append((key, shot))  # larger than planned: keep the bound, stop filling
                    full = True
                    continue
                self._features[key] = feats
                self.stats.cached += 1
                self.stats.cached_bytes += feats.nbytes
            if full:
                break
        self.stats.over_budget = len(pending)

    def features_for(self, images: Sequence[Screenshot]) -> Any:
        """The ``get_image_features``-shaped output for ``images`` in order (misses are encoded now)."""
        keys = [screenshot_key(image) for image in images]
        missing = [i for i, key in enumerate(keys) if key not in self._features]
        fresh = dict(zip(missing, self._encode([images[i] for i in missing]))) if missing else {}
        feats = [fresh[i] if i in fresh else self._features[key] for i, key in enumerate(keys)]
        pooler = tuple(f.pooler for f in feats)
        if feats and feats[0].deepstack is not None:
            layers = [tuple(f.deepstack[d] for f in feats) for d in range(len(feats[0].deepstack))]
            return self.output_type(pooler_output=pooler, deepstack_features=layers)
        return self.output_type(pooler_output=pooler)

    def _encode(self, images: Sequence[Screenshot]) -> list[_Features]:
        output = self.encode(images)
        self.output_type = self.output_type or type(output)
        self.stats.encoded += len(images)
        return _split(output)


__all__ = ["CacheStats", "ENCODE_CHUNK", "StepVisionCache", "screenshot_key"]
