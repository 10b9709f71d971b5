"""``python -m configs``: each packaged config's name and path (copy one to start your own)."""

from __future__ import annotations

import sys

from core.config.files import packaged_configs


def main() -> int:
    configs = packaged_configs()
    width = max(map(len, configs), default=0)
    for name, path in configs.items():
        print(f"{name:<{width}}  {path}")
    return 0 if configs else 1


if __name__ == "__main__":
    sys.exit(main())
