"""Terminal and file-management tasks in xterm (the ``os`` domain of OSWorld)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from environments.tasks.authoring.common import (
    command, download, execute, fail, gold, key, open_, rule, task, type_, vm_file,
)

DOMAIN = "os"
APPS = ["terminal"]


def _terminal(*prepare: dict[str, Any]) -> list[dict[str, Any]]:
    """Prepare files, then open a terminal (the probe waits for its window)."""
    return [*prepare, open_("xterm")]


def _run(*commands: str) -> list[dict[str, Any]]:
    """Type each shell command into the terminal and press Enter. No waits: the reset returns once the
    terminal's window is up, and every action is followed by the environment's settle pause."""
    out: list[dict[str, Any]] = []
    for cmd in commands:
        out += [type_(cmd), key("Return")]
    return out


def _state(cmd: str, expected: str) -> dict[str, Any]:
    """The command's output on the desktop must equal ``expected``."""
    return {"func": "exact_match", "result": command(cmd), "expected": rule(expected=expected)}


def _includes(cmd: str, include: list[str], exclude: list[str] | None = None) -> dict[str, Any]:
    return {"func": "check_include_exclude", "result": command(cmd),
            "expected": rule(include=include, exclude=exclude or [])}


def tasks(assets: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    out.append(task(
        "os-archive-logs", DOMAIN,
        "Create a folder named 'archive' in your home directory and move every .log file from ~/work into it. "
        "Leave the other files in ~/work where they are.",
        APPS,
        _terminal(execute("mkdir -p ~/work && cd ~/work && for f in app.log db.log notes.txt report.csv; "
                          "do echo \"$f content\" > \"$f\"; done", shell=True)),
        _state("cd ~ && echo $(ls archive 2>/dev/null) '|' $(ls work)", "app.log db.log | notes.txt report.csv\n"),
        _run("mkdir ~/archive && mv ~/work/*.log ~/archive/"),
    ))

    out.append(task(
        "os-rename-extension", DOMAIN,
        "Rename every .txt file in ~/notes so that it ends in .md instead (keep the rest of each name).",
        APPS,
        _terminal(execute("mkdir -p ~/notes && cd ~/notes && for n in ideas todo journal; do echo \"# $n\" > "
                          "\"$n.txt\"; done && echo keep > readme.rst", shell=True)),
        _state("echo $(ls ~/notes)", "ideas.md journal.md readme.rst todo.md\n"),
        _run("cd ~/notes && for f in *.txt; do mv \"$f\" \"${f%.txt}.md\"; done"),
    ))

    (assets / "backup.sh").write_text("#!/bin/sh\ntar czf \"$HOME/backup.tar.gz\" \"$HOME/Documents\"\n",
                                      encoding="utf-8")
    out.append(task(
        "os-make-executable", DOMAIN,
        "The script ~/bin/backup.sh cannot be run because it lacks the execute permission. Make it executable "
        "for its owner.",
        APPS, _terminal(download(("backup.sh", "~/bin/backup.sh")), execute("chmod 644 ~/bin/backup.sh", shell=True)),
        _state("test -x ~/bin/backup.sh && echo executable || echo plain", "executable\n"),
        _run("chmod u+x ~/bin/backup.sh"),
    ))

    out.append(task(
        "os-compress-folder", DOMAIN,
        "Create a gzip-compressed tar archive ~/photos.tar.gz that contains the folder ~/photos (paths inside "
        "the archive should start with 'photos/').",
        APPS,
        _terminal(execute("mkdir -p ~/photos/2023 && echo a > ~/photos/beach.jpg && echo b > ~/photos/2023/hike.jpg",
                          shell=True)),
        _includes("tar tzf ~/photos.tar.gz 2>&1 | sort", ["photos/beach.jpg", "photos/2023/hike.jpg"],
                  ["Cannot open", "not in gzip"]),
        _run("cd ~ && tar czf photos.tar.gz photos"),
    ))

    access = [f"10.0.0.{i % 7} - - [12/Mar/2024:10:{i:02d}:00] \"GET /page/{i} HTTP/1.1\" 200" for i in range(37)]
    (assets / "access.log").write_text("\n".join(access) + "\n", encoding="utf-8")
    (assets / "line_count_gold.txt").write_text("37\n", encoding="utf-8")
    out.append(task(
        "os-count-lines", DOMAIN,
        "Count the lines of ~/data/access.log and write just that number into a new file ~/line_count.txt.",
        APPS, _terminal(download(("access.log", "~/data/access.log"))),
        {"func": "compare_text_file", "result": vm_file("~/line_count.txt", "line_count.txt"),
         "expected": gold("line_count_gold.txt"), "options": {"ignore_blanks": True}},
        _run("wc -l < ~/data/access.log > ~/line_count.txt"),
    ))

    out.append(task(
        "os-delete-temp-files", DOMAIN,
        "Delete every file ending in .tmp anywhere under ~/project (including subfolders), and nothing else.",
        APPS,
        _terminal(execute("mkdir -p ~/project/src ~/project/build && cd ~/project && touch main.py a.tmp "
                          "src/util.py src/b.tmp build/c.tmp build/out.bin", shell=True)),
        _state("cd ~/project && echo $(find . -type f | sort)", "./build/out.bin ./main.py ./src/util.py\n"),
        _run("find ~/project -type f -name '*.tmp' -delete"),
    ))

    out.append(task(
        "os-copy-photos", DOMAIN,
        "Copy all .jpg files from ~/camera into ~/Pictures (keep the originals in ~/camera; ignore other files).",
        APPS,
        _terminal(execute("mkdir -p ~/camera && cd ~/camera && for n in IMG_001 IMG_002 IMG_003; do echo $n > "
                          "$n.jpg; done && echo x > clip.mov", shell=True)),
        _state("echo $(ls ~/Pictures) '|' $(ls ~/camera)",
               "IMG_001.jpg IMG_002.jpg IMG_003.jpg | IMG_001.jpg IMG_002.jpg IMG_003.jpg clip.mov\n"),
        _run("cp ~/camera/*.jpg ~/Pictures/"),
    ))

    out.append(task(
        "os-symlink-release", DOMAIN,
        "Create a symbolic link ~/current that points to the directory ~/releases/v2.",
        APPS, _terminal(execute("mkdir -p ~/releases/v1 ~/releases/v2 && echo 2 > ~/releases/v2/VERSION", shell=True)),
        _includes("test -L ~/current && readlink ~/current && cat ~/current/VERSION", ["releases/v2", "2"],
                  ["releases/v1"]),
        _run("ln -s ~/releases/v2 ~/current"),
    ))

    app_log = [
        "2024-03-12 10:00:01 INFO service started",
        "2024-03-12 10:00:05 ERROR database connection refused",
        "2024-03-12 10:01:00 INFO retrying",
        "2024-03-12 10:01:02 WARN slow response",
        "2024-03-12 10:02:11 ERROR timeout while reading config",
        "2024-03-12 10:03:00 INFO request served",
        "2024-03-12 10:04:45 ERROR disk quota exceeded",
    ]
    (assets / "app.log").write_text("\n".join(app_log) + "\n", encoding="utf-8")
    (assets / "errors_gold.txt").write_text("\n".join(l for l in app_log if "ERROR" in l) + "\n", encoding="utf-8")
    out.append(task(
        "os-extract-errors", DOMAIN,
        "Save every line of ~/logs/app.log that contains ERROR, in their original order, into ~/errors.txt.",
        APPS, _terminal(download(("app.log", "~/logs/app.log"))),
        {"func": "compare_text_file", "result": vm_file("~/errors.txt", "errors.txt"),
         "expected": gold("errors_gold.txt")},
        _run("grep ERROR ~/logs/app.log > ~/errors.txt"),
    ))

    names = ["Maya", "Omar", "Lena", "Omar", "Ivan", "Maya", "Zoe", "Lena"]
    (assets / "names.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    (assets / "names_sorted_gold.txt").write_text("\n".join(sorted(set(names))) + "\n", encoding="utf-8")
    out.append(task(
        "os-sort-unique", DOMAIN,
        "Write the names from ~/names.txt to ~/names_sorted.txt sorted alphabetically, each name only once.",
        APPS, _terminal(download(("names.txt", "~/names.txt"))),
        {"func": "compare_text_file", "result": vm_file("~/names_sorted.txt", "names_sorted.txt"),
         "expected": gold("names_sorted_gold.txt")},
        _run("sort -u ~/names.txt > ~/names_sorted.txt"),
    ))

    out.append(task(
        "os-set-editor-variable", DOMAIN,
        "Make 'nano' the default editor for future shells: append the line 'export EDITOR=nano' to ~/.bashrc "
        "(keep the existing content).",
        APPS, _terminal(execute("printf '# my shell settings\\nalias ll=\"ls -l\"\\n' > ~/.bashrc", shell=True)),
        _includes("cat ~/.bashrc; echo; echo lines=$(grep -c '^export EDITOR=nano$' ~/.bashrc)",
                  ["alias ll=", "lines=1"], ["lines=0", "lines=2"]),
        _run("echo 'export EDITOR=nano' >> ~/.bashrc"),
    ))

    out.append(task(
        "os-infeasible-windows-installer", DOMAIN,
        "Run the Windows installer setup.exe from the D: drive to install Microsoft Office on this computer.",
        APPS, _terminal(),
        {"func": "infeasible"},
        [fail()],
    ))
    return out
