"""The accessibility tree over AT-SPI, from a desktop started with accessibility on.

Needs Debian ``at-spi2-core``, ``python3-pyatspi`` and ``libatk-adaptor`` (GTK's AT-SPI bridge).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from environments.client import EnvironmentClient
from tests.environments.desktop_fixtures import start_session, stop_session

pytestmark = pytest.mark.desktop

STATE = "{https://accessibility.ubuntu.example.org/ns/state}"


def test_the_tree_shows_the_open_application(tmp_path: Path) -> None:
    session = start_session(tmp_path, extra_args=("--accessibility",))
    try:
        (session.home / "notes.txt").write_text("accessible text\n")

        async def body(client: EnvironmentClient) -> str | None:
            await client.open_file("~/notes.txt")
            return await client.accessibility_tree()

        tree = session.run(body)
    finally:
        stop_session(session)
    assert tree is not None
    root = ET.fromstring(tree)
    # OSWorld's root: a bare desktop-frame declaring all its namespaces (unused ones too), one child per application
    assert root.tag == "desktop-frame" and root.attrib == {}
    start_tag = tree[: tree.index(">")]
    for prefix in ("st", "attr", "cp", "doc", "docattr", "txt", "val", "act"):
        assert f'xmlns:{prefix}="https://accessibility.ubuntu.example.org/ns/' in start_tag, prefix
    assert {child.tag for child in root} == {"application"}
    apps = {app.get("name"): app for app in root.iter("application")}
    assert "mousepad" in apps
    frames = [f for f in apps["mousepad"].iter("frame") if "notes.txt" in (f.get("name") or "")]
    assert frames and frames[0].get(f"{STATE}showing") == "true"
    assert any("accessible text" in (node.text or "") for node in apps["mousepad"].iter())
