"""Names of the ScienceBoard getters and metrics, as lazy ``module:function`` references for the registries."""

from __future__ import annotations

_GETTERS = "environments.scienceboard.getters"
_METRICS = "environments.scienceboard.metrics"

GETTERS = {
    name: f"{_GETTERS}:get_{name}"
    for name in ("scienceboard_last_action", "scienceboard_tex_check", "scienceboard_lean_check",
                 "kalgebra_variables", "kalgebra_functions", "grass_command", "grass_gui_dump")
}
METRICS = {
    name: f"{_METRICS}:{name}"
    for name in ("scienceboard_stop", "scienceboard_regex", "scienceboard_passed", "kalgebra_val", "kalgebra_var",
                 "kalgebra_eqn", "scienceboard_predicate")
}


def register_getters(registry) -> None:  # type: ignore[no-untyped-def]
    for name, reference in GETTERS.items():
        registry.register(name, reference, description=f"ScienceBoard getter {name}")


def register_metrics(registry) -> None:  # type: ignore[no-untyped-def]
    for name, reference in METRICS.items():
        registry.register(name, reference, description=f"ScienceBoard metric {name}")
