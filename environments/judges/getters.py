"""OSWorld getters: ``async def getter(env, config) -> Any``, registered without the ``get_`` prefix.

``env`` is what :func:`environments.judges.evaluate.evaluate` hands over: the
live environment (its ``client`` speaks the probe / OSWorld server protocol)
plus ``cache_dir``, a fresh directory for this one evaluation where file
getters put what they fetch. As upstream, ``vm_file`` and ``gimp_config_file``
answer None for a file the desktop does not give (the metric then receives
None), and ``accessibility_tree`` None when the desktop refuses it; most other getters
whose file is missing raise :class:`FileNotFoundError`, which the evaluation
scores 0 (as OSWorld does; upstream's ``cache_file`` and ``vlc_config`` raise
other errors there). tests/judges/test_conformance_getters.py compares them with upstream's.

File getters (``vm_file``, ``cloud_file``) read OSWorld's config: ``path`` and
``dest`` name one file; with ``multi`` (any true value) they are lists, fetched
in order, and ``gives`` (default ``[0]``) picks the indices returned: one
index gives that file's local path, any other number a list (so ``multi``
without ``gives`` returns the first file only).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import urllib.parse
from pathlib import Path
from typing import Any, Mapping, Sequence

import httpx
import structlog

from core.errors import EnvironmentFailure, ScaleCUAError

log = structlog.get_logger(__name__)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _paths_and_dests(config: Mapping[str, Any], getter: str) -> tuple[list[str], list[str], set[int]]:
    """OSWorld's file-getter selection (see the module docstring): paths, cache names, the indices given back."""
    if "path" not in config:
        raise ValueError(f"{getter} getter config {dict(config)!r} needs 'path' (and usually 'dest')")
    multi = bool(config.get("multi", False))
    if isinstance(config["path"], (list, tuple)) != multi:
        raise ValueError(f"{getter} getter config {dict(config)!r}: 'path' is a list exactly when 'multi' is true "
                         "(then 'dest' is a list too and 'gives' the indices to return, default [0])")
    paths = [str(p) for p in _as_list(config["path"])]
    dests = [str(d) for d in _as_list(config.get("dest") or [os.path.basename(p.rstrip("/")) or "file" for p in paths])]
    if len(paths) != len(dests):
        raise ValueError(f"{getter} getter config: {len(paths)} path(s) but {len(dests)} dest(s)")
    return paths, dests, set(_as_list(config.get("gives", [0])))


def _cache_path(env: Any, dest: str) -> Path:
    cache_dir = Path(getattr(env, "cache_dir", None) or ".")
    target = (cache_dir / dest).resolve()
    if cache_dir.resolve() not in target.parents:
        raise ValueError(f"getter dest {dest!r} escapes the evaluation cache directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _given(local: list[Any], gives: set[int]) -> Any:
    chosen = [item for i, item in enumerate(local) if i in gives]
    return chosen[0] if len(chosen) == 1 else chosen


def _time_suffixed(dest: str, time_format: str) -> str:
    stem, extension = os.path.splitext(dest)
    return f"{stem}_{dt.datetime.now().strftime(time_format)}{extension}"


async def fetch_desktop_file(env: Any, path: str, dest: str) -> str | None:
    """``path`` from the desktop into the cache as ``dest``; None (logged) when the desktop does not give it: no
    such file, or the probe refuses it (a directory, unreadable, too large), as OSWorld's controller answers None
    for any failed request. An unreachable or broken desktop is an :class:`EnvironmentFailure` (raised: the
    episode is retried, not scored)."""
    target = _cache_path(env, dest)
    try:
        data = await env.client.get_file(path)
    except EnvironmentFailure:
        raise
    except ScaleCUAError as exc:  # the probe's refusal (environments.client.ProbeError; judges never import it)
        log.warning("the desktop does not give the file", path=path, error=str(exc))
        return None
    if data is None:
        log.warning("no such file on the desktop", path=path)
        return None
    try:
        target.write_bytes(data)
    except OSError as exc:
        log.error("the fetched file cannot be written", path=str(target), error=str(exc))
        return None
    return str(target)


async def require_desktop_file(env: Any, path: str, dest: str, getter: str) -> str:
    """:func:`fetch_desktop_file` for getters that cannot go on without the file (upstream crashes there):
    :class:`FileNotFoundError` when the desktop does not give it, which the evaluation scores 0."""
    local = await fetch_desktop_file(env, path, dest)
    if local is None:
        raise FileNotFoundError(f"{getter}: the desktop does not give {path} (missing or unreadable)")
    return local


async def get_vm_file(env: Any, config: Mapping[str, Any]) -> Any:
    """Download ``path`` (or, with ``multi``, each of a list) from the desktop into the cache; the local path of
    each index in ``gives``, None for a file the desktop does not give (see the module docstring).

    ``time_suffix`` (one file only, as upstream): the cache name gets ``_<now in time_format>`` (default
    ``%Y%m%d_%H%M%S``) before its extension."""
    paths, dests, gives = _paths_and_dests(config, "vm_file")
    if config.get("time_suffix", False) and not config.get("multi", False):
        dests = [_time_suffixed(d, str(config.get("time_format", "%Y%m%d_%H%M%S"))) for d in dests]
    local = [await fetch_desktop_file(env, path, dest) for path, dest in zip(paths, dests)]
    return _given(local, gives)


async def get_cache_file(env: Any, config: Mapping[str, Any]) -> str:
    """A file that this evaluation's postconfig wrote into the cache (``command`` with ``stdout: NAME``): its path
    in the cache, as upstream joins it (anything that exists there, as upstream asserts)."""
    if not isinstance(config.get("path"), str) or not config["path"]:
        raise ValueError(f"cache_file getter config {dict(config)!r} needs 'path' (a file name in the cache)")
    cache_dir = str(getattr(env, "cache_dir", None) or ".")
    target = os.path.join(cache_dir, config["path"])
    if Path(cache_dir).resolve() not in Path(target).resolve().parents:
        raise ValueError(f"cache_file: {config['path']!r} escapes the evaluation cache directory")
    if not os.path.exists(target):
        raise FileNotFoundError(f"cache_file: {config['path']} is not in the evaluation's cache (a postconfig "
                                "'command' step with stdout: NAME writes it)")
    return target


async def get_cloud_file(env: Any, config: Mapping[str, Any]) -> Any:
    """Fetch a reference file (``http(s)://``, ``file://`` or a path on this host) into the cache.

    OSWorld downloads gold files from the cloud; bundled tasks ship theirs
    beside the task file (``assets/gold.xlsx``: a relative path resolves
    against the task file's directory, as setup steps do), so nothing here
    needs the network. An environment with a download mirror
    (``env.setup_context().download_mirror``, :mod:`environments.mirror`) serves
    http(s) files from it instead; one it lacks raises
    :class:`core.errors.FilesMissing` (the judgement then records the URLs).
    """
    paths, dests, gives = _paths_and_dests(config, "cloud_file")
    task = getattr(env, "task", None)
    base = getattr(task, "source_dir", None) or (task.metadata.get("task_dir") if task is not None else None)
    local: list[str] = []
    for url, dest, mirrored in zip(paths, dests, _mirrored(env, paths)):
        target = _cache_path(env, dest)
        if mirrored is not None:
            target.write_bytes(await asyncio.to_thread(mirrored.read_bytes))
        else:
            target.write_bytes(await _fetch(url, Path(base) if base else None))
        local.append(str(target))
    return _given(local, gives)


def download_mirror(env: Any) -> str | None:
    """The environment's download mirror directory (an offline run), or None."""
    make = getattr(env, "setup_context", None)
    mirror = getattr(make(), "download_mirror", None) if callable(make) else None
    return str(mirror) if mirror else None


def _mirrored(env: Any, urls: list[str]) -> list[Path | None]:
    """Each URL's file in the environment's download mirror (None: fetch it), through its setup context's
    ``mirrored`` (environments without a setup context have no mirror)."""
    make = getattr(env, "setup_context", None)
    mirrored = getattr(make(), "mirrored", None) if callable(make) else None
    return mirrored(urls) if callable(mirrored) else [None] * len(urls)


async def _fetch(url: str, base: Path | None = None) -> bytes:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("http", "https"):
        async with httpx.AsyncClient(timeout=120, follow_redirects=True) as client:
            response = await client.get(url)
        if response.status_code == 404:
            raise FileNotFoundError(f"cloud_file: {url} answered 404")
        response.raise_for_status()
        return response.content
    if parsed.scheme in ("", "file"):
        path = Path(urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else url)
        if not path.is_absolute():
            if base is None:
                raise ValueError(f"cloud_file: relative path {url!r} needs the task's directory (load the task "
                                 f"from its file, or use an absolute path or URL)")
            path = base / path
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise FileNotFoundError(f"cloud_file: {path} does not exist") from None
    raise ValueError(f"cloud_file: unsupported URL scheme {parsed.scheme!r} in {url!r}; use file://, http:// or https://")


async def get_vm_command_line(env: Any, config: Mapping[str, Any]) -> str | None:
    """Run ``command`` on the desktop; its standard output whatever its exit code, None when it could not run
    (OSWorld's server answers 500 with ``status: error`` then, and upstream gives None for any answer but 200)."""
    result = await env.client.execute(config["command"], shell=bool(config.get("shell", False)))
    if result.get("status", "success") != "success":
        log.info("vm_command_line failed", command=config["command"], error=result.get("error") or result.get("message"))
        return None
    return result.get("output")


async def get_vm_command_error(env: Any, config: Mapping[str, Any]) -> str | None:
    """Run ``command`` on the desktop; its standard error."""
    result = await env.client.execute(config["command"], shell=bool(config.get("shell", False)))
    return result.get("error")


async def get_rule(env: Any, config: Mapping[str, Any]) -> Any:
    """The literal ``rules`` of the config (OSWorld's way to pass expected values to a metric)."""
    if "rules" not in config:
        raise ValueError(f"rule getter config {dict(config)!r} needs 'rules'")
    return config["rules"]


async def get_accessibility_tree(env: Any, config: Mapping[str, Any]) -> str | None:
    """The desktop's AT-SPI tree as XML; None when the desktop has no accessibility bus or refuses the request
    (upstream's controller answers None for any failed request). An unreachable desktop is an
    :class:`EnvironmentFailure`."""
    try:
        return await env.client.accessibility_tree()
    except EnvironmentFailure:
        raise
    except ScaleCUAError as exc:  # the probe's refusal (environments.client.ProbeError; judges never import it)
        log.warning("the desktop gives no accessibility tree", error=str(exc))
        return None


async def get_list_directory(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """OSWorld's directory tree ``{type, name, children}`` of ``path``."""
    return await env.client.list_directory(config["path"])


async def get_vm_screen_size(env: Any, config: Mapping[str, Any]) -> dict[str, int]:
    width, height = await env.client.screen_size()
    return {"width": width, "height": height}


async def get_vm_file_text(env: Any, config: Mapping[str, Any]) -> str:
    """A text file's content on the desktop (``encoding`` default utf-8)."""
    data = await env.client.get_file(config["path"])
    if data is None:
        raise FileNotFoundError(f"vm_file_text: {config['path']} does not exist on the desktop")
    return data.decode(config.get("encoding", "utf-8"), errors="replace")


async def get_vm_files_exist(env: Any, config: Mapping[str, Any]) -> dict[str, bool]:
    """``{path: exists}`` for each of ``paths`` (for file-management tasks), keyed as the config wrote them."""
    import json

    script = "import json, os, sys; print(json.dumps([os.path.exists(os.path.expanduser(p)) for p in sys.argv[1:]]))"
    paths: Sequence[str] = [str(p) for p in _as_list(config["paths"])]
    result = await env.client.execute(["python3", "-c", script, *paths])
    try:
        flags = json.loads(result.get("output") or "")
    except ValueError:
        raise RuntimeError(f"vm_files_exist: the desktop answered {result!r}") from None
    return dict(zip(paths, (bool(f) for f in flags)))


async def get_gimp_config_file(env: Any, config: Mapping[str, Any]) -> str | None:
    """GIMP 2.10's configuration file ``file_name`` (e.g. ``gimprc``) from the desktop's home into the cache as
    ``dest``; None when the desktop does not give it (GIMP writes it on exit), as upstream."""
    name = config.get("file_name")
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"gimp_config_file getter config {dict(config)!r} needs 'file_name' (e.g. 'gimprc')")
    path = f"~/.config/GIMP/2.10/{name}"
    data = await env.client.get_file(path)
    if not data:
        log.warning("no GIMP config file on the desktop", path=path)
        return None
    target = _cache_path(env, str(config.get("dest") or name))
    target.write_bytes(data)
    return str(target)


async def get_vlc_config(env: Any, config: Mapping[str, Any]) -> str:
    """VLC's configuration file ``~/.config/vlc/vlcrc`` into the cache (as ``dest``); a missing one raises
    :class:`FileNotFoundError` (upstream crashes writing None)."""
    data = await env.client.get_file("~/.config/vlc/vlcrc")
    if data is None:
        raise FileNotFoundError("vlc_config: ~/.config/vlc/vlcrc does not exist on the desktop (VLC writes it on exit)")
    target = _cache_path(env, str(config.get("dest") or "vlcrc"))
    target.write_bytes(data)
    return str(target)


async def get_vscode_config(env: Any, config: Mapping[str, Any]) -> Any:
    """OSWorld's VS Code getter: open the command palette (ctrl+shift+p), type ``vscode_extension_command``,
    press Enter, wait a second, then fetch ``path`` as ``vm_file`` does (into ``dest``; None when the desktop does
    not give it)."""
    from core.types import Action, ActionType

    command = config.get("vscode_extension_command")
    if not isinstance(command, str) or not command:
        raise ValueError(f"vscode_config getter config {dict(config)!r} needs 'vscode_extension_command'")
    for action in (Action(type=ActionType.KEY, keys=["ctrl", "shift", "p"]), Action(type=ActionType.TYPE, text=command),
                   Action(type=ActionType.KEY, keys=["Return"])):
        await env.client.act(action)
    await asyncio.sleep(1.0)
    return await get_vm_file(env, {"path": config["path"], "dest": config["dest"]})


#: registry name -> function (OSWorld's ``get_<name>``)
GETTERS = {
    name[len("get_"):]: obj for name, obj in dict(globals()).items() if name.startswith("get_") and callable(obj)
}
