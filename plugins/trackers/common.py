"""What every tracker logs alike: the config flattened to parameters and the components' versions."""

from __future__ import annotations

import json
from typing import Any, Mapping


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"algorithm.lr": "3e-06", "trackers": "[...]"}``: nested mappings dotted, everything else as JSON."""
    out: dict[str, str] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value if isinstance(value, str) else json.dumps(value, default=str)
    return out


def component_params(components: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``{"components.sampler": "frontier (scalecua 0.1.0)"}``."""
    return {f"components.{slot}": f"{c['name']} ({c['provider']} {c['version']})".replace(" )", ")")
            for slot, c in components.items()}
