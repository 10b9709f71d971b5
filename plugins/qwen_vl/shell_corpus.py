"""A generic terminal corpus for pretraining a tiny Qwen-VL: requests that name files, folders and words, each
answered by one command that uses exactly those names.

It stands in for what a released checkpoint brings (it has read a lot of shell): the habit of copying a name
from the request into the command. It holds none of the task families' commands (no ``mv``, ``cp``, ``rm``, ``echo``,
``wc``, ``grep``, ``sort``, ``uniq``, ``chmod``, ``ln``, ``tar``, ``touch``, ``mkdir``, no ``>>``/``>``
redirection) and draws names and extensions only from the training half of the family value pools
(:mod:`plugins.synthesis.families.values`), so no test-split value is ever trained on.

Half the names, and all values of a third of the templates, are random character strings instead (lower
case, upper case joined by ``_``, digits), as the files and variables of a real shell history are: the base
learns to copy what a request names, piece by piece, rather than to recall names it knows. Without them a test
name such as ``.tsv`` or ``SUPA_DIR`` can need a token the tiny model never produced in any training target,
whatever RL does (8 of 42 test tasks did). A string that contains a held-out value of any pool whole is drawn
again.

Each example is rendered in the agent's own prompt format (:mod:`core.prompt`: system prompt,
``Task: <request>``, a screenshot) with the response in the tool-call action format; the screenshot is a
**synthetic** terminal image drawn with PIL, not a desktop capture.
"""

from __future__ import annotations

import io
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from core.types import Action, Screenshot
from environments.actions import format_response
from plugins.synthesis.families.values import split_pool

#: bump when the corpus changes: it is part of the pretrained base's cache key
CORPUS_VERSION = 2

#: (request, command) templates; {a} {b}: names, {e}: an extension, {n}: a number; {r} {x}: random lower-case
#: strings, {R}: a random upper-case identifier, {d}: a random digit string, {o}: three octal digits
TEMPLATES: tuple[tuple[str, str], ...] = (
    ("Show the contents of ~/{a}/{b}.{e}.", "cat ~/{a}/{b}.{e}"),
    ("Print the file {b}.{e} that is in ~/{a}.", "cat ~/{a}/{b}.{e}"),
    ("What does ~/{b}.{e} say? Print it.", "cat ~/{b}.{e}"),
    ("List what is in ~/{a}.", "ls ~/{a}"),
    ("What files does the folder ~/{a}/{b} hold? List them.", "ls ~/{a}/{b}"),
    ("List the .{e} files of ~/{a}.", "ls ~/{a}/*.{e}"),
    ("Find every file named *.{e} under ~/{b}.", "find ~/{b} -name '*.{e}'"),
    ("Show the full path of ~/{a}/{b}.{e}.", "realpath ~/{a}/{b}.{e}"),
    ("Show ~/{b}.{e} in the long listing format.", "ls -l ~/{b}.{e}"),
    ("Go into the directory ~/{a}/{b}.", "cd ~/{a}/{b}"),
    ("Change the working directory to ~/{a}.", "cd ~/{a}"),
    ("Open ~/{a}/{b}.{e} in the text editor.", "mousepad ~/{a}/{b}.{e}"),
    ("Edit {b}.{e} in ~/{a} with mousepad.", "mousepad ~/{a}/{b}.{e}"),
    ("Show the first {n} lines of ~/{a}.{e}.", "head -n {n} ~/{a}.{e}"),
    ("Show the last {n} lines of ~/{b}/{a}.{e}.", "tail -n {n} ~/{b}/{a}.{e}"),
    ("How big is ~/{a}? Show its disk usage.", "du -sh ~/{a}"),
    ("Show details of the file ~/{a}/{b}.{e}.", "stat ~/{a}/{b}.{e}"),
    ("Which type of file is ~/{b}.{e}?", "file ~/{b}.{e}"),
    ("Show the lines of ~/{a}.{e} with numbers.", "cat -n ~/{a}.{e}"),
    ("Compare ~/{a}.{e} with ~/{b}.{e}.", "diff ~/{a}.{e} ~/{b}.{e}"),
    ("Show the contents of ~/{r}.", "cat ~/{r}"),
    ("What is in the folder ~/{r}? List it.", "ls ~/{r}"),
    ("Print the file ~/{a}/{r}.{x}.", "cat ~/{a}/{r}.{x}"),
    ("Show the value of the environment variable {R}.", "printenv {R}"),
    ("Is {R} set? Print its value.", "printenv {R}"),
    ("Show the first {d} bytes of ~/{r}.{x}.", "head -c {d} ~/{r}.{x}"),
    ("Show the details of ~/{r}{d}.", "stat ~/{r}{d}"),
    ("Show the last {o} bytes of ~/{a}/{b}.{e}.", "tail -c {o} ~/{a}/{b}.{e}"),
    ("Print ~/{a}/{b}.{e} from line {o} on.", "tail -n +{o} ~/{a}/{b}.{e}"),
    ("Show ~/{a}.{e} and then ~/{b}/{r}.{x}.", "cat ~/{a}.{e} ~/{b}/{r}.{x}"),
    ("Here, list the entries {a}, {b} and {r}.", "ls -d {a} {b} {r}"),
    ("Show which command runs for {r}.", "type {r}"),
)

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_UPPER = _LOWER.upper()
_DIGITS = "0123456789"


@dataclass(frozen=True)
class Example:
    request: str
    response: str


def examples(count: int, seed: int, pieces: Sequence[str] = ()) -> list[Example]:
    """``count`` requests with their one-command responses, deterministic in ``seed`` (and ``pieces``: the
    tokenizer's letter and digit pieces, :func:`word_pieces`, that random strings are built from beside single
    characters, so that every piece of the vocabulary is a training target somewhere)."""
    rng = random.Random(f"shell-corpus:{seed}")
    words, exts = split_pool("word", False), split_pool("ext", False)
    lower, upper = _Strings(rng, _LOWER, pieces), _Strings(rng, _UPPER, pieces)
    digits, octal = _Strings(rng, _DIGITS, pieces), _Strings(rng, "01234567", ())
    out = []
    for _ in range(count):
        request, command = TEMPLATES[rng.randrange(len(TEMPLATES))]
        a, b = (w if rng.random() < 0.5 else lower.draw(2, 5) for w in rng.sample(words, 2))
        values = {"a": a, "b": b, "e": exts[rng.randrange(len(exts))], "n": rng.randint(2, 40),
                  "r": lower.draw(1, 5), "x": lower.draw(1, 3), "d": digits.draw(1, 3), "o": octal.draw(3, 3),
                  "R": "_".join(upper.draw(1, 3) for _ in range(rng.randint(1, 3)))}
        action = Action.model_validate({"type": "type", "text": command.format(**values)})
        out.append(Example(request.format(**values), format_response([action])))
    return out


def word_pieces(tokenizer: Any) -> tuple[str, ...]:
    """The pieces of ``tokenizer``'s vocabulary that read as ASCII letters or digits (a leading space dropped)."""
    texts = {tokenizer.convert_tokens_to_string([token]).strip() for token in tokenizer.get_vocab()}
    return tuple(sorted(t for t in texts if t.isascii() and t.isalnum()))


class _Strings:
    """Random strings over one alphabet: each unit a character of it, or a piece made only of its characters;
    a string in which a held-out value of any pool occurs whole is drawn again."""

    def __init__(self, rng: random.Random, alphabet: str, pieces: Sequence[str]) -> None:
        self.rng = rng
        self.units = list(alphabet)
        self.pieces = [p for p in pieces if len(p) > 1 and set(p) <= set(alphabet)]

    def draw(self, fewest: int, most: int) -> str:
        while True:
            text = "".join(self._unit() for _ in range(self.rng.randint(fewest, most)))
            if not _held_out_values().search(text.lower()):
                return text

    def _unit(self) -> str:
        return self.rng.choice(self.pieces if self.pieces and self.rng.random() < 0.5 else self.units)


@lru_cache(maxsize=1)
def _held_out_values() -> re.Pattern[str]:
    return re.compile("|".join(re.escape(v) for name in ("word", "ext", "mode") for v in split_pool(name, True)))


@lru_cache(maxsize=1)
def terminal_screenshot(width: int = 1280, height: int = 800) -> Screenshot:
    """A synthetic terminal screen: a prompt line on a dark background (drawn, not captured)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), (24, 24, 24))
    ImageDraw.Draw(image).text((8, 8), "user@desktop:~$ ", fill=(220, 220, 220))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return Screenshot(png=buffer.getvalue(), width=width, height=height)
