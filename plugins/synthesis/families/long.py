"""Families whose oracle takes one command per item: 12 or more turns, so an episode holds more screenshots than
the sliding window keeps (K + Delta) and is trained as several segments."""

from __future__ import annotations

from typing import Any, Mapping

from plugins.synthesis.families.short import CATALOG
from plugins.synthesis.families.spec import Actions, Family, commands, shell_files
from plugins.synthesis.families.values import Draw

#: items per long variant: 6 commands (12 turns) or more, then done
ITEMS = (6, 7)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1]


@CATALOG.add
class MakeFiles(Family):
    name = "make-files"
    kind = "long"
    paraphrases = (
        "Create the folder ~/{dir} with these empty files in it: {listed}.",
        "Make a new directory ~/{dir} and create the empty files {listed} inside it.",
        "In a new folder ~/{dir}, add empty files named {listed}.",
        "Set up ~/{dir} containing the empty files {listed}.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        ext = draw.one("ext")
        files = [f"{w}.{ext}" for w in draw.take("word", draw.number(*ITEMS) - 1)]
        return {"dir": draw.one("word"), "ext": ext, "files": files, "listed": _listed(files)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return "true"

    def _make(self, p: Mapping[str, Any], files: list[str]) -> Actions:
        return commands(f"mkdir ~/{p['dir']}", *(f"touch ~/{p['dir']}/{f}" for f in files))

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._make(p, p["files"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["dir"], "listing", sorted(p["files"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"last file missing": self._make(p, p["files"][:-1]),
                "one file misnamed": self._make(p, p["files"][:-1] + ["x" + p["files"][-1]])}


@CATALOG.add
class WriteLines(Family):
    name = "write-lines"
    kind = "long"
    paraphrases = (
        "Write these words into a new file ~/{file}.txt, one per line, in this order: {listed}.",
        "Create ~/{file}.txt with the lines {listed} (one word per line, in that order).",
        "Put {listed} into ~/{file}.txt, each on its own line, in this order.",
        "~/{file}.txt should list {listed}, a word per line, in that order.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        words = draw.take("word", draw.number(*ITEMS))
        return {"file": draw.one("word"), "words": words, "listed": _listed(words)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return "true"

    def _write(self, p: Mapping[str, Any], words: list[str]) -> Actions:
        return commands(*(f"echo {w} >> ~/{p['file']}.txt" for w in words))

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._write(p, p["words"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(f"{p['file']}.txt", "text", "\n".join(p["words"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        w = p["words"]
        return {"order swapped": self._write(p, [w[1], w[0], *w[2:]]),
                "last word missing": self._write(p, w[:-1])}


@CATALOG.add
class DeleteNamed(Family):
    name = "delete-named"
    kind = "long"
    paraphrases = (
        "Delete the files {listed} from ~/{dir}; keep the other files.",
        "Remove {listed} in ~/{dir}, and nothing else.",
        "In ~/{dir}, delete exactly these files: {listed}.",
        "Get rid of {listed} inside ~/{dir}; the rest stays.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        ext = draw.one("ext")
        files = [f"{w}.{ext}" for w in draw.take("word", draw.number(*ITEMS))]
        decoys = [f"{w}.{ext}" for w in draw.take("word", 2)]
        return {"dir": draw.one("word"), "files": files, "decoys": decoys, "listed": _listed(files)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["dir"], p["files"] + p["decoys"])

    def _delete(self, p: Mapping[str, Any], files: list[str]) -> Actions:
        return commands(*(f"rm ~/{p['dir']}/{f}" for f in files))

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._delete(p, p["files"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["dir"], "listing", sorted(p["decoys"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"decoy deleted instead of the last": self._delete(p, p["files"][:-1] + p["decoys"][:1]),
                "last file kept": self._delete(p, p["files"][:-1])}


@CATALOG.add
class MoveNamed(Family):
    name = "move-named"
    kind = "long"
    paraphrases = (
        "Move {listed} from ~/{src} into ~/{dst}, one by one.",
        "Put the files {listed} of ~/{src} into ~/{dst} (move them).",
        "Transfer {listed} from ~/{src} to the folder ~/{dst}.",
        "~/{dst} should receive {listed}, moved out of ~/{src}.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        ext = draw.one("ext")
        files = [f"{w}.{ext}" for w in draw.take("word", draw.number(*ITEMS))]
        decoys = [f"{w}.{ext}" for w in draw.take("word", 2)]
        return {"src": draw.one("word"), "dst": draw.one("word"), "files": files, "decoys": decoys,
                "listed": _listed(files)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["src"], p["files"] + p["decoys"]) + f" && mkdir -p ~/{p['dst']}"

    def _move(self, p: Mapping[str, Any], files: list[str]) -> Actions:
        return commands(*(f"mv ~/{p['src']}/{f} ~/{p['dst']}/" for f in files))

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._move(p, p["files"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["dst"], "listing", sorted(p["files"])), (p["src"], "listing", sorted(p["decoys"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"decoy moved instead of the last": self._move(p, p["files"][:-1] + p["decoys"][:1]),
                "last file left": self._move(p, p["files"][:-1])}
