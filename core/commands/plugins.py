"""``python -m core.plugins [--json]``: installed plugins and the components each provides, by kind."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from core.commands.cli import main_guard
from core.pluginmanager import load_plugins
from core.registry import KINDS


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.plugins", description=__doc__)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)

    plugins = load_plugins()
    components = plugins.components()
    if args.json:
        payload = {
            "plugins": [
                {"name": i.name, "distribution": i.distribution, "version": i.version, "module": i.module}
                for i in sorted(plugins.infos.values(), key=lambda i: i.name)
            ],
            "skipped": plugins.skipped,
            "components": components,
        }
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0

    print("plugins:")
    for info in sorted(plugins.infos.values(), key=lambda i: i.name):
        print(f"  {info.name:<14} {info.distribution} {info.version}  ({info.module})")
    for name, why in sorted(plugins.skipped.items()):
        print(f"  {name:<14} skipped: {why}")
    for kind, (_hook, label) in KINDS.items():
        items = components[kind]
        if not items:
            continue
        print(f"\n{label}s:")
        for c in items:
            print(f"  {c['name']:<22} {c['provider']} {c['version']}  {c['description']}")
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
