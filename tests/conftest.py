"""Shared fixtures. Plugin objects are registered directly and unregistered afterwards."""

from __future__ import annotations

import pytest

from core.pluginmanager import Plugins, load_plugins


@pytest.fixture
def plugins() -> Plugins:
    """The installed plugins (built-ins via entry points), fresh per test."""
    return load_plugins(environ={})
