"""``pdf_from_url`` on a real local desktop: no browser runs at first, so the getter launches Chromium (behind the
probe's ``google-chrome`` shim) with ``--remote-debugging-port=1337`` as upstream does, then prints pages served by
a real HTTP server on loopback to PDF through the ``render`` DevTools action. Part of each page is written by a
script, so a getter that printed the HTML source instead of the rendered page would miss it. pypdf reads the
PDFs back: the page's text, Letter paper (612 x 792 pt, Playwright's ``page.pdf()`` default); the user's own
tabs are left as they were; a page that cannot be loaded is a missing file, and in an offline run (a download mirror) one the
mirror lacks."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path
from typing import Any, Iterator

import pytest

from core.errors import FilesMissing
from core.types import Task
from environments.judges.media import get_pdf_from_url
from tests.environments.desktops import closed_port, one_desktop, serving_directory

pytestmark = pytest.mark.desktop

PAGE = """<!doctype html><html><head><title>%(title)s</title></head><body>
<h1>%(title)s</h1><p>Static paragraph %(code)s.</p><div id="late"></div>
<script>document.getElementById("late").textContent = "Written by script " + (%(code)s * 2);</script>
</body></html>"""


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "www"
    root.mkdir()
    (root / "report.html").write_text(PAGE % {"title": "Quarterly Report", "code": 4321})
    (root / "notes.html").write_text(PAGE % {"title": "Meeting Notes", "code": 1000})
    with serving_directory(root) as url:
        yield url


def pdf_facts(path: str) -> tuple[str, tuple[float, float]]:
    from pypdf import PdfReader

    reader = PdfReader(path)
    box = reader.pages[0].mediabox
    return " ".join((page.extract_text() or "") for page in reader.pages), (float(box.width), float(box.height))


def test_pdf_from_url_prints_the_rendered_page(tmp_path: Path, site: str) -> None:
    task = Task.model_validate({"id": "pdf-from-url", "instruction": "test", "config": [],
                                "evaluator": {"func": "exact_match"}})
    unreachable = f"http://127.0.0.1:{closed_port()}/nothing.html"

    async def body() -> tuple[str, list[Any], list[Any], str, Any]:
        async with one_desktop(tmp_path) as (pool, env):
            await env.reset(task)
            view = types.SimpleNamespace(client=env.client, cache_dir=str(tmp_path / "cache"))
            first = await get_pdf_from_url(view, {"path": f"{site}/report.html", "dest": "report_gold.pdf"})
            tabs = await env.client.devtools({"action": "tabs", "wait_s": 10})
            second = await get_pdf_from_url(view, {"path": f"{site}/notes.html", "dest": "sub/notes.pdf",
                                                   "settle_s": 0})
            after = await env.client.devtools({"action": "tabs", "wait_s": 10})
            try:
                await get_pdf_from_url(view, {"path": unreachable, "dest": "never.pdf", "settle_s": 0})
                failure: Any = None
            except FileNotFoundError as exc:
                failure = exc
            offline = types.SimpleNamespace(client=env.client, cache_dir=str(tmp_path / "cache"),
                                            setup_context=lambda: types.SimpleNamespace(download_mirror=mirror))
            with pytest.raises(FilesMissing, match="could not load") as missing:  # an offline run's missing file
                await get_pdf_from_url(offline, {"path": unreachable, "dest": "never.pdf", "settle_s": 0})
            assert missing.value.urls == [unreachable]
            return first, tabs, after, second, failure

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    first, tabs, after, second, failure = asyncio.run(body())
    assert first == str(tmp_path / "cache" / "report_gold.pdf")
    text, size = pdf_facts(first)
    assert "Quarterly Report" in text and "Static paragraph 4321" in text and "Written by script 8642" in text
    assert size == (612.0, 792.0)
    assert second == str(tmp_path / "cache" / "sub" / "notes.pdf")
    text, _ = pdf_facts(second)
    assert "Meeting Notes" in text and "Written by script 2000" in text and "Quarterly" not in text
    assert [tab["id"] for tab in after] == [tab["id"] for tab in tabs]  # printed in its own context, then gone
    assert not any("report.html" in tab["url"] or "notes.html" in tab["url"] for tab in after)
    assert isinstance(failure, FileNotFoundError) and "could not load" in str(failure)
    assert not (tmp_path / "cache" / "never.pdf").exists()
