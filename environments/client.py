"""Async client for the interaction probe protocol (OSWorld's in-VM server, plus our additions).

The same client drives our probe (:mod:`environments.probe`) and a real OSWorld
VM server: every OSWorld endpoint uses OSWorld's request and response shapes.
Our additions are ``POST /action`` (one :class:`core.types.Action` executed
with real X input) and ScienceBoard's ``/read``, ``/write``, ``/append``.

Errors are typed so the rollout loop can tell who is at fault:

* :class:`ProbeConnectionError` (also an :class:`core.errors.EnvironmentFailure`):
  the probe could not be reached or did not answer in time: retry the episode
  on another environment.
* :class:`ProbeError`: the probe answered with an error status; ``status_code``
  and ``reason`` say what it refused and why (bad action, missing file, ...).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Awaitable, Callable, Mapping, Sequence

import httpx
import structlog

from core.errors import EnvironmentFailure, ScaleCUAError
from core.types import Action, ActionType, Observation

log = structlog.get_logger(__name__)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class ProbeError(ScaleCUAError):
    """The probe answered ``status_code`` (or could not be reached: ``None``) for ``endpoint``."""

    def __init__(self, endpoint: str, status_code: int | None, reason: str):
        self.endpoint = endpoint
        self.status_code = status_code
        self.reason = reason
        where = f"HTTP {status_code}" if status_code is not None else "no answer"
        super().__init__(f"probe {endpoint}: {where}: {reason}")


class ProbeUnavailableError(ProbeError, EnvironmentFailure):
    """The probe answered 503: its desktop cannot serve the request (the display died; an environment failure)."""


class ProbeConnectionError(ProbeError, EnvironmentFailure):
    """The probe is unreachable, closed the connection, or timed out (an environment failure)."""

    def __init__(self, endpoint: str, reason: str):
        super().__init__(endpoint, None, reason)


def _reason_from(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("reason", "error", "message", "output"):
            if body.get(key):
                return str(body[key])[:500]
    return str(body)[:500]


class EnvironmentClient:
    """Talks to one probe (or OSWorld server) at ``base_url``; asyncio-native.

    ``token`` is sent as ``Authorization: Bearer <token>`` (our probe requires it
    when bound beyond loopback; OSWorld's server ignores it).
    """

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 60.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout)

    # -- plumbing ----------------------------------------------------------

    async def _request(
        self,
        method: str,
        endpoint: str,
        *,
        timeout: float | None = None,
        ok_statuses: Sequence[int] = (200,),
        **kwargs: Any,
    ) -> httpx.Response:
        try:
            response = await self._http.request(
                method, endpoint, timeout=timeout if timeout is not None else self.timeout, **kwargs
            )
        except httpx.TimeoutException as exc:
            raise ProbeConnectionError(endpoint, f"timed out after {timeout or self.timeout:g} s ({exc!r})") from exc
        except httpx.TransportError as exc:
            raise ProbeConnectionError(endpoint, f"cannot reach {self.base_url}: {exc!r}") from exc
        if response.status_code not in ok_statuses:
            error = ProbeUnavailableError if response.status_code == 503 else ProbeError
            raise error(endpoint, response.status_code, _reason_from(response))
        return response

    async def _post_json(self, endpoint: str, payload: Mapping[str, Any], **kwargs: Any) -> httpx.Response:
        return await self._request("POST", endpoint, json=dict(payload), **kwargs)

    @staticmethod
    def _json_result(response: httpx.Response, endpoint: str) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise ProbeError(endpoint, response.status_code, f"expected JSON, got {response.text[:200]!r}") from None
        if not isinstance(body, dict):
            raise ProbeError(endpoint, response.status_code, f"expected a JSON object, got {body!r:.200}")
        return body

    async def _command_result(self, endpoint: str, payload: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Run-something endpoints answer 500 with a status JSON when the command itself failed.

        OSWorld's server does that (e.g. a command that does not exist); such
        answers are results, not probe failures, so they are returned.
        """
        response = await self._post_json(endpoint, payload, timeout=timeout, ok_statuses=(200, 500))
        if response.status_code == 500:
            try:
                body = response.json()
            except ValueError:
                body = None
            if not (isinstance(body, dict) and "status" in body):
                raise ProbeError(endpoint, 500, _reason_from(response))
            return body
        return self._json_result(response, endpoint)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> EnvironmentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- observation ---------------------------------------------------------

    async def screenshot(self) -> bytes:
        """PNG bytes of the whole screen with the cursor drawn in."""
        response = await self._request("GET", "/screenshot")
        if not response.content.startswith(PNG_MAGIC):
            raise ProbeError("/screenshot", response.status_code, "the answer is not a PNG image")
        return response.content

    async def accessibility_tree(self) -> str | None:
        """The AT-SPI tree as XML, or None when the desktop has no accessibility bus."""
        body = self._json_result(await self._request("GET", "/accessibility", timeout=max(self.timeout, 60)), "/accessibility")
        return body.get("AT")

    async def terminal(self) -> str | None:
        """Text of the active terminal, or None when none is active (OSWorld reads gnome-terminal's through
        AT-SPI; our probe replays the active xterm's log, see environments/probe/terminal.py)."""
        body = self._json_result(await self._request("GET", "/terminal"), "/terminal")
        return body.get("output")

    async def screen_size(self) -> tuple[int, int]:
        body = self._json_result(await self._request("POST", "/screen_size"), "/screen_size")
        return int(body["width"]), int(body["height"])

    async def cursor_position(self) -> tuple[int, int]:
        """Cursor position in screen pixels."""
        response = await self._request("GET", "/cursor_position")
        x, y = response.json()
        return int(x), int(y)

    async def platform(self) -> str:
        return (await self._request("GET", "/platform")).text.strip()

    async def list_directory(self, path: str) -> dict[str, Any]:
        """OSWorld's ``directory_tree``: ``{type, name, children: [...]}``."""
        body = self._json_result(await self._post_json("/list_directory", {"path": path}), "/list_directory")
        return body["directory_tree"]

    # -- commands --------------------------------------------------------------

    async def execute(self, command: str | Sequence[str], shell: bool = False, timeout: float = 120) -> dict[str, Any]:
        """Run a command to completion: ``{status, output, error, returncode}``."""
        payload = {"command": command if isinstance(command, str) else list(command), "shell": shell, "timeout": timeout}
        return await self._command_result("/execute", payload, timeout + 15)

    async def devtools(self, request: Mapping[str, Any], timeout: float = 120) -> Any:
        """Ask the desktop's browser through its DevTools endpoint (:mod:`environments.devtools`); the decoded
        answer. A browser that does not answer is a :class:`ScaleCUAError` naming the fix."""
        from environments.devtools import PROGRAM

        result = await self.execute(["python3", "-c", PROGRAM, json.dumps(dict(request))], timeout=timeout)
        output = str(result.get("output") or "").strip()
        if result.get("returncode") not in (0, None) or not output:
            reason = str(result.get("error") or output).strip()[-400:]
            raise ScaleCUAError(f"devtools {request.get('action')!r} on the desktop failed: {reason}")
        return json.loads(output.splitlines()[-1])

    async def execute_with_verification(
        self,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        verification: Mapping[str, Any] | None = None,
        max_wait_time: float = 10,
        check_interval: float = 1,
    ) -> dict[str, Any]:
        """Run a command, then poll ``verification`` (``window_exists`` / ``command_success``)."""
        payload = {
            "command": command if isinstance(command, str) else list(command),
            "shell": shell,
            "verification": dict(verification or {}),
            "max_wait_time": max_wait_time,
            "check_interval": check_interval,
        }
        return await self._command_result("/setup/execute_with_verification", payload, 120 + max_wait_time + 15)

    async def run_python(self, code: str) -> dict[str, Any]:
        """Run a Python script (30 s limit): ``{status, message, output, error, return_code}``."""
        return await self._command_result("/run_python", {"code": code}, 60)

    async def run_bash_script(
        self, script: str, timeout: float = 30, working_dir: str | None = None
    ) -> dict[str, Any]:
        """Run a bash script (stderr merged into output): ``{status, output, error, returncode}``."""
        payload = {"script": script, "timeout": timeout, "working_dir": working_dir}
        return await self._command_result("/run_bash_script", payload, timeout + 15)

    # -- files -----------------------------------------------------------------

    async def get_file(self, path: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        response = await self._request("POST", "/file", data={"file_path": path}, ok_statuses=(200, 404))
        return None if response.status_code == 404 else response.content

    async def upload_file(self, path: str, data: bytes) -> None:
        name = path.replace("\\", "/").rsplit("/", 1)[-1] or "upload"
        await self._request(
            "POST", "/setup/upload", data={"file_path": path}, files={"file_data": (name, data)}, timeout=300
        )

    async def download_file(self, url: str, path: str) -> None:
        """Make the desktop fetch ``url`` (http(s) or file://) into ``path``."""
        await self._post_json("/setup/download_file", {"url": url, "path": path}, timeout=330)

    async def read_text(self, path: str) -> str:
        """ScienceBoard ``GET /read``: a UTF-8 text file's content."""
        return (await self._request("GET", "/read", params={"path": path})).text

    async def write_text(self, path: str, content: str) -> None:
        """ScienceBoard ``POST /write``: replace a text file's content."""
        await self._post_json("/write", {"path": path, "content": content})

    async def append_text(self, path: str, content: str) -> None:
        """ScienceBoard ``POST /append``."""
        await self._post_json("/append", {"path": path, "content": content})

    async def tex_check(self, path: str, file: str = "main", bibtex: bool = False, timeout: float = 330) -> dict[str, Any]:
        """ScienceBoard ``POST /tex/check``: does ``<path>/<file>.tex`` compile (pdflatex, + bibtex)? ``{pass, ...}``."""
        payload = {"path": path, "file": file, "bibtex": bibtex}
        return self._json_result(await self._post_json("/tex/check", payload, timeout=timeout), "/tex/check")

    async def lean_check(self, header: str, timeout: float = 930, **fields: Any) -> dict[str, Any]:
        """ScienceBoard ``POST /lean/check``: is the theorem ``header`` proved without ``sorry``? ``{pass, ...}``."""
        payload = {"header": header, **fields}
        return self._json_result(await self._post_json("/lean/check", payload, timeout=timeout), "/lean/check")

    # -- windows and applications ------------------------------------------------

    async def launch(self, command: str | Sequence[str], shell: bool = False) -> str:
        """Start a program without waiting for it."""
        payload = {"command": command if isinstance(command, str) else list(command), "shell": shell}
        return (await self._post_json("/setup/launch", payload)).text

    async def open_file(self, path: str, *, window_name: str | None = None, timeout_s: float = 60) -> str:
        """Open a file with its application and wait until its window shows."""
        payload: dict[str, Any] = {"path": path, "timeout_seconds": timeout_s}
        if window_name:
            payload["window_name"] = window_name
        return (await self._post_json("/setup/open_file", payload, timeout=timeout_s + 15)).text

    async def activate_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> str:
        payload = {"window_name": window_name, "strict": strict, "by_class": by_class}
        return (await self._post_json("/setup/activate_window", payload)).text

    async def close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> str:
        payload = {"window_name": window_name, "strict": strict, "by_class": by_class}
        return (await self._post_json("/setup/close_window", payload)).text

    # -- screen recordings -------------------------------------------------------

    async def start_recording(self) -> None:
        """Start recording the screen (OSWorld's ``/start_recording``; the desktop needs ffmpeg)."""
        await self._request("POST", "/start_recording", timeout=max(self.timeout, 30))

    async def end_recording(self) -> bytes:
        """Stop the recording and return it (MP4 bytes)."""
        return (await self._request("POST", "/end_recording", timeout=max(self.timeout, 60))).content

    # -- our additions ---------------------------------------------------------

    async def act(self, action: Action) -> dict[str, Any]:
        """Execute one action (grid coordinates) with real X input.

        Returns ``{status: "ok", output: str | None, cursor: [x, y]}`` where
        ``cursor`` is on the 1000x1000 grid. An action the probe cannot carry
        out raises :class:`ProbeError` with status 400 and the reason.
        """
        timeout = self.timeout + (action.duration or 0)
        body = self._json_result(
            await self._post_json("/action", {"action": action.model_dump(mode="json", exclude_none=True)}, timeout=timeout),
            "/action",
        )
        return body

    async def wait_ready(self, deadline_s: float = 60.0, interval_s: float = 0.1) -> None:
        """Poll ``GET /screenshot`` until the desktop answers (as OSWorld's providers do)."""
        deadline = time.monotonic() + deadline_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                await self.screenshot()
                return
            except ProbeError as exc:
                if exc.status_code in (401, 403):
                    raise  # a wrong token never becomes right by waiting
                last = exc
            await asyncio.sleep(interval_s)
        raise ProbeConnectionError("/screenshot", f"not ready within {deadline_s:g} s (last error: {last})")


#: actions after which nothing on screen changes: no settle time before the screenshot
PASSIVE_ACTIONS = frozenset({ActionType.SCREENSHOT, ActionType.CURSOR_POSITION, ActionType.WAIT})


async def act_and_observe(
    action: Action,
    run: Callable[[Action], Awaitable[Mapping[str, Any]]],
    observe: Callable[[], Awaitable[Observation]],
    *,
    settle_s: float,
    refused: tuple[type[Exception], ...] = (ProbeError,),
) -> Observation:
    """One environment step, the same on every desktop backend: ``run`` the action (a mapping with the optional
    ``output`` text and ``cursor`` position), wait ``settle_s`` unless the action changes nothing on screen, then
    ``observe``. A refused action (an exception in ``refused``; the probe's reason) is told to the agent as the
    observation's text and the episode goes on; an unreachable probe (:class:`ProbeConnectionError`) propagates so
    the rollout loop retries elsewhere. Terminal actions end without a screenshot."""
    info: dict[str, Any] = {"action": action.type.value}
    try:
        result = await run(action)
        text = result.get("output")
        if "cursor" in result:
            info["cursor"] = result["cursor"]
    except ProbeConnectionError:
        raise
    except refused as exc:
        reason = exc.reason if isinstance(exc, ProbeError) else str(exc)
        text = f"action failed: {reason}"
        info["action_error"] = reason
    if action.is_terminal:
        return Observation(text=text, info=info)
    if settle_s and action.type not in PASSIVE_ACTIONS:
        await asyncio.sleep(settle_s)
    observation = await observe()
    observation.text = text
    observation.info.update(info)
    return observation
