"""The probe's endpoints: OSWorld's in-VM server protocol plus ``/action`` and ScienceBoard's file I/O.

Request and response shapes follow OSWorld's server so OSWorld clients work
unchanged; differences are deliberate and listed in the endpoint docstrings
(mostly: bad input gets a 4xx JSON ``reason`` instead of a 500 or a crash).
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from core.types import Action
from environments import desktop_user
from environments.probe import accessibility, files
from environments.probe.desktop import ActionRejected, Desktop, resolve_path
from environments.probe.processes import Launcher, run_command
from environments.probe.server import MAX_SERVED_BYTES, HTTPError, Request, Response, json_response, text_response

EXECUTE_TIMEOUT_S = 120.0
RUN_PYTHON_TIMEOUT_S = 30.0
MAX_COMMAND_TIMEOUT_S = 600.0
OPEN_FILE_TIMEOUT_S = 60.0


@dataclass
class ProbeState:
    """What every handler sees: the display, the desktop user's home, the process launcher."""

    desktop: Desktop
    home: str
    env: dict[str, str]
    python: str = sys.executable
    #: every endpoint served, extensions included (set by whoever starts the server; default: the probe's own)
    routes: dict[tuple[str, str], Any] | None = None
    #: the most bytes a file endpoint reads back or downloads (larger: 413)
    max_served_bytes: int = MAX_SERVED_BYTES
    #: the unprivileged user everything started here runs as (None: the probe's own user)
    user: Any = None
    launcher: Launcher = field(init=False)

    def __post_init__(self) -> None:
        self.launcher = Launcher(self.home, self.env, self.as_user)

    @property
    def as_user(self) -> dict[str, Any]:
        return self.user.popen_kwargs() if self.user is not None else {}

    def writing_as_user(self) -> Any:
        """A context in which this thread's file access happens as the desktop's user (see desktop_user)."""
        return desktop_user.filesystem_identity(self.user)

    def path(self, raw: Any, name: str = "path") -> str:
        if not isinstance(raw, str) or not raw:
            raise HTTPError(400, f"field {name!r} must be a non-empty path string")
        try:
            return resolve_path(raw, self.home)
        except ValueError as exc:
            raise HTTPError(400, f"field {name!r}: {exc}") from None


# -- helpers ---------------------------------------------------------------------------


def _argv(state: ProbeState, req: Request, data: dict[str, Any]) -> tuple[list[str] | str, bool]:
    shell = req.field(data, "shell", bool, False)
    command = req.field(data, "command", (str, list))
    if isinstance(command, list):
        if not command or not all(isinstance(a, str) for a in command):
            raise HTTPError(400, "field 'command' must be a non-empty list of strings (or a string)")
        if shell:
            command = shlex.join(command)
    if isinstance(command, str) and not shell:
        try:
            command = shlex.split(command)
        except ValueError as exc:
            raise HTTPError(400, f"cannot split command: {exc}") from None
        if not command:
            raise HTTPError(400, "field 'command' is empty")
    if isinstance(command, list):
        command = [state.home + a[1:] if a.startswith("~/") else a for a in command]
    return command, shell


def _timeout(req: Request, data: dict[str, Any], default: float) -> float:
    value = req.field(data, "timeout", (int, float), default)
    if not 0 < value <= MAX_COMMAND_TIMEOUT_S:
        raise HTTPError(400, f"timeout must be within (0, {MAX_COMMAND_TIMEOUT_S:g}] seconds, got {value}")
    return float(value)


def _execute(state: ProbeState, req: Request, data: dict[str, Any]) -> dict[str, Any]:
    command, shell = _argv(state, req, data)
    timeout = _timeout(req, data, EXECUTE_TIMEOUT_S)
    try:
        result = run_command(command, shell=shell, timeout=timeout, cwd=state.home, env=state.env,
                             as_user=state.as_user)
    except FileNotFoundError as exc:  # what a shell would say, as a result rather than a server error
        message = f"command not found: {exc.filename or command}"
        return {"status": "error", "output": "", "error": message, "returncode": 127, "message": message}
    except PermissionError as exc:
        message = f"permission denied: {exc.filename or command}"
        return {"status": "error", "output": "", "error": message, "returncode": 126, "message": message}
    if result.timed_out:
        message = f"command timed out after {timeout:g} s"
        return {"status": "error", "output": result.stdout, "error": result.stderr or message, "returncode": -1,
                "message": message}
    return {"status": "success", "output": result.stdout, "error": result.stderr, "returncode": result.returncode}


# -- observation ---------------------------------------------------------------------


def index(state: ProbeState, req: Request) -> Response:
    return json_response({"service": "scalecua-probe", "display": state.desktop.display, "endpoints": sorted(
        f"{m} {p}" for m, p in (state.routes or ROUTES))})


def screenshot(state: ProbeState, req: Request) -> Response:
    try:
        png = state.desktop.screenshot_png()
    except Exception as exc:  # mss / Xlib fail in many ways (even AssertionError) once the X server is gone
        raise HTTPError(503, f"the display cannot be captured: {exc!r}") from None
    return Response(png, content_type="image/png")


def get_accessibility(state: ProbeState, req: Request) -> Response:
    tree, reason = accessibility.dump_tree(state.env, state.as_user)
    return json_response({"AT": tree} if tree is not None else {"AT": None, "reason": reason})


def terminal(state: ProbeState, req: Request) -> Response:
    """OSWorld reads gnome-terminal through AT-SPI; this desktop has no such terminal, so output is null."""
    return json_response({"output": None, "status": "success", "reason": "no AT-SPI terminal on this desktop"})


def screen_size(state: ProbeState, req: Request) -> Response:
    width, height = state.desktop.screen_size()
    return json_response({"width": width, "height": height})


def cursor_position(state: ProbeState, req: Request) -> Response:
    try:
        return json_response(list(state.desktop.cursor_position()))
    except ActionRejected as exc:
        raise HTTPError(500, str(exc)) from None


def get_platform(state: ProbeState, req: Request) -> Response:
    return text_response(platform.system())


# -- commands --------------------------------------------------------------------------


def execute(state: ProbeState, req: Request) -> Response:
    """``{command, shell, timeout?}`` -> ``{status, output, error, returncode}``; runs in the home directory."""
    return json_response(_execute(state, req, req.json()))


def execute_with_verification(state: ProbeState, req: Request) -> Response:
    data = req.json()
    result = _execute(state, req, data)
    verification = req.field(data, "verification", dict, {})
    max_wait = float(req.field(data, "max_wait_time", (int, float), 10))
    interval = max(0.1, float(req.field(data, "check_interval", (int, float), 1)))
    if not verification or result["status"] != "success":
        return json_response(result)
    if not 0 <= max_wait <= MAX_COMMAND_TIMEOUT_S:
        raise HTTPError(400, f"max_wait_time must be within [0, {MAX_COMMAND_TIMEOUT_S:g}]")
    start = time.monotonic()
    while True:
        passed = True
        if "window_exists" in verification:
            passed = bool(state.desktop.find_windows(str(verification["window_exists"])))
        if passed and "command_success" in verification:
            check = run_command(str(verification["command_success"]), shell=True, timeout=5, cwd=state.home,
                                env=state.env, as_user=state.as_user)
            passed = check.returncode == 0
        waited = time.monotonic() - start
        if passed:
            return json_response({**result, "verification": "passed", "wait_time": waited})
        if waited >= max_wait:
            return json_response({**result, "status": "verification_failed", "verification": "failed",
                                  "wait_time": waited}, 500)
        time.sleep(interval)


def run_python(state: ProbeState, req: Request) -> Response:
    """``{code}`` -> ``{status, message, output, error, return_code}`` (30 s limit, the probe's interpreter)."""
    data = req.json()
    code = req.field(data, "code", str)
    if not code.strip():
        raise HTTPError(400, "field 'code' is empty")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as handle:
        handle.write(code)
    os.chmod(handle.name, 0o644)  # the desktop's user runs it
    try:
        result = run_command([state.python, handle.name], timeout=RUN_PYTHON_TIMEOUT_S, cwd=state.home,
                             env=state.env, as_user=state.as_user)
    finally:
        os.unlink(handle.name)
    if result.timed_out:
        return json_response({"status": "error", "message": "Execution timeout: Code took too long to execute",
                              "output": result.stdout, "error": "TimeoutExpired", "return_code": -1})
    error = result.stderr or ("" if result.returncode == 0 else f"Process exited with code {result.returncode}")
    message = result.stdout + (("\n" if result.stdout else "") + error if error else "")
    return json_response({"status": "success" if result.returncode == 0 else "error", "message": message,
                          "output": result.stdout, "error": error, "return_code": result.returncode})


def run_bash_script(state: ProbeState, req: Request) -> Response:
    """``{script, timeout, working_dir}`` -> ``{status, output, error, returncode}`` (stderr merged into output)."""
    data = req.json()
    script = req.field(data, "script", str)
    timeout = _timeout(req, data, 100)
    working_dir = req.field(data, "working_dir", str, None)
    cwd = state.path(working_dir, "working_dir") if working_dir else state.home
    if not os.path.isdir(cwd):
        raise HTTPError(400, f"working directory does not exist: {cwd}")
    result = run_command(["/bin/bash", "-c", script], timeout=timeout, cwd=cwd, env=state.env, merge_stderr=True,
                         as_user=state.as_user)
    if result.timed_out:
        return json_response({"status": "error", "output": f"Script execution timed out after {timeout:g} seconds",
                              "error": "", "returncode": -1})
    return json_response({"status": "success" if result.returncode == 0 else "error", "output": result.stdout,
                          "error": "", "returncode": result.returncode})


# -- actions ---------------------------------------------------------------------------


def action(state: ProbeState, req: Request) -> Response:
    """``{action: {type, x, y, ...}}`` (grid coordinates) -> ``{status, output, cursor?}``."""
    data = req.json()
    raw = req.field(data, "action", dict)
    try:
        parsed = Action.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'action'}: {e['msg']}" for e in exc.errors())
        raise HTTPError(400, f"invalid action: {problems}") from None
    try:
        with state.writing_as_user():  # write_file lands where the agent's own shell could write, owned by it
            return json_response(state.desktop.perform(parsed, state.home))
    except ActionRejected as exc:
        raise HTTPError(400, f"{parsed.type.value} failed: {exc}") from None
    except OSError as exc:  # write_file into a place it cannot write
        raise HTTPError(400, f"{parsed.type.value} failed: {exc}") from None


# -- windows and applications ------------------------------------------------------------


def launch(state: ProbeState, req: Request) -> Response:
    command, shell = _argv(state, req, req.json())
    try:
        state.launcher.launch(command, shell=shell)
    except FileNotFoundError:
        raise HTTPError(400, f"program not found: {command[0] if isinstance(command, list) else command}") from None
    except PermissionError:
        raise HTTPError(400, f"program is not executable: {command[0]}") from None
    shown = command if isinstance(command, str) else " ".join(command)
    return text_response(f"{shown} launched successfully")


def open_file(state: ProbeState, req: Request) -> Response:
    """Open ``path`` with its application and wait (``timeout_seconds``, default 60) for its window."""
    data = req.json()
    raw = req.field(data, "path", str)
    window_name = req.field(data, "window_name", str, None)
    timeout = float(req.field(data, "timeout_seconds", (int, float), OPEN_FILE_TIMEOUT_S))
    if not 0 < timeout <= MAX_COMMAND_TIMEOUT_S:
        raise HTTPError(400, f"timeout_seconds must be within (0, {MAX_COMMAND_TIMEOUT_S:g}]")
    path = state.path(raw)
    before = {w.window_id for w in state.desktop.windows()}
    if os.path.exists(path):
        argv, class_hint = files.opener_for(path)
        names = [window_name] if window_name else [os.path.basename(path), os.path.splitext(os.path.basename(path))[0]]
    elif shutil.which(raw):
        argv, class_hint = [raw], raw
        names = [window_name or raw]
    else:
        raise HTTPError(404, f"file or application not found: {raw}")
    state.launcher.launch(argv)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for window in state.desktop.windows():
            titled = any(n and n.lower() in window.name.lower() for n in names)
            new_of_app = window.window_id not in before and class_hint and class_hint in window.wm_class.lower()
            if titled or new_of_app:
                try:
                    state.desktop.activate(window)
                except ActionRejected:
                    pass  # shown but not activatable yet: still opened
                return text_response(f"opened {path} in window {window.name!r}")
        time.sleep(0.2)
    raise HTTPError(500, f"no window for {names} appeared within {timeout:g} s after starting {argv[0]}")


def _window_request(state: ProbeState, req: Request) -> tuple[list[Any], str]:
    data = req.json()
    name = req.field(data, "window_name", str)
    strict = req.field(data, "strict", bool, False)
    by_class = req.field(data, "by_class", bool, False)
    windows = state.desktop.find_windows(name, strict=strict, by_class=by_class)
    if not windows:
        raise HTTPError(404, f"Window {name} not found")
    return windows, name


def activate_window(state: ProbeState, req: Request) -> Response:
    windows, _ = _window_request(state, req)
    try:
        state.desktop.activate(windows[0])
    except ActionRejected as exc:
        raise HTTPError(500, str(exc)) from None
    return text_response("Window activated successfully")


def close_window(state: ProbeState, req: Request) -> Response:
    windows, _ = _window_request(state, req)
    state.desktop.close(windows[0])
    return text_response("Window closed successfully.")


ROUTES: dict[tuple[str, str], Any] = {
    ("GET", "/"): index,
    ("GET", "/screenshot"): screenshot,
    ("GET", "/accessibility"): get_accessibility,
    ("GET", "/terminal"): terminal,
    ("POST", "/screen_size"): screen_size,
    ("GET", "/screen_size"): screen_size,
    ("GET", "/cursor_position"): cursor_position,
    ("GET", "/platform"): get_platform,
    ("POST", "/execute"): execute,
    ("POST", "/setup/execute"): execute,
    ("POST", "/setup/execute_with_verification"): execute_with_verification,
    ("POST", "/execute_with_verification"): execute_with_verification,
    ("POST", "/run_python"): run_python,
    ("POST", "/run_bash_script"): run_bash_script,
    ("POST", "/action"): action,
    ("POST", "/setup/launch"): launch,
    ("POST", "/setup/open_file"): open_file,
    ("POST", "/setup/activate_window"): activate_window,
    ("POST", "/setup/close_window"): close_window,
    **files.ROUTES,
}
