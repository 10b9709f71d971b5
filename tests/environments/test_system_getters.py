"""The OS getters of :mod:`environments.judges.system` on a real local desktop (Xvfb + openbox + the probe): the
wallpaper gsettings names (dconf behind the desktop's own session bus), the default video player xdg-mime answers,
the last row of a real .xlsx in the home, the terminal text, and Macy's URL facets read from the address of a
page Chromium opened from a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import http.server
import io
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from PIL import Image

from core.types import Task
from environments.judges import system
from environments.judges.evaluate import EvaluationEnv
from tests.environments.desktops import one_desktop, serving

pytestmark = pytest.mark.desktop

PATH = ("/shop/mens-clothing/mens-casual-shirts/Men_regular_size_t,Price_discount_range,Sleeve_length/"
        "L,50_PERCENT_%20off%20%26%20more,Short%20Sleeve")


class AnyPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = b"<html><head><title>listing</title></head><body>shirts</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        return None


@pytest.fixture()
def site():  # type: ignore[no-untyped-def]
    with serving(AnyPage) as url:
        yield url


def test_system_getters_on_a_local_desktop(tmp_path: Path, site: str) -> None:
    url = f"{site}{PATH}"
    task = Task.model_validate({
        "id": "system-getters", "instruction": "test",
        "config": [
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [url]}},
        ],
        "evaluator": {"func": "exact_match"},
    })
    wallpaper = io.BytesIO()
    Image.new("RGB", (32, 24), (10, 120, 200)).save(wallpaper, format="PNG")

    async def body() -> dict[str, Any]:
        async with one_desktop(tmp_path) as (pool, env):
            await env.reset(task)
            view = EvaluationEnv(env, task, tmp_path / "cache")
            (tmp_path / "cache").mkdir()
            out: dict[str, Any] = {}
            out["fields"] = await system.get_url_path_parse(
                view, {"goto_prefix": "http://", "parse_keys": ["Men_regular_size_t", "Price_discount_range"]})
            out["terminal"] = await system.get_vm_terminal_output(view, {})
            out["player_before"] = await system.get_default_video_player(view, {})
            apps = env.home_dir / ".local" / "share" / "applications"
            apps.mkdir(parents=True, exist_ok=True)
            for name in ("player", "other"):
                (apps / f"{name}.desktop").write_text(
                    f"[Desktop Entry]\nType=Application\nName={name}\nExec=true %f\nMimeType=video/mp4;\n")
            for player, kind in (("player", "mp4"), ("player", "webm"), ("other", "x-matroska")):
                done = await env.client.execute(["xdg-mime", "default", f"{player}.desktop", f"video/{kind}"])
                assert done["returncode"] == 0, done
            out["player"] = await system.get_default_video_player(view, {})
            picture = env.home_dir / "Pictures" / "my wall.png"
            picture.parent.mkdir(exist_ok=True)
            picture.write_bytes(wallpaper.getvalue())
            set_uri = ["gsettings", "set", "org.gnome.desktop.background", "picture-uri",
                       f"file://{str(picture).replace(' ', '%20')}"]
            assert (await env.client.execute(set_uri))["returncode"] == 0
            out["wallpaper"] = Path(await system.get_vm_wallpaper(view, {"dest": "background.png"})).read_bytes()
            set_uri[-1] = f"file://{env.home_dir}/Pictures/gone.png"
            assert (await env.client.execute(set_uri))["returncode"] == 0
            with pytest.raises(FileNotFoundError, match="gone.png"):
                await system.get_vm_wallpaper(view, {"dest": "background.png"})
            book = openpyxl.Workbook()
            for row in (["Name", "Citations"], ["Geoffrey Hinton", 900000], ["Yann LeCun", 345074]):
                book.active.append(row)
            book.save(env.home_dir / "researchers.xlsx")
            out["row"] = await system.get_content_from_vm_file(
                view, {"path": str(env.home_dir / "researchers.xlsx"), "file_type": "xlsx",
                       "file_content": "last_row"})
            with pytest.raises(FileNotFoundError):
                await system.get_content_from_vm_file(
                    view, {"path": str(env.home_dir / "none.xlsx"), "file_type": "xlsx",
                           "file_content": "last_row"})
            return out

    out = asyncio.run(body())
    assert out["fields"] == {"mens_clothing": True, "shirts": True, "short_sleeve": True, "Men_regular_size_t": "L",
                             "Price_discount_range": "50_PERCENT_ off & more"}
    assert out["terminal"] is None  # the active window is Chromium, not an xterm (probe/terminal.py)
    assert out["player_before"] == "unknown"
    assert out["player"] == "player.desktop"
    assert out["wallpaper"] == wallpaper.getvalue()
    assert out["row"] == ["Yann LeCun", "345074"]


def test_bad_getter_configs_are_errors() -> None:
    async def body() -> None:
        with pytest.raises(ValueError, match="'dest'"):
            await system.get_vm_wallpaper(object(), {})
        with pytest.raises(ValueError, match="file_type 'xlsx'"):
            await system.get_content_from_vm_file(object(), {"path": "/a.csv", "file_type": "csv",
                                                            "file_content": "last_row"})
        with pytest.raises(ValueError, match="'parse_keys'"):
            await system.get_url_path_parse(object(), {"goto_prefix": "https://"})

    asyncio.run(body())
