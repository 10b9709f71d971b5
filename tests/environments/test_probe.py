"""The probe on a real Xvfb display: OSWorld endpoints, auth, bad input, and real X input checked with xev."""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import re
import subprocess
import sys
import time

import pytest
from PIL import Image

from core.types import Action, ActionType
from environments.actions import grid_to_pixels
from environments.client import EnvironmentClient
from tests.environments.desktop_fixtures import DesktopSession, desktop, http_call, wait_until  # noqa: F401 (fixture)

pytestmark = pytest.mark.desktop


def raw_request(session: DesktopSession, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, token: bool = True) -> tuple[int, bytes]:
    return http_call(session.port, session.token if token else None, method, path, body, headers)


def test_screenshot_is_the_screen_with_the_cursor_drawn_in(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> tuple[bytes, bytes]:
        await client.act(Action(type=ActionType.MOUSE_MOVE, x=500, y=500))
        with_cursor = await client.screenshot()
        await client.act(Action(type=ActionType.MOUSE_MOVE, x=100, y=900))
        return with_cursor, await client.screenshot()

    at_centre, elsewhere = desktop.run(body)
    first, second = Image.open(io.BytesIO(at_centre)), Image.open(io.BytesIO(elsewhere))
    assert first.size == (1280, 800) and first.format == "PNG"
    box = (636, 396, 652, 412)  # just right/below the hotspot at (640, 400)
    assert first.crop(box).tobytes() != second.crop(box).tobytes()


def test_png_encoding_is_lossless() -> None:
    import numpy as np

    from environments.probe.desktop import encode_png

    rng = np.random.default_rng(0)
    bgra = rng.integers(0, 256, size=(37, 53, 4), dtype=np.uint8)
    image = Image.open(io.BytesIO(encode_png(bgra.tobytes(), 53, 37)))
    assert image.mode == "RGB" and image.size == (53, 37)
    assert np.array_equal(np.asarray(image), bgra[:, :, 2::-1])


def test_observation_endpoints(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> tuple:
        await client.act(Action(type=ActionType.MOUSE_MOVE, x=250, y=750))
        return (await client.screen_size(), await client.cursor_position(), await client.platform(),
                await client.terminal())

    size, cursor, system, terminal = desktop.run(body)
    assert size == (1280, 800)
    assert cursor == grid_to_pixels(250, 750, (1280, 800)) == (320, 600)
    assert system == "Linux" and terminal is None


def test_accessibility_without_a_bus_says_why(desktop: DesktopSession) -> None:
    status, data = raw_request(desktop, "GET", "/accessibility")
    answer = json.loads(data)
    assert status == 200 and answer["AT"] is None
    assert "accessibility" in answer["reason"] or "pyatspi" in answer["reason"]


# -- auth and bad input ---------------------------------------------------------------------


def test_every_request_needs_the_token(desktop: DesktopSession) -> None:
    for headers, token in (({}, False), ({"Authorization": "Bearer wrong"}, False), ({"Authorization": "Basic x"}, False)):
        status, data = raw_request(desktop, "GET", "/platform", headers=headers, token=token)
        assert status == 401 and b"Bearer" in data
    assert raw_request(desktop, "GET", "/platform")[0] == 200


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "reason"),
    [
        ("POST", "/execute", b"{not json", 400, "not valid JSON"),
        ("POST", "/execute", b"[1, 2]", 400, "must be a JSON object"),
        ("POST", "/execute", b"{}", 400, "missing required field 'command'"),
        ("POST", "/execute", b'{"command": 5}', 400, "must be str or list"),
        ("POST", "/execute", b'{"command": "true", "timeout": 99999}', 400, "timeout must be within"),
        ("POST", "/execute", b'{"command": "echo \\"unclosed"}', 400, "cannot split command"),
        ("POST", "/action", b'{"action": {"type": "left_click"}}', 400, "left_click needs x and y"),
        ("POST", "/action", b'{"action": {"type": "fly"}}', 400, "invalid action"),
        ("POST", "/action", b'{"action": {"type": "key", "keys": ["nokey!"]}}', 400, "unknown key"),
        ("POST", "/action", b'{"action": "left_click"}', 400, "must be dict"),
        ("POST", "/run_python", b'{"code": ""}', 400, "empty"),
        ("POST", "/run_bash_script", b'{"script": "ls", "working_dir": "/no/such/dir"}', 400, "does not exist"),
        ("POST", "/setup/upload", b"plain", 400, "multipart/form-data"),
        ("POST", "/setup/download_file", b'{"url": "ftp://x/y", "path": "~/y"}', 400, "unsupported URL scheme"),
        ("POST", "/setup/download_file", b'{"url": "file:///no/such", "path": "~/y"}', 404, "no such file"),
        ("POST", "/setup/open_file", b'{"path": "~/missing.xlsx"}', 404, "not found"),
        ("POST", "/setup/close_window", b"{}", 400, "window_name"),
        ("POST", "/window_size", b"{}", 400, "app_class_name is required"),
        ("POST", "/setup/change_wallpaper", b"{}", 400, "Path not supplied"),
        ("POST", "/list_directory", b'{"path": "~/nothing-here"}', 400, "not a directory"),
        ("GET", "/read?path=/no/such/file", None, 404, "no such file"),
        ("GET", "/read", None, 400, "non-empty path"),
        ("GET", "/nope", None, 404, "unknown endpoint"),
        ("GET", "/execute", None, 405, "takes POST"),
    ],
)
def test_bad_input_gets_a_4xx_with_a_reason(desktop: DesktopSession, method: str, path: str, body: bytes | None,
                                            status: int, reason: str) -> None:
    got, data = raw_request(desktop, method, path, body, {"Content-Type": "application/json"})
    answer = json.loads(data)
    assert got == status, answer
    # where OSWorld's clients read the reason: 'error' (and 'message'); /run_bash_script says it in 'output'
    said = answer["output"] if path == "/run_bash_script" else answer["error"]
    assert answer["status"] == "error" and reason in said, answer


def test_a_huge_body_is_refused_without_reading_it(desktop: DesktopSession) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", desktop.port, timeout=10)
    conn.putrequest("POST", "/setup/upload")
    conn.putheader("Authorization", f"Bearer {desktop.token}")
    conn.putheader("Content-Length", str(10 << 30))
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413
    conn.close()
    assert raw_request(desktop, "GET", "/platform")[0] == 200  # still serving


def test_the_probe_serves_only_its_own_endpoints_unless_given_extension_routes(desktop: DesktopSession) -> None:
    status, body = raw_request(desktop, "GET", "/")
    endpoints = json.loads(body)["endpoints"]
    assert status == 200 and "POST /execute" in endpoints
    assert not any(e.endswith("/tex/check") for e in endpoints), "ScienceBoard's checkers are an extension"
    assert raw_request(desktop, "POST", "/tex/check", b"{}")[0] == 404


@pytest.mark.parametrize(("module", "message"), [
    ("environments.no_such_module", "--routes environments.no_such_module: cannot import it"),
    ("environments.probe.files", None),  # collides with the probe's own endpoints (files.ROUTES is built in)
    ("json", "--routes json: the module has no ROUTES mapping"),
])
def test_extension_routes_that_cannot_be_served_stop_the_probe_with_the_reason(
        desktop: DesktopSession, module: str, message: str | None) -> None:
    proc = subprocess.run([sys.executable, "-m", "environments.probe", "--display", desktop.display, "--port", "0",
                           "--routes", module], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(desktop.home)})
    assert proc.returncode == 2, proc.stderr
    assert (message or "is already served by the probe") in proc.stderr
    assert proc.stdout == ""  # no ready line: whoever started it learns it failed


# -- commands -----------------------------------------------------------------------------------


def test_execute_forms_and_results(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> list[dict]:
        return [
            await client.execute(["sh", "-c", "echo out; echo err >&2; exit 3"]),
            await client.execute("echo ~/x $HOME", shell=True),
            await client.execute(["echo", "~/y"]),
            await client.execute("no-such-command-q"),
        ]

    listed, shell, tilde, missing = desktop.run(body)
    assert listed == {"status": "success", "output": "out\n", "error": "err\n", "returncode": 3}
    assert shell["output"] == f"{desktop.home}/x {desktop.home}\n"
    assert tilde["output"] == f"{desktop.home}/y\n"
    # a 500, as OSWorld's server answers it, which the client hands back as the result it is
    assert missing["status"] == "error" and missing["returncode"] == 127 and "not found" in missing["message"]


def test_execute_never_hangs(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> tuple[dict, dict, bool]:
        slow = await client.execute("sleep 30", shell=True, timeout=1)
        background = await client.execute("sleep 300 > /dev/null & echo started $!", shell=True)
        pid = int(background["output"].split()[-1])
        alive = process_is_sleeping(pid)  # checked as soon as the answer is here
        await client.execute(["kill", str(pid)])
        return slow, background, alive

    slow, background, child_alive = desktop.run(body)
    # the probe's own 1 s limit ended the command (the client would only give up after 1 + 15 s)
    assert slow["status"] == "error" and "command timed out after 1 s" in slow["message"], slow
    # a background child holding the stderr pipe does not keep the request open: the answer came back while
    # that child (sleep 300, killed above; the desktop's teardown sweeps it if not) was still running
    assert background["output"].startswith("started ") and background["status"] == "success", background
    assert child_alive, "the background sleep had already exited when the answer arrived"


def process_is_sleeping(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) ``sleep`` process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)
        with open(f"/proc/{pid}/comm") as comm:
            name = comm.read().strip()
    except OSError:
        return False
    return name == "sleep" and fields[1].split()[0] != "Z"


def test_run_python_and_bash_scripts(desktop: DesktopSession) -> None:
    (desktop.home / "work").mkdir(exist_ok=True)

    async def body(client: EnvironmentClient) -> list[dict]:
        return [
            await client.run_python("import os\nprint(6 * 7)\nprint(os.getcwd())"),
            await client.run_python("raise SystemExit('boom')"),
            await client.run_bash_script("pwd; echo oops >&2; exit 4", timeout=10, working_dir="~/work"),
        ]

    good, bad, bash = desktop.run(body)
    assert good["status"] == "success" and good["output"] == f"42\n{desktop.home}\n" and good["return_code"] == 0
    assert bad["status"] == "error" and "boom" in bad["error"] and bad["return_code"] == 1
    assert bash == {"status": "error", "output": f"{desktop.home}/work\noops\n", "error": "", "returncode": 4}


# -- files ----------------------------------------------------------------------------------------


def test_file_transfer_endpoints(desktop: DesktopSession, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 3)

    async def body(client: EnvironmentClient) -> dict:
        await client.upload_file("~/up/data.bin", b"\x00\xff binary")
        await client.download_file(source.as_uri(), "~/down/source.bin")
        await client.write_text("~/notes/a.txt", "héllo\n")
        await client.append_text("~/notes/a.txt", "wörld\n")
        return {
            "uploaded": await client.get_file("~/up/data.bin"),
            "downloaded": await client.get_file(f"{desktop.home}/down/source.bin"),
            "missing": await client.get_file("~/nope.bin"),
            "text": await client.read_text("~/notes/a.txt"),
            "tree": await client.list_directory("~/notes"),
        }

    got = desktop.run(body)
    assert got["uploaded"] == b"\x00\xff binary"
    assert got["downloaded"] == source.read_bytes()
    assert got["missing"] is None
    assert got["text"] == "héllo\nwörld\n"
    assert got["tree"] == {"type": "directory", "name": "notes", "children": [{"type": "file", "name": "a.txt"}]}


# -- windows and applications ------------------------------------------------------------------------


def test_launch_activate_and_close_a_window(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> tuple[str, str]:
        await client.launch(["xterm", "-T", "probe-window-test"])
        deadline = time.monotonic() + 60  # bounds a hang only: wait for the xterm window to appear
        while "not found" in (activated := await client.activate_window("PROBE-WINDOW", strict=False)):
            assert time.monotonic() < deadline, activated
            await asyncio.sleep(0.1)
        strict_miss = await client.activate_window("PROBE-WINDOW", strict=True)  # a 200, as OSWorld's server
        assert strict_miss == "Window PROBE-WINDOW not found; nothing activated"
        await client.activate_window("XTerm", by_class=True)
        closed = await client.close_window("probe-window-test", strict=True)
        return activated, closed

    activated, closed = desktop.run(body)
    assert activated == "Window activated successfully" and closed.startswith("Window closed")
    gone = wait_until(lambda: "probe-window-test" not in subprocess.run(
        ["pgrep", "-af", "xterm"], capture_output=True, text=True).stdout, timeout=60)
    assert gone, "xterm did not exit after a polite close"


def test_open_file_starts_the_right_app_and_waits_for_its_window(desktop: DesktopSession) -> None:
    (desktop.home / "Documents").mkdir(exist_ok=True)
    (desktop.home / "Documents" / "plan.txt").write_text("step one\n")

    async def body(client: EnvironmentClient) -> str:
        return await client.open_file("~/Documents/plan.txt", timeout_s=60)

    assert "plan.txt" in desktop.run(body)
    titles = subprocess.run(["xdotool", "search", "--onlyvisible", "--class", "mousepad", "getwindowname"],
                            env={"DISPLAY": desktop.display}, capture_output=True, text=True).stdout
    assert "plan.txt" in titles
    desktop.run(lambda client: client.close_window("mousepad", by_class=True))


# -- actions, observed by xev -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xev(desktop: DesktopSession):  # type: ignore[no-untyped-def]
    """A big xev window logging every pointer and key event (with root coordinates) to a file."""
    log = desktop.home / "xev.log"

    async def start(client: EnvironmentClient) -> None:
        await client.launch(f"xev -name xevtest -geometry 1200x720+10+10 -event button -event keyboard "
                            f"-event mouse > {log} 2>&1", shell=True)

    desktop.run(start)
    assert wait_until(lambda: log.exists() and "Outer window" in log.read_text(), timeout=60), "xev never started"
    # ready once its window gets pointer events: keep moving the pointer until xev logs one
    sync_with_xev(desktop, log, len(log.read_text()), resend_after_s=1.0)
    yield log
    desktop.run(lambda client: client.execute(["pkill", "-f", "xev -name xevtest"]))


def events_after(log, mark: int) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    text = log.read_text()[mark:]
    events = []
    for block in text.split("\n\n"):
        match = re.match(r"\s*(\w+) event", block)
        if not match:
            continue
        fields: dict = {}
        if root := re.search(r"root:\((-?\d+),(-?\d+)\)", block):
            fields["root"] = (int(root.group(1)), int(root.group(2)))
        if button := re.search(r"button (\d+)", block):
            fields["button"] = int(button.group(1))
        if keysym := re.search(r"keysym 0x[0-9a-f]+, (\w+)\)", block):
            fields["keysym"] = keysym.group(1)
        if stamp := re.search(r"time (\d+)", block):
            fields["time"] = int(stamp.group(1))
        events.append((match.group(1), fields))
    return events


#: grid points inside the xev window that no test acts on; the pointer alternates between them as a sentinel
SENTINELS = ((850, 800), (860, 800))
_sentinel_moves = [0]


def sync_with_xev(desktop: DesktopSession, log, mark: int, resend_after_s: float | None = None,  # type: ignore[no-untyped-def]
                  deadline_s: float = 60.0) -> list[tuple[str, dict]]:
    """Move the pointer to a sentinel point and wait until xev logs that motion; return the events logged
    after ``mark`` before it. The X server delivers events in order and each action's xdotool runs have
    finished when the probe answers, so everything an earlier action caused is logged before the sentinel.
    ``resend_after_s``: move again if xev has not logged it by then (while its window may not be mapped yet)."""
    deadline = time.monotonic() + deadline_s
    while True:
        point = SENTINELS[_sentinel_moves[0] % 2]
        _sentinel_moves[0] += 1
        target = grid_to_pixels(*point, (1280, 800))
        desktop.run(lambda client: client.act(Action(type=ActionType.MOUSE_MOVE, x=point[0], y=point[1])))
        resend_at = None if resend_after_s is None else time.monotonic() + resend_after_s
        while True:
            events = events_after(log, mark)
            for index, (name, fields) in enumerate(events):
                if name == "MotionNotify" and fields.get("root") == target:
                    return events[:index]
            assert time.monotonic() < deadline, f"xev did not log the pointer moving to {target} in {deadline_s:g} s"
            if resend_at is not None and time.monotonic() > resend_at:
                break
            time.sleep(0.05)


def perform(desktop: DesktopSession, log, action: Action) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    """Run the action, then return the events xev logged for it (all of them: up to a sentinel motion)."""
    mark = len(log.read_text())
    result = desktop.run(lambda client: client.act(action))
    assert result["status"] == "ok"
    return sync_with_xev(desktop, log, mark)


def presses(events: list[tuple[str, dict]], kind: str = "ButtonPress") -> list[dict]:
    return [fields for name, fields in events if name == kind]


def test_clicks_land_on_the_rescaled_pixel(desktop: DesktopSession, xev) -> None:  # type: ignore[no-untyped-def]
    target = grid_to_pixels(400, 600, (1280, 800))
    cases = {ActionType.LEFT_CLICK: [1], ActionType.RIGHT_CLICK: [3], ActionType.MIDDLE_CLICK: [2],
             ActionType.DOUBLE_CLICK: [1, 1], ActionType.TRIPLE_CLICK: [1, 1, 1]}
    for kind, buttons in cases.items():
        events = perform(desktop, xev, Action(type=kind, x=400, y=600))
        assert [p["button"] for p in presses(events)] == buttons, kind
        assert all(p["root"] == target for p in presses(events)), kind
        assert len(presses(events, "ButtonRelease")) == len(buttons)


def test_drag_presses_moves_and_releases(desktop: DesktopSession, xev) -> None:  # type: ignore[no-untyped-def]
    events = perform(desktop, xev, Action(type=ActionType.LEFT_CLICK_DRAG, start_x=200, start_y=200, x=700, y=500))
    names = [name for name, _ in events]
    press, release = names.index("ButtonPress"), names.index("ButtonRelease")
    assert press < release and "MotionNotify" in names[press:release]
    assert presses(events)[0]["root"] == grid_to_pixels(200, 200, (1280, 800))
    assert presses(events, "ButtonRelease")[0]["root"] == grid_to_pixels(700, 500, (1280, 800))


def test_mouse_down_up_and_scroll(desktop: DesktopSession, xev) -> None:  # type: ignore[no-untyped-def]
    down = perform(desktop, xev, Action(type=ActionType.LEFT_MOUSE_DOWN, x=300, y=300))
    up = perform(desktop, xev, Action(type=ActionType.LEFT_MOUSE_UP, x=320, y=300))
    assert presses(down)[0]["root"] == grid_to_pixels(300, 300, (1280, 800)) and not presses(down, "ButtonRelease")
    assert presses(up, "ButtonRelease")[0]["root"] == grid_to_pixels(320, 300, (1280, 800))
    for direction, button in (("up", 4), ("down", 5), ("left", 6), ("right", 7)):
        events = perform(desktop, xev, Action(type=ActionType.SCROLL, direction=direction, amount=3, x=500, y=500))
        assert [p["button"] for p in presses(events)] == [button] * 3, direction


def test_keys_typing_and_holding(desktop: DesktopSession, xev) -> None:  # type: ignore[no-untyped-def]
    desktop.run(lambda client: client.act(Action(type=ActionType.LEFT_CLICK, x=500, y=500)))  # focus xev
    combo = presses(perform(desktop, xev, Action(type=ActionType.KEY, keys=["ctrl", "shift", "t"])), "KeyPress")
    assert [k["keysym"] for k in combo] == ["Control_L", "Shift_L", "T"]
    typed = presses(perform(desktop, xev, Action(type=ActionType.TYPE, text="aB3-")), "KeyPress")
    assert [k["keysym"] for k in typed if k["keysym"] not in ("Shift_L", "Shift_R")] == ["a", "B", "3", "minus"]
    held = perform(desktop, xev, Action(type=ActionType.HOLD_KEY, keys=["shift"], duration=0.4))
    down = presses(held, "KeyPress")[0]
    up = presses(held, "KeyRelease")[-1]
    assert down["keysym"] == up["keysym"] == "Shift_L"
    assert up["time"] - down["time"] >= 350  # X server milliseconds


def test_utility_and_scienceboard_actions(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> list[dict]:
        await client.act(Action(type=ActionType.MOUSE_MOVE, x=123, y=456))
        start = time.monotonic()
        waited = await client.act(Action(type=ActionType.WAIT, duration=0.5))
        waited["elapsed"] = time.monotonic() - start
        return [
            await client.act(Action(type=ActionType.CURSOR_POSITION)),
            waited,
            await client.act(Action(type=ActionType.WRITE_FILE, path="~/sci/result.txt", content="π ≈ 3.14")),
            await client.act(Action(type=ActionType.ANSWER, text="42")),
            await client.act(Action(type=ActionType.DONE)),
        ]

    cursor, waited, written, answer, done = desktop.run(body)
    assert cursor["cursor"] == [123, 456]
    assert waited["elapsed"] >= 0.5
    assert (desktop.home / "sci" / "result.txt").read_text(encoding="utf-8") == "π ≈ 3.14"
    assert answer["output"] == "answer: 42" and done == {"status": "ok", "output": None}
