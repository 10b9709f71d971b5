"""Text-editor tasks in Mousepad: editing configuration files, lists and scripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from environments.tasks.authoring.common import download, gold, key, keys, lines, open_, task, type_, vm_file, wait

DOMAIN = "text_editor"
APPS = ["mousepad"]
SAVE = [key("ctrl", "s"), wait(1.0)]
START = [wait(1.0), key("ctrl", "Home")]


def _edit(assets: Path, name: str, before: str, after: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Write the asset and its gold version; setup opens it, the judge compares the saved file with the gold."""
    (assets / name).write_text(before, encoding="utf-8")
    stem, dot, ext = name.rpartition(".")
    gold_name = f"{stem}_gold{dot}{ext}"
    (assets / gold_name).write_text(after, encoding="utf-8")
    setup = [download((name, f"~/{name}")), open_(f"~/{name}")]
    evaluator = {"func": "compare_text_file", "result": vm_file(f"~/{name}", name), "expected": gold(gold_name)}
    return setup, evaluator


def _go_to_line(number: int) -> list[dict[str, Any]]:
    """Cursor to the start of line ``number`` (1-based)."""
    return [key("ctrl", "Home"), *keys(*["Down"] * (number - 1)), key("Home")]


def _replace_line(number: int, text: str) -> list[dict[str, Any]]:
    return [*_go_to_line(number), key("shift", "End"), type_(text)]


def tasks(assets: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    before = "[server]\nhost = 0.0.0.0\nport = 8080\nworkers = 4\n"
    setup, evaluator = _edit(assets, "server.ini", before, before.replace("8080", "9090"))
    out.append(task(
        "editor-change-port", DOMAIN,
        "Open server.ini in the text editor, change the server port from 8080 to 9090, and save the file.",
        APPS, setup, evaluator, [wait(1.0), *_replace_line(3, "port = 9090"), *SAVE],
    ))

    config = '{\n  "name": "inventory-service",\n  "debug": false,\n  "retries": 3\n}\n'
    (assets / "service.json").write_text(config, encoding="utf-8")
    out.append(task(
        "editor-enable-debug", DOMAIN,
        "In service.json, turn debug mode on (set \"debug\" to true) without changing the other settings, and save.",
        APPS, [download(("service.json", "~/service.json")), open_("~/service.json")],
        {"func": "check_json", "result": vm_file("~/service.json", "service.json"),
         "expected": {"type": "rule", "rules": {"expect": [
             {"key": ["debug"], "method": "eq", "ref": True},
             {"key": ["name"], "method": "eq", "ref": "inventory-service"},
             {"key": ["retries"], "method": "eq", "ref": 3}]}}},
        [wait(1.0), *_replace_line(3, '  "debug": true,'), *SAVE],
    ))

    hosts = "127.0.0.1 localhost\n10.0.0.5 build-server\n"
    setup, evaluator = _edit(assets, "hosts.txt", hosts, hosts + "127.0.0.1 dev.local\n")
    out.append(task(
        "editor-append-host", DOMAIN,
        "Add the entry '127.0.0.1 dev.local' as a new last line of hosts.txt and save it.",
        APPS, setup, evaluator, [wait(1.0), key("ctrl", "End"), *lines("127.0.0.1 dev.local"), *SAVE],
    ))

    todo = ["Buy printer paper", "Email the landlord", "Book dentist appointment"]
    (assets / "todo_gold.txt").write_text("\n".join(todo) + "\n", encoding="utf-8")
    out.append(task(
        "editor-new-todo-list", DOMAIN,
        "Create a new text file in your home folder named todo.txt with these three lines: 'Buy printer paper', "
        "'Email the landlord', 'Book dentist appointment'.",
        APPS, [open_("mousepad")],
        {"func": "compare_text_file", "result": vm_file("~/todo.txt", "todo.txt"), "expected": gold("todo_gold.txt")},
        [wait(1.0), *lines(*todo), key("ctrl", "s"), wait(1.5), key("alt", "Home"), wait(0.8), type_("todo.txt"),
         wait(0.5), key("Return"), wait(1.0)],
    ))

    requirements = "requests==2.31.0\nflask==3.0.0\nsimplejson==3.19.1  # DEPRECATED\npydantic==2.6.0\n"
    setup, evaluator = _edit(assets, "requirements.txt", requirements,
                             "".join(l + "\n" for l in requirements.splitlines() if "DEPRECATED" not in l))
    out.append(task(
        "editor-remove-deprecated", DOMAIN,
        "requirements.txt lists a package marked as DEPRECATED. Delete that whole line (leave no empty line) "
        "and save.",
        APPS, setup, evaluator, [wait(1.0), *_go_to_line(3), key("shift", "Down"), key("Delete"), *SAVE],
    ))

    conf = "[editor]\ntheme=dark\n#autosave=true\nfont_size=12\n"
    setup, evaluator = _edit(assets, "editor.ini", conf, conf.replace("#autosave", "autosave"))
    out.append(task(
        "editor-uncomment-autosave", DOMAIN,
        "In editor.ini, enable the autosave option by uncommenting it (remove the leading '#'), then save.",
        APPS, setup, evaluator, [wait(1.0), *_go_to_line(3), key("Delete"), *SAVE],
    ))

    compose = "services:\n  web:\n    image: nginx:1.19\n    ports:\n      - \"80:80\"\n"
    setup, evaluator = _edit(assets, "compose.yml", compose, compose.replace("nginx:1.19", "nginx:1.25"))
    out.append(task(
        "editor-bump-image-tag", DOMAIN,
        "Update compose.yml so the web service uses the image nginx:1.25 instead of nginx:1.19, and save.",
        APPS, setup, evaluator,
        [wait(1.0), *_go_to_line(3), key("End"), *keys(*["BackSpace"] * 4), type_("1.25"), *SAVE],
    ))

    crontab = "0 2 * * * /usr/local/bin/backup.sh\n*/15 * * * * /usr/local/bin/sync.sh\n"
    setup, evaluator = _edit(assets, "crontab.txt", crontab, "# Managed by the ops team\n" + crontab)
    out.append(task(
        "editor-add-header-comment", DOMAIN,
        "Insert the comment line '# Managed by the ops team' as the first line of crontab.txt and save the file.",
        APPS, setup, evaluator, [*START, *lines("# Managed by the ops team"), *SAVE],
    ))

    script = "#!/bin/sh\necho \"Starting backup\"\nrsync -a /data /mnt/backup\necho \"Done\"\n"
    setup, evaluator = _edit(assets, "backup_job.sh", script, script.replace("/mnt/backup", "/srv/backup"))
    out.append(task(
        "editor-change-backup-target", DOMAIN,
        "In backup_job.sh, change the rsync destination from /mnt/backup to /srv/backup and save the script.",
        APPS, setup, evaluator, [wait(1.0), *_replace_line(3, "rsync -a /data /srv/backup"), *SAVE],
    ))
    return out
