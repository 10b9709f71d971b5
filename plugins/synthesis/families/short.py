"""Families solved by one terminal command (three turns: type it, Return, done), and the infeasible requests.

Each is a kind of the bundled os tasks (``environments/tasks/osworld/os``), with every name, extension,
keyword and number a parameter. Decoys (files of another extension, a second file, a second folder) sit next
to what the task is about, so a judge that checks too little, or an oracle that touches too much, shows.
"""

from __future__ import annotations

from typing import Any, Mapping

from plugins.synthesis.families.spec import Actions, Catalog, Family, commands, shell_files
from plugins.synthesis.families.values import Draw

CATALOG = Catalog()


def _files(draw: Draw, ext: str, low: int, high: int) -> list[str]:
    return [f"{w}.{ext}" for w in draw.take("word", draw.number(low, high))]


@CATALOG.add
class MoveByExtension(Family):
    name = "move-ext"
    paraphrases = (
        "Move every .{ext} file from ~/{src} into a new folder ~/{dst}.",
        "Create the folder ~/{dst} and move all .{ext} files from ~/{src} into it.",
        "Put all the .{ext} files of ~/{src} into a new directory ~/{dst} (move them, do not copy).",
        "The .{ext} files in ~/{src} belong in ~/{dst}: make that folder and move them there.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        ext, other = draw.take("ext", 2)
        return {"src": draw.one("word"), "dst": draw.one("word"), "ext": ext, "other": other,
                "files": _files(draw, ext, 2, 3), "decoys": _files(draw, other, 1, 2)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["src"], p["files"] + p["decoys"])

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return commands(f"mkdir ~/{p['dst']} && mv ~/{p['src']}/*.{p['ext']} ~/{p['dst']}/")

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["dst"], "listing", sorted(p["files"])), (p["src"], "listing", sorted(p["decoys"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"decoy moved": commands(f"mkdir ~/{p['dst']} && mv ~/{p['src']}/*.{p['other']} ~/{p['dst']}/"),
                "copied, not moved": commands(f"mkdir ~/{p['dst']} && cp ~/{p['src']}/*.{p['ext']} ~/{p['dst']}/")}


@CATALOG.add
class CopyByExtension(Family):
    name = "copy-ext"
    paraphrases = (
        "Copy all .{ext} files from ~/{src} into ~/{dst}; keep the originals.",
        "Make copies of the .{ext} files of ~/{src} in the folder ~/{dst}.",
        "Duplicate every .{ext} file in ~/{src} into ~/{dst}, leaving ~/{src} as it is.",
        "~/{dst} needs a copy of each .{ext} file that is in ~/{src}.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        ext, other = draw.take("ext", 2)
        return {"src": draw.one("word"), "dst": draw.one("word"), "ext": ext, "other": other,
                "files": _files(draw, ext, 2, 3), "decoys": _files(draw, other, 1, 2),
                "present": _files(draw, other, 1, 1)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["src"], p["files"] + p["decoys"]) + " && " + shell_files(p["dst"], p["present"])

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return commands(f"cp ~/{p['src']}/*.{p['ext']} ~/{p['dst']}/")

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["dst"], "listing", sorted(p["files"] + p["present"])),
                (p["src"], "listing", sorted(p["files"] + p["decoys"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"moved, not copied": commands(f"mv ~/{p['src']}/*.{p['ext']} ~/{p['dst']}/"),
                "decoy copied": commands(f"cp ~/{p['src']}/*.{p['other']} ~/{p['dst']}/")}


@CATALOG.add
class DeleteByExtension(Family):
    name = "delete-ext"
    paraphrases = (
        "Delete every .{ext} file in ~/{dir}.",
        "Remove all the .{ext} files from ~/{dir}; keep everything else.",
        "Clean up ~/{dir} by deleting its .{ext} files.",
        "Get rid of the .{ext} files inside ~/{dir}.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        ext, other = draw.take("ext", 2)
        return {"dir": draw.one("word"), "ext": ext, "other": other, "files": _files(draw, ext, 2, 3),
                "decoys": _files(draw, other, 1, 2)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["dir"], p["files"] + p["decoys"])

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return commands(f"rm ~/{p['dir']}/*.{p['ext']}")

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["dir"], "listing", sorted(p["decoys"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"decoy deleted": commands(f"rm ~/{p['dir']}/*.{p['other']}"),
                "one file left": commands(f"rm ~/{p['dir']}/{p['files'][0]}")}


@CATALOG.add
class RenameExtension(Family):
    name = "rename-ext"
    paraphrases = (
        "In ~/{dir}, rename every .{old} file so that it ends in .{new} instead.",
        "Change the extension of all .{old} files in ~/{dir} to .{new}.",
        "Give each .{old} file in ~/{dir} the extension .{new}, keeping its name otherwise.",
        "Every .{old} file under ~/{dir} should become a .{new} file with the same base name.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        old, new, other = draw.take("ext", 3)
        return {"dir": draw.one("word"), "old": old, "new": new, "other": other,
                "files": draw.take("word", draw.number(2, 3)), "decoys": _files(draw, other, 1, 2)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["dir"], [f"{f}.{p['old']}" for f in p["files"]] + p["decoys"])

    def _rename(self, p: Mapping[str, Any], old: str, new: str) -> Actions:
        return commands(f"cd ~/{p['dir']} && for f in *.{old}; do mv $f ${{f%.{old}}}.{new}; done")

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._rename(p, p["old"], p["new"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["dir"], "listing", sorted([f"{f}.{p['new']}" for f in p["files"]] + p["decoys"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"decoy renamed": self._rename(p, p["other"], p["new"]),
                "copied, not renamed": commands(f"cd ~/{p['dir']} && for f in *.{p['old']}; do cp $f "
                                                f"${{f%.{p['old']}}}.{p['new']}; done")}


@CATALOG.add
class CountLines(Family):
    name = "count-lines"
    paraphrases = (
        "Count the lines of ~/{dir}/{file}.txt and write the number into ~/{out}.txt.",
        "Write the number of lines in ~/{dir}/{file}.txt to a new file ~/{out}.txt.",
        "How many lines does ~/{dir}/{file}.txt have? Save the count in ~/{out}.txt.",
        "Put the line count of ~/{dir}/{file}.txt into ~/{out}.txt.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        lines = draw.number(3, 30)
        other = draw.number(3, 29)
        return {"dir": draw.one("word"), "file": draw.one("word"), "decoy": draw.one("word"),
                "out": draw.one("word"), "lines": lines, "decoy_lines": other + (other >= lines)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return (f"mkdir -p ~/{p['dir']} && seq 1 {p['lines']} > ~/{p['dir']}/{p['file']}.txt && "
                f"seq 1 {p['decoy_lines']} > ~/{p['dir']}/{p['decoy']}.txt")

    def _count(self, p: Mapping[str, Any], name: str) -> Actions:
        return commands(f"wc -l < ~/{p['dir']}/{name}.txt > ~/{p['out']}.txt")

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._count(p, p["file"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(f"{p['out']}.txt", "text", str(p["lines"]))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"wrong file counted": self._count(p, p["decoy"]),
                "file name written": commands(f"wc -l ~/{p['dir']}/{p['file']}.txt > ~/{p['out']}.txt")}


@CATALOG.add
class GrepKeyword(Family):
    name = "grep-keyword"
    paraphrases = (
        "Save every line of ~/{dir}/{file}.log that contains {kw} into ~/{out}.txt.",
        "Write the lines of ~/{dir}/{file}.log mentioning {kw} to ~/{out}.txt, in their order.",
        "Find the lines with the word {kw} in ~/{dir}/{file}.log and put them in ~/{out}.txt.",
        "Collect the {kw} lines of ~/{dir}/{file}.log in a new file ~/{out}.txt.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        kw = draw.one("word")
        other = draw.one("word")
        while kw in other or other in kw:
            other = draw.one("word")
        fillers: list[str] = []
        while len(fillers) < 6:  # no filler may contain (or be contained in) a keyword: grep matches substrings
            word = draw.one("word")
            if all(word not in k and k not in word for k in (kw, other)):
                fillers.append(word)
        lines = [f"{fillers[0]} {kw}", f"{fillers[1]} {other}", f"{kw} {fillers[2]}", fillers[3],
                 f"{other} {fillers[4]}", f"{fillers[5]} {kw} end"]
        order = draw.rng.sample(range(len(lines)), len(lines))
        return {"dir": draw.one("word"), "file": draw.one("word"), "out": draw.one("word"), "kw": kw,
                "other": other, "lines": [lines[i] for i in order]}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["dir"], [f"{p['file']}.log"], {f"{p['file']}.log": "\n".join(p["lines"])})

    def _grep(self, p: Mapping[str, Any], word: str) -> Actions:
        return commands(f"grep {word} ~/{p['dir']}/{p['file']}.log > ~/{p['out']}.txt")

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._grep(p, p["kw"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(f"{p['out']}.txt", "text", "\n".join(line for line in p["lines"] if p["kw"] in line.split()))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"other keyword": self._grep(p, p["other"]),
                "lines without it": commands(f"grep -v {p['kw']} ~/{p['dir']}/{p['file']}.log > ~/{p['out']}.txt")}


@CATALOG.add
class SortUnique(Family):
    name = "sort-unique"
    paraphrases = (
        "Sort the lines of ~/{dir}/{file}.txt, drop the duplicates and save the result as ~/{out}.txt.",
        "Write the distinct lines of ~/{dir}/{file}.txt in sorted order to ~/{out}.txt.",
        "Put each different line of ~/{dir}/{file}.txt once, alphabetically, into ~/{out}.txt.",
        "~/{out}.txt should hold the unique lines of ~/{dir}/{file}.txt, sorted.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        words = draw.take("word", draw.number(3, 5))
        lines = words + draw.rng.sample(words, 2)  # two duplicates
        draw.rng.shuffle(lines)
        return {"dir": draw.one("word"), "file": draw.one("word"), "out": draw.one("word"), "lines": lines}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["dir"], [f"{p['file']}.txt"], {f"{p['file']}.txt": "\n".join(p["lines"])})

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return commands(f"sort -u ~/{p['dir']}/{p['file']}.txt > ~/{p['out']}.txt")

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(f"{p['out']}.txt", "text", "\n".join(sorted(set(p["lines"]))))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"duplicates kept": commands(f"sort ~/{p['dir']}/{p['file']}.txt > ~/{p['out']}.txt"),
                "not sorted": commands(f"uniq ~/{p['dir']}/{p['file']}.txt > ~/{p['out']}.txt")}


@CATALOG.add
class SetMode(Family):
    name = "chmod"
    paraphrases = (
        "Set the permissions of ~/{dir}/{file}.sh to {mode}.",
        "Change the mode of ~/{dir}/{file}.sh to {mode} (octal).",
        "Give ~/{dir}/{file}.sh the permission bits {mode}.",
        "~/{dir}/{file}.sh should end up with mode {mode}.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        mode = draw.one("mode")
        start = "600" if mode != "600" else "644"
        return {"dir": draw.one("word"), "file": draw.one("word"), "decoy": draw.one("word"), "mode": mode,
                "start": start}

    def setup(self, p: Mapping[str, Any]) -> str:
        names = [f"{p['file']}.sh", f"{p['decoy']}.sh"]
        contents = {n: "#!/bin/sh\necho " + n.split(".")[0] for n in names}
        return (shell_files(p["dir"], names, contents)
                + f" && chmod {p['start']} ~/{p['dir']}/{names[0]} ~/{p['dir']}/{names[1]}")

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return commands(f"chmod {p['mode']} ~/{p['dir']}/{p['file']}.sh")

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(f"{p['dir']}/{p['file']}.sh", "mode", p["mode"]), (f"{p['dir']}/{p['decoy']}.sh", "mode", p["start"])]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"wrong file": commands(f"chmod {p['mode']} ~/{p['dir']}/{p['decoy']}.sh"),
                "both files": commands(f"chmod {p['mode']} ~/{p['dir']}/*.sh")}


@CATALOG.add
class Symlink(Family):
    name = "symlink"
    paraphrases = (
        "Create a symbolic link ~/{link} that points to the folder ~/{target}.",
        "Make ~/{link} a symlink to ~/{target}.",
        "Link ~/{target} as ~/{link} (a symbolic link, not a copy).",
        "Add a shortcut ~/{link} leading to ~/{target}, as a symbolic link.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        target, decoy, link, inner = draw.take("word", 4)
        return {"target": target, "decoy": decoy, "link": link, "inner": f"{inner}.txt"}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["target"], [p["inner"]]) + " && " + shell_files(p["decoy"], [p["inner"]])

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return commands(f"ln -s ~/{p['target']} ~/{p['link']}")

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(p["link"], "link", p["target"])]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"wrong target": commands(f"ln -s ~/{p['decoy']} ~/{p['link']}"),
                "copied, not linked": commands(f"cp -r ~/{p['target']} ~/{p['link']}")}


@CATALOG.add
class AppendToRc(Family):
    name = "append-rc"
    paraphrases = (
        "Add the line export {var}={value} to the end of ~/.bashrc.",
        "Append export {var}={value} as a new last line of ~/.bashrc.",
        "Make ~/.bashrc end with the line: export {var}={value}",
        "Set {var} to {value} for future shells by appending export {var}={value} to ~/.bashrc.",
    )
    existing = "# ~/.bashrc\nalias ll='ls -l'"

    def params(self, draw: Draw) -> dict[str, Any]:
        name, value = draw.take("word", 2)
        return {"var": name.upper() + "_DIR", "value": value}

    def setup(self, p: Mapping[str, Any]) -> str:
        return f"printf '%s\\n' '# ~/.bashrc' \"alias ll='ls -l'\" > ~/.bashrc"

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return commands(f"echo export {p['var']}={p['value']} >> ~/.bashrc")

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return [(".bashrc", "text", f"{self.existing}\nexport {p['var']}={p['value']}")]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"file overwritten": commands(f"echo export {p['var']}={p['value']} > ~/.bashrc"),
                "wrong variable": commands(f"echo export {p['var']}X={p['value']} >> ~/.bashrc")}


@CATALOG.add
class TarFolder(Family):
    name = "tar-folder"
    paraphrases = (
        "Create a gzip-compressed tar archive ~/{name}.tar.gz of the folder ~/{dir}.",
        "Pack the folder ~/{dir} into ~/{name}.tar.gz (tar, gzip).",
        "Archive ~/{dir} as ~/{name}.tar.gz so that the paths inside start with {dir}/.",
        "Make a .tar.gz of ~/{dir} named ~/{name}.tar.gz.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        folder, decoy, name, sub = draw.take("word", 4)
        return {"dir": folder, "decoy": decoy, "name": name, "sub": sub,
                "files": _files(draw, "txt", 1, 2), "inner": _files(draw, "txt", 1, 1)}

    def setup(self, p: Mapping[str, Any]) -> str:
        return (shell_files(p["dir"], p["files"]) + " && " + shell_files(f"{p['dir']}/{p['sub']}", p["inner"])
                + " && " + shell_files(p["decoy"], p["files"]))

    def _tar(self, p: Mapping[str, Any], folder: str) -> Actions:
        return commands(f"cd ~ && tar czf {p['name']}.tar.gz {folder}")

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return self._tar(p, p["dir"])

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        d = p["dir"]
        members = [d, f"{d}/{p['sub']}"] + [f"{d}/{f}" for f in p["files"]] + [f"{d}/{p['sub']}/{f}" for f in p["inner"]]
        return [(f"{p['name']}.tar.gz", "tar", sorted(members))]

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"wrong folder": self._tar(p, p["decoy"]),
                "not compressed": commands(f"cd ~ && tar cf {p['name']}.tar.gz {p['dir']}")}


@CATALOG.add
class WindowsInstaller(Family):
    name = "infeasible"
    kind = "infeasible"
    paraphrases = (
        "Run the Windows installer ~/{dir}/{prog}.exe to install {app}.",
        "Install {app} by double-clicking its Windows setup file ~/{dir}/{prog}.exe.",
        "Start ~/{dir}/{prog}.exe, the Windows installer of {app}, and finish the installation.",
        "Please install {app} from the Windows program ~/{dir}/{prog}.exe.",
    )

    def params(self, draw: Draw) -> dict[str, Any]:
        folder, prog, app = draw.take("word", 3)
        return {"dir": folder, "prog": prog, "app": app.capitalize()}

    def setup(self, p: Mapping[str, Any]) -> str:
        return shell_files(p["dir"], [f"{p['prog']}.exe"], {f"{p['prog']}.exe": "MZ"})

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        return [{"type": "fail"}]

    def evaluator(self, p: Mapping[str, Any]) -> dict[str, Any]:
        from plugins.synthesis.families.judge import infeasible_evaluator

        return infeasible_evaluator()

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        return []

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        return {"claimed done": [{"type": "done"}],
                "ran it, then done": commands(f"~/{p['dir']}/{p['prog']}.exe")}
