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
