"""Entry-point module: registers this package's components (filled in as they land)."""

from core import hookimpl


@hookimpl
def scalecua_register_environments(registry):  # type: ignore[no-untyped-def]
    registry.register(
        "local-desktop",
        "environments.local_desktop:create_backend",
        options="environments.local_desktop:LocalDesktopOptions",
        description="Xvfb desktops on this host (openbox + the interaction probe), pooled, no containers",
    )
    registry.register(
        "container-desktop",
        "environments.containers.container_desktop:create_backend",
        options="environments.containers.container_desktop:ContainerDesktopOptions",
        description="our desktop image in containers (Docker or podman, local or remote engines), warm pool",
    )
    registry.register(
        "osworld-docker",
        "environments.containers.osworld_docker:create_backend",
        options="environments.containers.osworld_docker:OSWorldDockerOptions",
        description="OSWorld's VM image (happysixd/osworld-docker + Ubuntu.qcow2) in containers, warm pool",
    )
    registry.register(
        "simulated",
        "environments.simulated:create_backend",
        options="environments.simulated:SimulatedOptions",
        description="a SIMULATION of desktops (latency, failures, a per-task success model) for scale and "
                    "throughput benchmarks; no real application",
    )
    registry.register(
        "scienceboard",
        "environments.scienceboard.backend:create_backend",
        options="environments.scienceboard.backend:ScienceBoardOptions",
        description="ScienceBoard tasks (KAlgebra, TeXstudio, GRASS GIS, ...) on another backend's desktops",
    )


@hookimpl
def scalecua_register_getters(registry):  # type: ignore[no-untyped-def]
    from environments.scienceboard.registration import register_getters

    register_getters(registry)  # ScienceBoard's evaluate items


@hookimpl
def scalecua_register_metrics(registry):  # type: ignore[no-untyped-def]
    from environments.scienceboard.registration import register_metrics

    register_metrics(registry)
