"""``python -m environments.tasks.authoring [DOMAIN ...]``: regenerate the bundled tasks and their assets."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "osworld"
MODULES = {
    "libreoffice_calc": "calc",
    "libreoffice_writer": "writer",
    "os": "terminal",
    "text_editor": "editor",
    "chrome": "chrome",
}


def build(domain: str, root: Path = ROOT) -> int:
    """Write ``domain``'s tasks and assets under ``root/domain`` (replacing what is there)."""
    module = importlib.import_module(f"environments.tasks.authoring.{MODULES[domain]}")
    folder = root / domain
    if folder.exists():
        shutil.rmtree(folder)
    assets = folder / "assets"
    assets.mkdir(parents=True)
    tasks = module.tasks(assets)
    for task in tasks:
        (folder / f"{task['id']}.json").write_text(json.dumps(task, indent=2) + "\n", encoding="utf-8")
    return len(tasks)


def main(argv: list[str]) -> int:
    domains = argv or list(MODULES)
    unknown = sorted(set(domains) - set(MODULES))
    if unknown:
        print(f"unknown domain(s) {unknown}; choose from {sorted(MODULES)}", file=sys.stderr)
        return 2
    for domain in domains:
        print(f"{domain}: {build(domain)} tasks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
