"""Built-in getters against a real probe on a real display (files, commands, directories, reference files)."""

from __future__ import annotations

import asyncio
import functools
import http.server
import json
import threading
import types
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from core.interfaces import JudgeServices
from core.types import Task
from environments.client import EnvironmentClient, ProbeError
from environments.judges import chrome
from environments.judges import getters as g
from environments.judges.evaluate import EvaluationEnv
from environments.judges.plugin import GETTER_NAMES
from tests.environments.desktop_fixtures import DesktopSession, desktop  # noqa: F401 (fixture)

pytestmark = pytest.mark.desktop

TASK = Task(id="getters", instruction="-", evaluator={"func": "exact_match"})


def call(desktop: DesktopSession, cache: Path, body: Callable[[EvaluationEnv], Awaitable[Any]]) -> Any:
    """Run ``body`` with the evaluation view getters receive: the live client plus a cache directory."""

    async def main(client: EnvironmentClient) -> Any:
        env = types.SimpleNamespace(client=client, env_id=desktop.env_id, screen_size=(1280, 800))
        return await body(EvaluationEnv(env, TASK, cache))  # type: ignore[arg-type]

    return desktop.run(main)


@pytest.fixture
def http_root(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real HTTP server on loopback serving ``tmp_path/www``."""
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_every_registered_getter_exists() -> None:
    """Each name environments/judges/plugin.py registers is an async ``get_<name>`` of the module it names."""
    import importlib
    import inspect

    from environments.judges.plugin import _GETTERS

    for module, names in _GETTERS.items():
        loaded = importlib.import_module(module)
        for name in names:
            assert inspect.iscoroutinefunction(getattr(loaded, f"get_{name}", None)), f"{module}:get_{name}"
    assert len(GETTER_NAMES) == len(set(GETTER_NAMES))  # no name registered twice
    assert set(g.GETTERS) | set(chrome.GETTERS) <= set(GETTER_NAMES)


def test_vm_file_downloads_into_the_evaluation_cache(desktop: DesktopSession, tmp_path: Path) -> None:
    (desktop.home / "docs").mkdir(exist_ok=True)
    (desktop.home / "docs" / "a.txt").write_text("alpha")
    (desktop.home / "docs" / "b.txt").write_text("beta")
    local = call(desktop, tmp_path, lambda env: g.get_vm_file(env, {"path": "~/docs/a.txt", "dest": "a.txt"}))
    assert local == str(tmp_path / "a.txt") and Path(local).read_text() == "alpha"
    # as OSWorld: one index in gives is that file's path, more a list; multi without gives is the first file only
    second = call(desktop, tmp_path, lambda env: g.get_vm_file(
        env, {"path": ["~/docs/a.txt", "~/docs/b.txt"], "dest": ["x.txt", "y.txt"], "multi": True, "gives": [1]}))
    assert second == str(tmp_path / "y.txt") and Path(second).read_text() == "beta"
    first = call(desktop, tmp_path, lambda env: g.get_vm_file(
        env, {"path": ["~/docs/b.txt", "~/docs/a.txt"], "dest": ["p.txt", "q.txt"], "multi": True}))
    assert first == str(tmp_path / "p.txt") and (tmp_path / "q.txt").read_text() == "alpha"
    # a file the desktop does not give (missing, a directory) is None, in its place in a list
    assert call(desktop, tmp_path, lambda env: g.get_vm_file(env, {"path": "~/docs/missing.txt", "dest": "m.txt"})) \
        is None
    some = call(desktop, tmp_path, lambda env: g.get_vm_file(env, {
        "path": ["~/docs/a.txt", "~/docs/missing.txt", "~/docs"], "dest": ["1", "2", "3"], "multi": True,
        "gives": [0, 1, 2]}))
    assert some == [str(tmp_path / "1"), None, None]
    with pytest.raises(ValueError, match="escapes"):
        call(desktop, tmp_path, lambda env: g.get_vm_file(env, {"path": "~/docs/a.txt", "dest": "../evil.txt"}))


def test_gimp_config_file_comes_from_the_desktops_gimp_profile(desktop: DesktopSession, tmp_path: Path) -> None:
    profile = desktop.home / ".config" / "GIMP" / "2.10"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "gimprc").write_text("(undo-levels 100)\n")
    local = call(desktop, tmp_path, lambda env: g.get_gimp_config_file(env, {"file_name": "gimprc", "dest": "rc"}))
    assert local == str(tmp_path / "rc") and Path(local).read_text() == "(undo-levels 100)\n"
    # no such file: None, as upstream (check_config_status then scores 0)
    assert call(desktop, tmp_path, lambda env: g.get_gimp_config_file(env, {"file_name": "sessionrc"})) is None
    with pytest.raises(ValueError, match="file_name"):
        call(desktop, tmp_path, lambda env: g.get_gimp_config_file(env, {"file_name": "../../.bashrc"}))


def test_chrome_profile_getters_read_the_preferences_file(desktop: DesktopSession, tmp_path: Path) -> None:
    profile = desktop.home / ".config" / "google-chrome" / "Default"
    profile.mkdir(parents=True, exist_ok=True)
    preferences = profile / "Preferences"
    readers = {name: getter for name, getter in chrome.GETTERS.items() if name in chrome.PREFERENCE_GETTERS}
    for getter in readers.values():  # no Preferences yet: the evaluation scores such a task 0
        with pytest.raises(FileNotFoundError, match="Preferences"):
            call(desktop, tmp_path, lambda env, getter=getter: getter(env, {}))
    preferences.write_text(json.dumps({
        "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}},
        "profile": {"name": "Thomas", "default_content_setting_values": {"cookies": 2}},
        "enable_do_not_track": True, "safebrowsing": {"enhanced": False},
        "session": {"restore_on_startup": 4, "startup_urls": ["http://funbrain.com/"]},
        "extensions": {"settings": {"abc": {"path": "/home/user/ext/unpacked"}, "def": {"state": 1}}},
    }))
    got = {name: call(desktop, tmp_path, lambda env, getter=getter: getter(env, {}))
           for name, getter in readers.items()}
    assert got == {"default_search_engine": "Bing", "profile_name": "Thomas", "enable_do_not_track": "true",
                   "enable_enhanced_safety_browsing": "false", "new_startup_page": "false",
                   "data_delete_automacally": "true", "find_unpacked_extension_path": ["/home/user/ext/unpacked"]}
    preferences.write_text("{}")  # a fresh profile: Chrome's defaults as upstream reads them
    fresh = {name: call(desktop, tmp_path, lambda env, getter=getter: getter(env, {}))
             for name, getter in readers.items()}
    assert fresh == {"default_search_engine": "Google", "profile_name": None, "enable_do_not_track": "false",
                     "enable_enhanced_safety_browsing": "false", "new_startup_page": "true",
                     "data_delete_automacally": "false", "find_unpacked_extension_path": []}
    preferences.write_text("not json")
    with pytest.raises(ValueError, match="not JSON"):
        call(desktop, tmp_path, lambda env: chrome.get_profile_name(env, {}))


def test_bookmarks_and_vlc_config_come_from_the_desktops_profiles(desktop: DesktopSession, tmp_path: Path) -> None:
    assert call(desktop, tmp_path, lambda env: chrome.get_bookmarks(env, {})) == []  # no Bookmarks file yet
    profile = desktop.home / ".config" / "google-chrome" / "Default"
    profile.mkdir(parents=True, exist_ok=True)
    roots = {"bookmark_bar": {"children": [{"type": "url", "name": "x", "url": "https://x.org/"}]}, "other": {}}
    (profile / "Bookmarks").write_text(json.dumps({"checksum": "0", "roots": roots, "version": 1}))
    assert call(desktop, tmp_path, lambda env: chrome.get_bookmarks(env, {})) == roots
    with pytest.raises(FileNotFoundError, match="vlcrc"):
        call(desktop, tmp_path, lambda env: g.get_vlc_config(env, {"dest": "vlcrc"}))
    (desktop.home / ".config" / "vlc").mkdir(parents=True, exist_ok=True)
    (desktop.home / ".config" / "vlc" / "vlcrc").write_text("[qt]\nqt-max-volume=200\n")
    local = call(desktop, tmp_path, lambda env: g.get_vlc_config(env, {"dest": "vlcrc"}))
    assert Path(local).read_text() == "[qt]\nqt-max-volume=200\n"


def test_vscode_config_replays_the_command_palette_then_reads_the_file(desktop: DesktopSession,
                                                                      tmp_path: Path) -> None:
    """No VS Code here: the keystrokes go to a focused xterm instead, whose shell runs the typed command (ctrl+shift+p
    is nothing to it), which proves the replay reached the focused window before the file was read."""
    async def focused_xterm(client: EnvironmentClient) -> None:
        await client.launch(["xterm", "-T", "vscode-config-test"])
        for _ in range(600):  # bounds a hang only: wait for the window, then focus it
            try:
                await client.activate_window("vscode-config-test", strict=True)
                break
            except ProbeError:
                await asyncio.sleep(0.1)
        # keys typed before the shell reads them wait in the terminal's pty

    desktop.run(focused_xterm)
    (desktop.home / "vscode.json").unlink(missing_ok=True)
    local = call(desktop, tmp_path, lambda env: g.get_vscode_config(env, {
        "vscode_extension_command": "echo configured > ~/vscode.json", "path": "~/vscode.json", "dest": "v.json"}))
    assert Path(local).read_text() == "configured\n"
    assert call(desktop, tmp_path, lambda env: g.get_vscode_config(env, {  # as vm_file: None, as upstream
        "vscode_extension_command": "true", "path": "~/never-written.json", "dest": "n.json"})) is None
    with pytest.raises(ValueError, match="vscode_extension_command"):
        call(desktop, tmp_path, lambda env: g.get_vscode_config(env, {"path": "~/x", "dest": "x"}))
    desktop.run(lambda client: client.close_window("vscode-config-test", strict=False))


def test_command_getters_return_the_output(desktop: DesktopSession, tmp_path: Path) -> None:
    out = call(desktop, tmp_path, lambda env: g.get_vm_command_line(
        env, {"command": "echo $HOME; echo oops >&2", "shell": True}))
    assert out == f"{desktop.home}\n"
    err = call(desktop, tmp_path, lambda env: g.get_vm_command_error(
        env, {"command": "echo oops >&2", "shell": True}))
    assert "oops" in err
    listed = call(desktop, tmp_path, lambda env: g.get_vm_command_line(env, {"command": ["ls", str(desktop.home)]}))
    assert "docs" in listed.split()


def test_text_listing_existence_and_screen(desktop: DesktopSession, tmp_path: Path) -> None:
    (desktop.home / "notes.txt").write_text("héllo\n", encoding="utf-8")
    assert call(desktop, tmp_path, lambda env: g.get_vm_file_text(env, {"path": "~/notes.txt"})) == "héllo\n"
    with pytest.raises(FileNotFoundError):
        call(desktop, tmp_path, lambda env: g.get_vm_file_text(env, {"path": "~/nope.txt"}))
    exists = call(desktop, tmp_path, lambda env: g.get_vm_files_exist(env, {"paths": ["~/notes.txt", "~/nope"]}))
    assert exists == {"~/notes.txt": True, "~/nope": False}
    tree = call(desktop, tmp_path, lambda env: g.get_list_directory(env, {"path": str(desktop.home)}))
    assert "notes.txt" in {child["name"] for child in tree["children"]}
    size = call(desktop, tmp_path, lambda env: g.get_vm_screen_size(env, {}))
    assert size == {"width": 1280, "height": 800}
    assert call(desktop, tmp_path, lambda env: g.get_rule(env, {"rules": {"expected": 3}})) == {"expected": 3}


def test_cloud_file_fetches_reference_files(tmp_path: Path, http_root) -> None:  # type: ignore[no-untyped-def]
    www, base = http_root
    (www / "gold.csv").write_text("a,b\n")
    (tmp_path / "local.txt").write_text("local gold")
    cache = tmp_path / "cache"
    cache.mkdir()
    env = EvaluationEnv(types.SimpleNamespace(client=None), TASK, cache)  # type: ignore[arg-type]
    fetched = asyncio.run(g.get_cloud_file(env, {"path": f"{base}/gold.csv", "dest": "gold.csv"}))
    assert Path(fetched).read_text() == "a,b\n"
    local = asyncio.run(g.get_cloud_file(env, {"path": (tmp_path / "local.txt").as_uri(), "dest": "l.txt"}))
    assert Path(local).read_text() == "local gold"
    with pytest.raises(FileNotFoundError):
        asyncio.run(g.get_cloud_file(env, {"path": f"{base}/absent.csv", "dest": "x.csv"}))
    with pytest.raises(FileNotFoundError):
        asyncio.run(g.get_cloud_file(env, {"path": (tmp_path / "absent").as_uri(), "dest": "y"}))
    with pytest.raises(ValueError, match="unsupported URL scheme 'ftp'"):
        asyncio.run(g.get_cloud_file(env, {"path": "ftp://example.org/x", "dest": "z"}))


def test_accessibility_tree_judged_end_to_end(tmp_path: Path) -> None:
    """A desktop with AT-SPI on: the getter fetches the tree, check_accessibility_tree scores it."""
    from core.pluginmanager import load_plugins
    from environments.judges.evaluate import evaluate
    from tests.environments.desktop_fixtures import start_session, stop_session

    session = start_session(tmp_path / "a11y", extra_args=("--accessibility",))
    plugins = load_plugins(environ={})
    frame = "//application[@name='mousepad']//frame[contains(@name, 'plan.txt')]"

    def task(xpath: str) -> Task:
        return Task(id="a11y", instruction="-", evaluator={
            "func": "check_accessibility_tree", "result": {"type": "accessibility_tree"},
            "expected": {"type": "rule", "rules": [{"xpath": xpath}]}})

    async def body(client: EnvironmentClient) -> tuple[float, float]:
        await client.open_file("~/plan.txt")
        env = types.SimpleNamespace(client=client, env_id=session.env_id, screen_size=(1280, 800))
        scores = []
        for xpath in (frame, "//application[@name='gimp']"):
            judgement = await evaluate(task(xpath), env, judge=JudgeServices.of(plugins), last_action=None)
            assert judgement.status.value == "ok", judgement.error
            scores.append(judgement.score)
        return scores[0], scores[1]

    try:
        (session.home / "plan.txt").write_text("step one\n")
        assert session.run(body) == (1.0, 0.0)
    finally:
        stop_session(session)
