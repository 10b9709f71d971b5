"""Runs OSWorld task setup (``config``) and ``evaluator.postconfig`` steps through the probe client.

Supported step types (those that make sense offline): ``download`` (http(s)
fetched by the desktop, or read from the context's download mirror, :mod:`environments.mirror`;
``file://`` URLs and plain paths read on this host and uploaded, so they work for remote
desktops too), ``upload_file``, ``open``, ``launch``, ``execute`` / ``command``, ``execute_with_verification``,
``sleep``, ``activate_window``, ``close_window``, and Chrome's ``chrome_open_tabs``,
``chrome_close_tabs``, ``update_browse_history``. Placeholders such as
``{SCREEN_WIDTH}`` are replaced in every string parameter.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal, Mapping, Sequence
from urllib.parse import unquote, urlsplit

import structlog

from core.errors import FilesMissing, ScaleCUAError
from core.types import SetupStep
from environments import mirror
from environments.client import EnvironmentClient, ProbeConnectionError, ProbeError

log = structlog.get_logger(__name__)

MAX_SLEEP_S = 120.0


class SetupError(ScaleCUAError):
    """A setup step failed; names the step, its type and why. Files the download mirror lacks make it a
    SetupError raised from a :class:`~core.errors.FilesMissing` (``FilesMissing.within(exc)`` finds it)."""

    def __init__(self, index: int, step_type: str, reason: str):
        self.index = index
        self.step_type = step_type
        self.reason = reason
        super().__init__(f"setup step {index} ({step_type}): {reason}")


@dataclass
class SetupContext:
    """What setup steps may refer to."""

    screen_size: tuple[int, int] = (1280, 800)
    #: relative local paths (``upload_file.local_path``, plain ``download`` urls) resolve here
    task_dir: Path | None = None
    #: programs ``launch`` may start (basenames); None allows any
    allowed_apps: Sequence[str] | None = None
    client_password: str = "password"
    #: the desktop user's home for ``{HOME}`` (``~`` when unknown: the probe expands it)
    home: str = "~"
    extra_placeholders: dict[str, str] = field(default_factory=dict)
    #: the evaluation's cache (postconfig only): ``command`` / ``execute`` steps with ``stdout`` / ``stderr``
    #: file names write the command's output there, where the ``cache_file`` getter reads it (as OSWorld)
    cache_dir: Path | None = None
    #: a command step that exits non-zero or times out: ``fail`` (a SetupError: the reset fails, the episode is
    #: retried and never scored) or ``warn`` (log and go on, as OSWorld's own harness; upstream-compatibility runs)
    command_failures: Literal["fail", "warn"] = "fail"
    #: a directory on this host serving http(s) ``download`` URLs instead of the network
    #: (:mod:`environments.mirror`; the backends' ``download_mirror`` option); a URL it lacks raises FilesMissing
    download_mirror: Path | None = None

    def mirrored(self, urls: Sequence[str]) -> list[Path | None]:
        """Each URL's file in the download mirror (None: no mirror, or not http(s)); one FilesMissing naming every
        http(s) URL the mirror lacks. ``download`` steps and the ``cloud_file`` getter read through it."""
        if self.download_mirror is None:
            return [None] * len(urls)
        remote = [url for url in urls if mirror.is_remote(url)]
        found = dict(zip(remote, mirror.mirror_files(self.download_mirror, remote)))
        return [found.get(url) for url in urls]

    def placeholders(self) -> dict[str, str]:
        width, height = self.screen_size
        return {
            "{CLIENT_PASSWORD}": self.client_password,
            "{SCREEN_WIDTH}": str(width),
            "{SCREEN_HEIGHT}": str(height),
            "{SCREEN_WIDTH_HALF}": str(width // 2),
            "{SCREEN_HEIGHT_HALF}": str(height // 2),
            "{HOME}": self.home,
            **{f"{{{k}}}": v for k, v in self.extra_placeholders.items()},
        }


@dataclass
class StepResult:
    index: int
    type: str
    detail: Any = None


def substitute(value: Any, placeholders: Mapping[str, str]) -> Any:
    """Replace known placeholders in every string inside ``value`` (other braces are left alone)."""
    if isinstance(value, str):
        for key, replacement in placeholders.items():
            value = value.replace(key, replacement)
        return value
    if isinstance(value, list):
        return [substitute(v, placeholders) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, placeholders) for k, v in value.items()}
    return value


StepHandler = Callable[[EnvironmentClient, dict[str, Any], SetupContext], Awaitable[Any]]


def _local_source(url: str, context: SetupContext) -> Path | None:
    """The host path behind a ``file://`` URL or a plain path; None for http(s)."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        return None
    if parts.scheme == "file":
        path = Path(unquote(parts.netloc + parts.path))
    elif parts.scheme == "":
        path = Path(url)
    else:
        raise ValueError(f"unsupported URL scheme {parts.scheme!r} in {url!r}: use http(s), file:// or a path")
    if not path.is_absolute():
        if context.task_dir is None:
            raise ValueError(f"relative path {url!r} needs a task directory to resolve against")
        root = Path(context.task_dir).resolve()
        path = (root / path).resolve()  # symlinks followed: what is read is what is checked
        if root not in path.parents:
            raise ValueError(f"relative path {url!r} escapes the task directory {root} (.. or a symlink out of it); "
                             "keep a task's assets inside its directory")
    if not path.is_file():
        raise ValueError(f"no such file on this host: {path}")
    return path


def _files(params: Mapping[str, Any], keys: tuple[str, str]) -> list[tuple[str, str]]:
    files = params.get("files")
    if not isinstance(files, list) or not files:
        raise ValueError(f"needs 'files': a list of {{{keys[0]!r}, {keys[1]!r}}} objects")
    out = []
    for item in files:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in keys):
            raise ValueError(f"each file needs string {keys[0]!r} and {keys[1]!r}, got {item!r}")
        out.append((item[keys[0]], item[keys[1]]))
    return out


async def _download(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    files = _files(params, ("url", "path"))
    mirrored = context.mirrored([url for url, _ in files])  # first: one error lists every file the mirror lacks
    for (url, path), source in zip(files, mirrored):
        source = source or _local_source(url, context)
        if source is None:
            await client.download_file(url, path)
        else:
            await client.upload_file(path, source.read_bytes())
    return len(params["files"])


async def _upload_file(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    for local_path, path in _files(params, ("local_path", "path")):
        source = _local_source(local_path, context)
        assert source is not None
        await client.upload_file(path, source.read_bytes())
    return len(params["files"])


async def _open(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    path = params.get("path")
    if not isinstance(path, str) or not path:
        raise ValueError("needs 'path'")
    timeout = float(params.get("timeout", params.get("timeout_seconds", 60)))
    return await client.open_file(path, window_name=params.get("window_name"), timeout_s=timeout)


def _command(params: Mapping[str, Any]) -> tuple[str | list[str], bool]:
    command = params.get("command")
    shell = bool(params.get("shell", False))
    if isinstance(command, str) and command.strip():
        return command, shell
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        return command, shell
    raise ValueError(f"needs 'command': a string or a list of strings, got {command!r}")


async def _launch(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    command, shell = _command(params)
    if context.allowed_apps is not None:
        argv = shlex.split(command) if isinstance(command, str) else command
        program = os.path.basename(argv[0]) if argv else ""
        if program not in context.allowed_apps:
            raise ValueError(f"program {program!r} is not allowed; allowed apps: {', '.join(context.allowed_apps)}")
    return await client.launch(command, shell=shell)


async def _execute(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    command, shell = _command(params)
    outputs = {key: _cache_target(context, params[key], key) for key in ("stdout", "stderr") if params.get(key)}
    result = await client.execute(command, shell=shell, timeout=float(params.get("timeout", 120)))
    for key, target in outputs.items():
        target.write_text(str(result.get("output" if key == "stdout" else "error") or ""), encoding="utf-8")
    if result.get("returncode") not in (0, None) or result.get("status") != "success":
        shown = command if isinstance(command, str) else shlex.join(command)
        stderr = str(result.get("error") or result.get("message") or "").strip()
        if params.get("check") or context.command_failures == "fail":
            raise ValueError(f"command {shown!r:.200} failed (returncode {result.get('returncode')}): "
                             f"{stderr[-400:] or 'no stderr'} (a task written for another desktop? the environment's "
                             "setup_failures: warn runs it anyway)")
        log.warning("setup command failed", command=shown[:200], returncode=result.get("returncode"),
                    error=stderr[-300:])
    return result


def _cache_target(context: SetupContext, name: Any, key: str) -> Path:
    if not isinstance(name, str) or not name:
        raise ValueError(f"'{key}' must be a file name, got {name!r}")
    if context.cache_dir is None:
        raise ValueError(f"'{key}': {name!r} goes to the evaluation's cache, which only postconfig steps have "
                         "(in a task's config, redirect in the command instead)")
    root = Path(context.cache_dir).resolve()
    target = (root / name).resolve()
    if root not in target.parents:
        raise ValueError(f"'{key}': {name!r} escapes the evaluation's cache directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


async def _execute_with_verification(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    command, shell = _command(params)
    result = await client.execute_with_verification(
        command, shell=shell, verification=params.get("verification") or {},
        max_wait_time=float(params.get("max_wait_time", 10)), check_interval=float(params.get("check_interval", 1)),
    )
    if result.get("status") != "success":
        raise ValueError(f"verification failed: {result.get('verification', result.get('status'))}")
    return result


async def _chrome_open_tabs(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    """OSWorld's ``chrome_open_tabs``: each of ``urls_to_open`` in a new tab of the running browser (the start
    page closed), through its DevTools endpoint from inside the desktop (:mod:`environments.devtools`)."""
    urls = params.get("urls_to_open")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u for u in urls):
        raise ValueError(f"needs 'urls_to_open': a non-empty list of URLs, got {urls!r}")
    return await client.devtools({"action": "open", "urls": urls, "wait_s": float(params.get("wait_s", 30))})


async def _chrome_close_tabs(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    """OSWorld's ``chrome_close_tabs``: for each of ``urls_to_close``, the first open tab (oldest first) whose URL
    matches it (:func:`environments.judges.browser.compare_urls`) is closed, at most one tab per URL; a URL without
    a tab is passed over. Tabs that were just opened may not show their URL yet: the tabs are read again for up to
    ``settle_s`` (5, as long as upstream waits first) until every URL has one."""
    from environments.judges.browser import compare_urls

    urls = params.get("urls_to_close")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u for u in urls):
        raise ValueError(f"needs 'urls_to_close': a non-empty list of URLs, got {urls!r}")
    request = {"action": "tabs", "wait_s": float(params.get("wait_s", 30))}
    deadline = asyncio.get_running_loop().time() + float(params.get("settle_s", 5))
    while True:
        tabs = list(reversed(await client.devtools(request)))  # Chrome lists the most recently active first
        chosen: list[dict[str, str]] = []
        for url in urls:
            match = next((t for t in tabs if t not in chosen and compare_urls(t["url"], url)), None)
            if match is not None:
                chosen.append(match)
        if len(chosen) == len(urls) or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.5)
    return await client.devtools({**request, "action": "close", "ids": [tab["id"] for tab in chosen]})


async def _update_browse_history(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    """OSWorld's ``update_browse_history``: the profile's ``History`` replaced by one that holds only ``history``
    (each ``{url, title, visit_time_from_now_in_seconds}`` visited once that long ago); see
    :func:`environments.judges.chrome_history.write_browse_history`. Run it while Chrome is closed, as tasks do."""
    from environments.judges.chrome_history import HISTORY, write_browse_history

    entries = params.get("history")
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("url"), str) and isinstance(e.get("title"), str)
            and isinstance(e.get("visit_time_from_now_in_seconds"), (int, float)) for e in entries):
        raise ValueError("needs 'history': a list of {'url', 'title', 'visit_time_from_now_in_seconds'} objects, "
                         f"got {str(entries)[:200]}")
    template = await client.get_file(HISTORY)
    data = await asyncio.to_thread(write_browse_history, template, entries, time.time())
    await client.upload_file(HISTORY, data)
    return len(entries)


async def _sleep(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    seconds = params.get("seconds", 1)
    if not isinstance(seconds, (int, float)) or not 0 <= seconds <= MAX_SLEEP_S:
        raise ValueError(f"'seconds' must be a number within 0..{MAX_SLEEP_S:g}, got {seconds!r}")
    await asyncio.sleep(seconds)
    return seconds


async def _window(client: EnvironmentClient, params: dict[str, Any], close: bool) -> Any:
    name = params.get("window_name")
    if not isinstance(name, str) or not name:
        raise ValueError("needs 'window_name'")
    call = client.close_window if close else client.activate_window
    try:
        return await call(name, strict=bool(params.get("strict", False)), by_class=bool(params.get("by_class", False)))
    except ProbeError as exc:
        if exc.status_code != 404:
            raise
        log.warning("setup window not found", window_name=name, close=close)  # OSWorld ignores this too
        return None


async def _activate_window(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    return await _window(client, params, close=False)


async def _close_window(client: EnvironmentClient, params: dict[str, Any], context: SetupContext) -> Any:
    return await _window(client, params, close=True)


STEP_HANDLERS: dict[str, StepHandler] = {
    "download": _download,
    "upload_file": _upload_file,
    "open": _open,
    "launch": _launch,
    "chrome_open_tabs": _chrome_open_tabs,
    "chrome_close_tabs": _chrome_close_tabs,
    "update_browse_history": _update_browse_history,
    "execute": _execute,
    "command": _execute,
    "execute_with_verification": _execute_with_verification,
    "sleep": _sleep,
    "activate_window": _activate_window,
    "close_window": _close_window,
}


def unsupported_step_types(task: Any) -> list[str]:
    """The step types of ``task``'s setup and postconfig that no handler here runs (each once)."""
    steps = [*task.config, *task.evaluator.postconfig]
    return list(dict.fromkeys(step.type for step in steps if step.type not in STEP_HANDLERS))


def check_steps(steps: Sequence[SetupStep | Mapping[str, Any]]) -> list[SetupStep]:
    """Validate step types up front (before anything runs); raises SetupError for the first unsupported one."""
    parsed = [s if isinstance(s, SetupStep) else SetupStep.model_validate(s) for s in steps]
    for index, step in enumerate(parsed):
        if step.type not in STEP_HANDLERS:
            raise SetupError(index, step.type, f"unsupported offline; supported: {', '.join(sorted(STEP_HANDLERS))}")
    return parsed


async def run_setup(
    client: EnvironmentClient, steps: Sequence[SetupStep | Mapping[str, Any]], context: SetupContext | None = None
) -> list[StepResult]:
    """Run ``steps`` in order. A probe that cannot be reached raises ProbeConnectionError (an environment failure);
    any other failure raises :class:`SetupError`."""
    context = context or SetupContext()
    placeholders = context.placeholders()
    results = []
    for index, step in enumerate(check_steps(steps)):
        params = substitute(step.parameters, placeholders)
        try:
            detail = await STEP_HANDLERS[step.type](client, params, context)
        except ProbeConnectionError:
            raise
        except ProbeError as exc:
            raise SetupError(index, step.type, f"the probe refused: {exc.reason}") from exc
        except (ValueError, OSError, FilesMissing) as exc:
            raise SetupError(index, step.type, str(exc)) from exc
        results.append(StepResult(index, step.type, detail))
    return results


async def run_postconfig_steps(env: Any, steps: Sequence[SetupStep | Mapping[str, Any]], *,
                               cache_dir: str | Path | None = None) -> list[StepResult]:
    """A task's ``evaluator.postconfig``: as setup, except that a command exiting non-zero is logged and judging
    goes on, as OSWorld's harness does. Postconfig commands read the final state, and one that finds nothing (a
    ``grep`` without a match, ``ls`` of a directory the agent never made) leaves the metric to score it 0; it is
    not a judge crash. A step with ``check: true`` still fails."""
    return await run_setup_steps(env, steps, cache_dir=cache_dir, command_failures="warn")


async def run_setup_steps(env: Any, steps: Sequence[SetupStep | Mapping[str, Any]], *,
                          cache_dir: str | Path | None = None,
                          command_failures: Literal["fail", "warn"] | None = None) -> list[StepResult]:
    """Run ``steps`` on an :class:`~core.interfaces.Environment` (its ``client``), e.g. a task's postconfig.

    The context comes from ``env.setup_context()`` when the environment offers
    one (local desktops do), else from its ``screen_size`` and ``home_dir``;
    ``cache_dir`` is the evaluation's cache (see :attr:`SetupContext.cache_dir`); ``command_failures``
    overrides the context's.
    """
    make_context = getattr(env, "setup_context", None)
    if callable(make_context):
        context = make_context()
    else:
        home = getattr(env, "home_dir", None)
        context = SetupContext(screen_size=tuple(env.screen_size), home=str(home) if home else "~")
    if cache_dir is not None:
        context = dataclasses.replace(context, cache_dir=Path(cache_dir))
    if command_failures is not None:
        context = dataclasses.replace(context, command_failures=command_failures)
    return await run_setup(env.client, steps, context)
