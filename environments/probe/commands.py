"""Command endpoints of the probe: OSWorld's ``/execute``, ``/execute_with_verification``, ``/run_python`` and
``/run_bash_script``, with OSWorld's status codes: a command that cannot run (missing program, no permission) or
runs out of time is a 500 (OSWorld's client retries those), a command that ran is a 200 whatever its exit code."""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from typing import Any

from environments.probe.processes import run_command
from environments.probe.server import HTTPError, Request, Response, json_response
from environments.probe.state import ProbeState

EXECUTE_TIMEOUT_S = 120.0
RUN_PYTHON_TIMEOUT_S = 30.0
RUN_BASH_TIMEOUT_S = 100.0
MAX_COMMAND_TIMEOUT_S = 600.0


def shell_flag(data: dict[str, Any]) -> bool:
    """OSWorld's server hands the JSON value to ``subprocess`` as it is, so any truthy value means a shell: ``true``,
    ``"true"`` (three setup and two postconfig steps of the public suite send the string), ``1``, even ``"false"``."""
    return bool(data.get("shell", False))


def command_argv(state: ProbeState, req: Request, data: dict[str, Any]) -> tuple[list[str] | str, bool]:
    """``{command, shell}`` as Popen takes it: a string runs through the shell when ``shell``, else is split;
    ``~/`` arguments of a list are the desktop's home."""
    shell = shell_flag(data)
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


def command_timeout(req: Request, data: dict[str, Any], default: float) -> float:
    value = req.field(data, "timeout", (int, float), default)
    if not 0 < value <= MAX_COMMAND_TIMEOUT_S:
        raise HTTPError(400, f"timeout must be within (0, {MAX_COMMAND_TIMEOUT_S:g}] seconds, got {value}")
    return float(value)


def _cannot_run(message: str, returncode: int, output: str = "", error: str = "") -> HTTPError:
    """A 500 as OSWorld's ``/execute`` answers it (``status``, ``message``); ``returncode`` as a shell would
    report it (127 not found, 126 not executable, -1 timed out) for callers that check it."""
    return HTTPError(500, message, {"status": "error", "message": message, "output": output,
                                    "error": error or message, "returncode": returncode})


def _execute(state: ProbeState, req: Request, data: dict[str, Any]) -> dict[str, Any]:
    command, shell = command_argv(state, req, data)
    timeout = command_timeout(req, data, EXECUTE_TIMEOUT_S)
    try:
        result = run_command(command, shell=shell, timeout=timeout, cwd=state.home, env=state.env,
                             as_user=state.as_user)
    except FileNotFoundError as exc:
        raise _cannot_run(f"command not found: {exc.filename or command}", 127) from None
    except PermissionError as exc:
        raise _cannot_run(f"permission denied: {exc.filename or command}", 126) from None
    if result.timed_out:
        raise _cannot_run(f"command timed out after {timeout:g} s", -1, result.stdout, result.stderr)
    return {"status": "success", "output": result.stdout, "error": result.stderr, "returncode": result.returncode}


def execute(state: ProbeState, req: Request) -> Response:
    """``{command, shell, timeout?}`` -> ``{status, output, error, returncode}``; runs in the home directory."""
    return json_response(_execute(state, req, req.json()))


def execute_with_verification(state: ProbeState, req: Request) -> Response:
    data = req.json()
    result = _execute(state, req, data)
    verification = req.field(data, "verification", dict, {})
    max_wait = float(req.field(data, "max_wait_time", (int, float), 10))
    interval = max(0.1, float(req.field(data, "check_interval", (int, float), 1)))
    if not verification:
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
    """``{code}`` -> ``{status, message, need_more, output, error, return_code}`` (30 s limit; a timeout or an
    interpreter that cannot start is a 500 with ``output`` null, as OSWorld answers)."""
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
    except OSError as exc:
        message = f"Execution error: {exc}"
        raise HTTPError(500, message, {"status": "error", "message": message, "error": repr(exc),
                                       "need_more": False, "output": None}) from None
    finally:
        os.unlink(handle.name)
    if result.timed_out:
        message = "Execution timeout: Code took too long to execute"
        raise HTTPError(500, message, {"status": "error", "message": message, "error": "TimeoutExpired",
                                       "need_more": False, "output": None})
    error = result.stderr or ("" if result.returncode == 0 else f"Process exited with code {result.returncode}")
    message = result.stdout + (("\n" if result.stdout else "") + error if error else "")
    return json_response({"status": "success" if result.returncode == 0 else "error", "message": message,
                          "need_more": False, "output": result.stdout, "error": error,
                          "return_code": result.returncode})


def _bash_failure(status: int, text: str) -> HTTPError:
    """OSWorld's ``/run_bash_script`` says what went wrong in ``output`` and leaves ``error`` empty."""
    return HTTPError(status, text, {"status": "error", "output": text, "error": "", "returncode": -1})


def run_bash_script(state: ProbeState, req: Request) -> Response:
    """``{script, timeout, working_dir}`` -> ``{status, output, error, returncode}`` (stderr merged into output)."""
    try:
        data = req.json()
        script = req.field(data, "script", str)
        if not script.strip():
            raise HTTPError(400, "Script not supplied!")
        timeout = command_timeout(req, data, RUN_BASH_TIMEOUT_S)
        working_dir = req.field(data, "working_dir", str, None)
        cwd = state.path(working_dir, "working_dir") if working_dir else state.home
    except HTTPError as exc:
        raise _bash_failure(exc.status, exc.reason) from None
    if not os.path.isdir(cwd):
        raise _bash_failure(400, f"Working directory does not exist: {cwd}")
    try:
        result = run_command(["/bin/bash", "-c", script], timeout=timeout, cwd=cwd, env=state.env,
                             merge_stderr=True, as_user=state.as_user)
    except OSError as exc:
        raise _bash_failure(500, f"Failed to execute script: {exc}") from None
    if result.timed_out:
        raise _bash_failure(500, f"Script execution timed out after {timeout:g} seconds")
    return json_response({"status": "success" if result.returncode == 0 else "error", "output": result.stdout,
                          "error": "", "returncode": result.returncode})


ROUTES: dict[tuple[str, str], Any] = {
    ("POST", "/execute"): execute,
    ("POST", "/setup/execute"): execute,
    ("POST", "/setup/execute_with_verification"): execute_with_verification,
    ("POST", "/execute_with_verification"): execute_with_verification,
    ("POST", "/run_python"): run_python,
    ("POST", "/run_bash_script"): run_bash_script,
}
