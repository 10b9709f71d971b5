"""Entry-point module: registers the built-in samplers (lazy references; numpy loads on creation)."""

from __future__ import annotations

from typing import Any

from core import hookimpl


@hookimpl
def scalecua_register_samplers(registry: Any) -> None:
    registry.register(
        "frontier", "samplers.frontier:create_frontier", options="samplers.frontier:FrontierOptions",
        description="Frontier Sampling: EMA pass rates, Gaussian weights around a target rate, top-3B pool",
    )
    registry.register(
        "uniform", "samplers.uniform:create_uniform", options="samplers.uniform:UniformOptions",
        description="uniform without replacement within each batch",
    )
    registry.register(
        "curriculum", "samplers.curriculum:create_curriculum", options="samplers.curriculum:CurriculumOptions",
        description="fixed easy-to-hard schedule over estimated task difficulty",
    )
    registry.register(
        "dapo", "samplers.dapo:create_dapo", options="samplers.dapo:DapoOptions",
        description="DAPO dynamic sampling: uniform draws, uniform-reward groups dropped and refilled",
    )
