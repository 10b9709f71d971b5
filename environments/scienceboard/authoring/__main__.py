"""``python -m environments.scienceboard.authoring``: rewrite every bundled ScienceBoard task file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from environments.scienceboard.authoring import grass, kalgebra, texstudio

ROOT = Path(__file__).resolve().parent.parent / "tasks"
DOMAINS = {"KAlgebra": kalgebra.tasks, "TeXstudio": texstudio.tasks, "GrassGIS": grass.tasks}


def write_all(root: Path = ROOT) -> int:
    count = 0
    for app, make in DOMAINS.items():
        folder = root / app
        folder.mkdir(parents=True, exist_ok=True)
        wanted = set()
        for body in make():
            path = folder / f"{body['id']}.json"
            path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            wanted.add(path.name)
            count += 1
        for stale in folder.glob("*.json"):
            if stale.name not in wanted:
                stale.unlink()
    return count


if __name__ == "__main__":
    print(f"wrote {write_all()} tasks under {ROOT}", file=sys.stderr)
