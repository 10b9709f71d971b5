"""Names of the ScienceBoard getters and metrics, as lazy ``module:function`` references for the registries."""

from __future__ import annotations

_GETTERS = "environments.scienceboard.getters"
_METRICS = "environments.scienceboard.metrics"
_APPS = "environments.scienceboard.apps"

GETTERS = {
    name: f"{_GETTERS}:get_{name}"
    for name in ("scienceboard_last_action", "scienceboard_tex_check", "scienceboard_lean_check",
                 "kalgebra_variables", "kalgebra_functions", "grass_command")
} | {
    name: f"{_APPS}:get_{name}"
    for name in ("grass_gui_dump", "celestia_dump", "kalgebra_functions_3d", "chimerax_info", "chimerax_states")
}
METRICS = {
    name: f"{_METRICS}:{name}"
    for name in ("scienceboard_stop", "scienceboard_regex", "scienceboard_passed", "kalgebra_val", "kalgebra_var",
                 "kalgebra_eqn", "scienceboard_predicate", "chimerax_info", "chimerax_states",
                 "scienceboard_contains")
}


def register_getters(registry) -> None:  # type: ignore[no-untyped-def]
    for name, reference in GETTERS.items():
        registry.register(name, reference, description=f"ScienceBoard getter {name}")


def register_metrics(registry) -> None:  # type: ignore[no-untyped-def]
    for name, reference in METRICS.items():
        registry.register(name, reference, description=f"ScienceBoard metric {name}")
