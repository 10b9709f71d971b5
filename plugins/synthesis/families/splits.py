"""A family pool's layout: how many variants of which family go to which split.

``train`` and ``validation`` variants draw from the training half of every value pool and the first
paraphrases; ``test`` variants draw only held-out values (and may use each family's held-out paraphrase);
``heldout`` variants are whole families that no other split contains (reported apart, not a target). The
variants of a split are numbered, so a pool is the same list of tasks for the same seed and counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

from core.errors import ConfigError

from plugins.synthesis.families import CATALOG
from plugins.synthesis.families.spec import Variant


@dataclass(frozen=True)
class PoolLayout:
    """Per-family variant counts of each split, and the families held out whole."""

    train: int = 40
    validation: int = 4
    test: int = 8
    heldout: int = 30
    heldout_families: tuple[str, ...] = ("copy-ext", "move-named")
    families: tuple[str, ...] | None = None  # None: every family in the catalog
    #: per-family count overrides, {family: {split: count}}
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def chosen(self) -> list[str]:
        names = list(self.families) if self.families is not None else CATALOG.names()
        unknown = [n for n in [*names, *self.heldout_families, *self.counts] if n not in CATALOG.families]
        if unknown:
            raise ConfigError([f"unknown task family {unknown[0]!r}; the families are {', '.join(CATALOG.names())}"])
        return names

    def count(self, family: str, split: str) -> int:
        held = family in self.heldout_families
        if (split == "heldout") != held:
            return 0
        default = {"train": self.train, "validation": self.validation, "test": self.test, "heldout": self.heldout}
        return int(self.counts.get(family, {}).get(split, default[split]))

    def slots(self) -> Iterator[tuple[str, str, int]]:
        """(family, split, index) of every variant, family by family."""
        for family in self.chosen():
            for split in ("train", "validation", "test", "heldout"):
                for index in range(self.count(family, split)):
                    yield family, split, index


def plan_variants(layout: PoolLayout, seed: int) -> list[Variant]:
    """Every variant of the pool: deterministic in (layout, seed)."""
    return [CATALOG.get(family).variant(split, index, seed) for family, split, index in layout.slots()]
