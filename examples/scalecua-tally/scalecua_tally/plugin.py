"""The package's registration module: the entry point ``tally = scalecua_tally.plugin`` names it.

Components are registered as ``"module:attribute"`` strings, so nothing is imported until a config selects one.
"""

from __future__ import annotations

from core import hookimpl


@hookimpl
def scalecua_register_environments(registry):
    registry.register("tally", "scalecua_tally.backend:create_backend", options="scalecua_tally.backend:TallyOptions",
                      description="a counter application drawn in process (an example third-party backend)")


@hookimpl
def scalecua_register_samplers(registry):
    registry.register("least-seen", "scalecua_tally.sampler:LeastSeen", options="scalecua_tally.sampler:LeastSeenOptions",
                      description="the tasks drawn the fewest times so far (an example third-party sampler)")


@hookimpl
def scalecua_register_getters(registry):
    registry.register("tally_value", "scalecua_tally.judge:tally_value", description="the value the tally shows")


@hookimpl
def scalecua_register_metrics(registry):
    registry.register("tally_equals", "scalecua_tally.judge:tally_equals",
                      description="1 when the tally shows options.value")
