"""The values a family's parameters take, each pool split once into training and held-out values.

Every pool is a fixed, ordered list (names are built from syllables, the rest are listed), and a value's split
is a property of the value itself (a stable hash of a word; every fourth entry of a listed pool), never of a
seed: a held-out value can appear only in test
variants, whatever seed or count the pool is generated with, so test variants ask for names, keywords and
numbers the policy never saw in training (:func:`plugins.synthesis.families.splits.check_disjoint` verifies
it again on the tasks themselves).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from functools import lru_cache
from typing import Sequence

#: share of every pool held out for the test split (by the value's hash)
HELD_OUT_SHARE = 0.25

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"

#: file extensions (the family's own file types; decoys use others)
EXTENSIONS = ("log", "txt", "csv", "md", "json", "ini", "dat", "bak", "cfg", "xml", "yml", "tsv", "out", "rst",
              "lst", "tmp", "conf", "html", "sql", "org")
#: chmod modes a task can ask for (owner always keeps read and write)
MODES = ("600", "640", "644", "660", "664", "700", "710", "711", "740", "744", "750", "751", "755", "770", "775",
         "701", "705", "741", "754", "760")


def _held_out(pool_name: str, value: str) -> bool:
    values = pool(pool_name)
    if pool_name != "word":  # short listed pools: every fourth value, so each part keeps enough of them
        return values.index(value) % round(1 / HELD_OUT_SHARE) == round(1 / HELD_OUT_SHARE) - 1
    digest = hashlib.sha1(f"{pool_name}:{value}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < HELD_OUT_SHARE


@lru_cache(maxsize=None)
def _names() -> tuple[str, ...]:
    """Pronounceable lower-case words of two or three syllables (``kanu``, ``lofemi``), in a fixed order."""
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    two = ["".join(p) for p in itertools.product(syllables, repeat=2)]
    three = ["".join(p) for p in itertools.product(syllables[::3], repeat=3)]
    words = two + three
    random.Random(1234).shuffle(words)
    return tuple(words)


def pool(name: str) -> tuple[str, ...]:
    """The whole pool ``name``: ``word`` (file, folder, keyword and variable names), ``ext`` or ``mode``."""
    if name == "word":
        return _names()
    if name == "ext":
        return EXTENSIONS
    if name == "mode":
        return MODES
    raise KeyError(f"no value pool {name!r}; the pools are word, ext, mode")


@lru_cache(maxsize=None)
def split_pool(name: str, held_out: bool) -> tuple[str, ...]:
    """The values of pool ``name`` in the held-out part (``held_out``) or the training part."""
    return tuple(v for v in pool(name) if _held_out(name, v) == held_out)


def is_held_out(name: str, value: str) -> bool:
    """Whether ``value`` of pool ``name`` belongs to the held-out (test) part."""
    return _held_out(name, value)


class Draw:
    """Distinct values for one variant: ``draw.take("word", 3)`` never repeats a value within the variant."""

    def __init__(self, rng: random.Random, held_out: bool) -> None:
        self.rng = rng
        self.held_out = held_out
        self.used: set[str] = set()
        #: pool -> the values handed out (what the split check compares across splits)
        self.drawn: dict[str, set[str]] = {}

    def take(self, name: str, count: int = 1, *, exclude: Sequence[str] = ()) -> list[str]:
        values = split_pool(name, self.held_out)
        out: list[str] = []
        blocked = self.used | set(exclude)
        for _ in range(count):
            for _attempt in range(1000):
                value = values[self.rng.randrange(len(values))]
                if value not in blocked:
                    break
            else:
                raise ValueError(f"pool {name!r} ({'held-out' if self.held_out else 'training'} part) has too few "
                                 f"values for {count} distinct draws")
            out.append(value)
            blocked.add(value)
        self.used |= set(out)
        self.drawn.setdefault(name, set()).update(out)
        return out

    def one(self, name: str, *, exclude: Sequence[str] = ()) -> str:
        return self.take(name, 1, exclude=exclude)[0]

    def number(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)
