"""A generic terminal corpus for pretraining a tiny Qwen-VL: requests that name files, folders and words, each
answered by one command that uses exactly those names.

It stands in for what a released checkpoint brings (it has read a lot of shell): the habit of copying a name
from the request into the command. It holds none of the task families' commands (no ``mv``, ``cp``, ``rm``, ``echo``,
``wc``, ``grep``, ``sort``, ``uniq``, ``chmod``, ``ln``, ``tar``, ``touch``, ``mkdir``, no ``>>``/``>``
redirection) and draws names and extensions only from the training half of the family value pools
(:mod:`plugins.synthesis.families.values`), so no test-split value is ever trained on. Each example is rendered in
the agent's own prompt format (:mod:`core.prompt`: system prompt, ``Task: <request>``, a screenshot) with the
response in the tool-call action format; the screenshot is a **synthetic** terminal image drawn with PIL, not a
desktop capture.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from functools import lru_cache

from core.types import Action, Screenshot
from environments.actions import format_response
from plugins.synthesis.families.values import split_pool

#: bump when the corpus changes: it is part of the pretrained base's cache key
CORPUS_VERSION = 1

#: (request, command) templates; {a} {b}: names, {e}: an extension, {n}: a number
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
)


@dataclass(frozen=True)
class Example:
    request: str
    response: str


def examples(count: int, seed: int) -> list[Example]:
    """``count`` requests with their one-command responses, deterministic in ``seed``."""
    rng = random.Random(f"shell-corpus:{seed}")
    words, exts = split_pool("word", False), split_pool("ext", False)
    out = []
    for _ in range(count):
        request, command = TEMPLATES[rng.randrange(len(TEMPLATES))]
        a, b = rng.sample(words, 2)
        values = {"a": a, "b": b, "e": exts[rng.randrange(len(exts))], "n": rng.randint(2, 40)}
        action = Action.model_validate({"type": "type", "text": command.format(**values)})
        out.append(Example(request.format(**values), format_response([action])))
    return out


@lru_cache(maxsize=1)
def terminal_screenshot(width: int = 1280, height: int = 800) -> Screenshot:
    """A synthetic terminal screen: a prompt line on a dark background (drawn, not captured)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), (24, 24, 24))
    ImageDraw.Draw(image).text((8, 8), "user@desktop:~$ ", fill=(220, 220, 220))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return Screenshot(png=buffer.getvalue(), width=width, height=height)
