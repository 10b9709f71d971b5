"""Entry-point module: the judge executors (``sandbox``, ``in-environment``)."""

from core import hookimpl


@hookimpl
def scalecua_register_judge_executors(registry):
    registry.register(
        "sandbox",
        "plugins.judges.sandbox:SandboxExecutor",
        options="plugins.judges.options:SandboxOptions",
        description="generated metrics and local-desktop getters in a confined process on this host",
    )
    registry.register(
        "in-environment",
        "plugins.judges.in_environment:InEnvironmentExecutor",
        options="plugins.judges.options:InEnvironmentOptions",
        description="generated getters inside isolated environments via the probe's run_python; metrics sandboxed",
    )
