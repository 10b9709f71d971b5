"""Entry-point module: registers this package's components (filled in as they land)."""

from core import hookimpl  # noqa: F401
