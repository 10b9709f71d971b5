"""Runs a ScienceBoard task's ``initialize`` list through the probe.

Generic functions (upstream's ``sci/vm/vtask.py`` and ``sci/base/init.py``):
``launch`` / ``execute`` (``command``, ``shell``), ``touch`` (``text`` into
``path``), ``download`` (``url`` to ``path``; relative urls are the task's own
files), ``opt`` (accessibility depth: nothing to do here) and ``sleep``. Every
item may carry ``wait``: seconds to pause after it. Our one addition: a
``launch`` may name a ``window`` (a title substring) to wait for, instead of
guessing a pause.

Application functions, by task ``type``:

* KAlgebra ``tab`` (``index`` 0-3: Calculator, 2D Graph, 3D Graph, Dictionary)
  and ``func_2d`` (``expr``): keyboard input into stock KAlgebra.
* Lean ``import``, ``open``, ``def``, ``query``: write the theorem file
  ``~/sci/Sci/Basic.lean`` as upstream.
* ``chimerax_*`` / ChimeraX ``open``, ``turn``, ``clear_log``: ChimeraX
  commands over its own REST server (``remotecontrol rest start port P``).
* GrassGIS ``cmd``, ``map``, ``layer``, ``scale``: the REST server of
  ScienceBoard's instrumented GRASS GUI (stock GRASS has none: clear error).

Anything else is a :class:`~environments.setup.SetupError` naming the function.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

import structlog

from core.types import Action, ActionType
from environments.client import EnvironmentClient, ProbeConnectionError, ProbeError
from environments.setup import SetupContext, SetupError, run_setup, substitute

log = structlog.get_logger(__name__)

WINDOW_TIMEOUT_S = 90.0
MAX_WAIT_S = 120.0
LEAN_FILE = "~/sci/Sci/Basic.lean"
#: KAlgebra's tab mnemonics (Alt+letter), by upstream's tab index
KALGEBRA_TABS = ("c", "2", "3", "i")


@dataclass
class InitState:
    """What one initialize run accumulates (upstream keeps the Lean buffer on the task object)."""

    client: EnvironmentClient
    context: SetupContext
    port: int
    lean_lines: list[str] = field(default_factory=list)


Handler = Callable[[InitState, dict[str, Any]], Awaitable[Any]]


async def _standard(state: InitState, step_type: str, parameters: dict[str, Any]) -> Any:
    """One OSWorld setup step through :mod:`environments.setup` (placeholders already substituted)."""
    results = await run_setup(state.client, [{"type": step_type, "parameters": parameters}], state.context)
    return results[0].detail


#: ids of visible windows whose title (``_NET_WM_NAME`` or ``WM_NAME``) contains $1, case-insensitive. xdotool's
#: own ``--name`` reads only WM_NAME, which some Qt 5 applications (KAlgebra) leave empty.
_FIND_WINDOWS = r"""
for w in $(xdotool search --onlyvisible --class . 2>/dev/null); do
  name=$(xdotool getwindowname "$w" 2>/dev/null) || continue
  case "${name,,}" in *"${1,,}"*) echo "$w";; esac
done
"""


async def find_windows(client: EnvironmentClient, title: str) -> list[str]:
    found = await client.execute(["bash", "-c", _FIND_WINDOWS, "find-windows", title], timeout=20)
    return (found.get("output") or "").split()


async def wait_for_window(client: EnvironmentClient, title: str, timeout_s: float = WINDOW_TIMEOUT_S) -> str:
    """The id of the first visible window titled like ``title``, once one shows."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        windows = await find_windows(client, title)
        if windows:
            return windows[0]
        await asyncio.sleep(0.3)
    raise ValueError(f"no window titled like {title!r} appeared within {timeout_s:g} s")


async def activate_window(client: EnvironmentClient, title: str) -> None:
    windows = await find_windows(client, title)
    if not windows:
        raise ValueError(f"no window titled like {title!r} is open")
    result = await client.execute(["xdotool", "windowactivate", "--sync", windows[0]], timeout=15)
    if result.get("returncode") != 0:
        raise ValueError(f"cannot activate the {title!r} window: {result.get('error')!s:.200}")


async def _launch(state: InitState, item: dict[str, Any]) -> Any:
    await _standard(state, "launch", {"command": item.get("command"), "shell": bool(item.get("shell", False))})
    if item.get("window"):
        await wait_for_window(state.client, str(item["window"]), float(item.get("window_timeout", WINDOW_TIMEOUT_S)))


async def _execute(state: InitState, item: dict[str, Any]) -> Any:
    return await _standard(state, "execute", {"command": item.get("command"), "shell": bool(item.get("shell", False)),
                                              "check": bool(item.get("check", False))})


async def _touch(state: InitState, item: dict[str, Any]) -> Any:
    if not isinstance(item.get("path"), str) or not isinstance(item.get("text", ""), str):
        raise ValueError("touch needs 'path' and 'text' strings")
    await state.client.write_text(item["path"], item.get("text", ""))


async def _download(state: InitState, item: dict[str, Any]) -> Any:
    return await _standard(state, "download", {"files": [{"url": item.get("url"), "path": item.get("path")}]})


async def _nothing(state: InitState, item: dict[str, Any]) -> Any:
    return None


async def _sleep(state: InitState, item: dict[str, Any]) -> Any:
    return await _standard(state, "sleep", {"seconds": item.get("seconds", 1)})


# -- KAlgebra -------------------------------------------------------------------------------


async def _keys(state: InitState, *chords: str) -> None:
    for chord in chords:
        await state.client.act(Action(type=ActionType.KEY, keys=chord.split("+")))


async def _kalgebra_focus(state: InitState) -> None:
    await activate_window(state.client, "KAlgebra")


async def _kalgebra_tab(state: InitState, item: dict[str, Any]) -> Any:
    index = item.get("index")
    if not isinstance(index, int) or not 0 <= index < len(KALGEBRA_TABS):
        raise ValueError(f"tab needs 'index' 0-3 (Calculator, 2D Graph, 3D Graph, Dictionary), got {index!r}")
    await _kalgebra_focus(state)
    await _keys(state, f"alt+{KALGEBRA_TABS[index]}")


async def _kalgebra_func_2d(state: InitState, item: dict[str, Any]) -> Any:
    expr = item.get("expr")
    if not isinstance(expr, str) or not expr:
        raise ValueError("func_2d needs 'expr'")
    await _kalgebra_focus(state)
    await _keys(state, "alt+2", "alt+a")  # the 2D Graph tab, then its "Add" page
    await asyncio.sleep(0.3)
    await state.client.act(Action(type=ActionType.TYPE, text=expr))
    await _keys(state, "Return")


# -- Lean -------------------------------------------------------------------------------------


def _blank(state: InitState) -> None:
    if not state.lean_lines or state.lean_lines[-1] != "":
        state.lean_lines.append("")


async def _lean_import(state: InitState, item: dict[str, Any]) -> Any:
    libs = [lib for lib in item.get("libs", []) if lib != "Mathlib"]  # upstream's project imports Mathlib already
    if libs:
        _blank(state)
        state.lean_lines.append(f"import {' '.join(libs)}")


async def _lean_open(state: InitState, item: dict[str, Any]) -> Any:
    _blank(state)
    state.lean_lines.append(f"open {' '.join(item.get('libs', []))}")
    _blank(state)


async def _lean_def(state: InitState, item: dict[str, Any]) -> Any:
    state.lean_lines.append(str(item.get("expr", "")))


async def _lean_query(state: InitState, item: dict[str, Any]) -> Any:
    _blank(state)
    state.lean_lines.append(str(item.get("expr", "")) + "\n  sorry\n")
    await state.client.append_text(LEAN_FILE, "\n".join(state.lean_lines))


# -- REST servers inside the desktop (ChimeraX's own; ScienceBoard's instrumented GRASS GUI) --------------------

_HTTP = r"""
import json, sys, urllib.request
method, url, body = sys.argv[1], sys.argv[2], sys.argv[3]
data = body.encode() if method == "POST" else None
request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=60) as answer:
        print(json.dumps({"status": answer.status, "body": answer.read().decode(errors="replace")}))
except Exception as exc:
    print(json.dumps({"status": None, "body": f"{type(exc).__name__}: {exc}"}))
"""


async def desktop_script(client: EnvironmentClient, script: str, *args: str, timeout: float,
                         what: str) -> dict[str, Any]:
    """Run ``python3 -c script args...`` inside the desktop; its stdout is one JSON object. A non-JSON answer, or
    an object with an ``error``, raises RuntimeError starting with ``what``."""
    result = await client.execute(["python3", "-c", script, *args], timeout=timeout)
    try:
        answer = json.loads(result.get("output") or "")
    except ValueError:
        raise RuntimeError(f"{what}: the desktop answered {result!r:.400}") from None
    if "error" in answer:
        raise RuntimeError(f"{what}: {answer['error']}")
    return answer


async def desktop_http(client: EnvironmentClient, method: str, url: str, body: Any = None, *,
                       text: bool = False) -> tuple[int | None, str]:
    """An HTTP request made from inside the desktop (the apps' REST servers listen on its loopback); a POST's
    ``body`` goes as JSON, or as it is with ``text``."""
    result = await client.execute(["python3", "-c", _HTTP, method, url, body if text else json.dumps(body)],
                                  timeout=90)
    try:
        answer = json.loads(result.get("output") or "")
    except ValueError:
        raise ValueError(f"HTTP {method} {url} from the desktop failed: {result.get('error')!s:.300}") from None
    return answer["status"], answer["body"]


async def _chimerax(state: InitState, command: str) -> Any:
    from urllib.parse import quote

    status, body = await desktop_http(state.client, "GET", f"http://127.0.0.1:{state.port}/run?command={quote(command)}")
    if status != 200:
        raise ValueError(f"ChimeraX's REST server (remotecontrol rest, port {state.port}) did not run {command!r}: "
                         f"{body[:200]}")
    return body


async def _chimerax_open(state: InitState, item: dict[str, Any]) -> Any:
    return await _chimerax(state, f"open {item.get('name')}")


async def _chimerax_turn(state: InitState, item: dict[str, Any]) -> Any:
    return await _chimerax(state, f"turn {item.get('axis')} {item.get('angle')}")


async def _chimerax_clear_log(state: InitState, item: dict[str, Any]) -> Any:
    return await _chimerax(state, "log clear")


async def _chimerax_alphafold_match(state: InitState, item: dict[str, Any]) -> Any:
    return await _chimerax(state, f"alphafold match {item.get('name')}")


async def _chimerax_color(state: InitState, item: dict[str, Any]) -> Any:
    style = str(item.get("style"))
    return await _chimerax(state, "rainbow" if style == "rainbow" else f"color {style}")


async def _kalgebra_func_3d(state: InitState, item: dict[str, Any]) -> Any:
    """Plot ``expr`` in 3D through ScienceBoard's instrumented KAlgebra (``POST /add/3d``), as upstream does: its
    3D items are judged by the same build, so a task that plots in 3D needs it from the start."""
    expr = item.get("expr")
    if not isinstance(expr, str) or not expr:
        raise ValueError("func_3d needs 'expr'")
    url = f"http://127.0.0.1:{state.port}/add/3d"
    status, text = await desktop_http(state.client, "POST", url, expr, text=True)
    if status != 200 or text.strip() != "OK":
        raise ValueError(f"KAlgebra's state server at {url} did not answer OK ({status}: {text[:160]}); stock "
                         "KAlgebra has none: 3D tasks need ScienceBoard's instrumented KAlgebra")
    return text


def _grass_gui(method: str, path: str, body: Callable[[dict[str, Any]], Any] | None = None) -> Handler:
    async def handler(state: InitState, item: dict[str, Any]) -> Any:
        url = f"http://127.0.0.1:{state.port}{path}"
        status, text = await desktop_http(state.client, method, url, body(item) if body else None)
        if status != 200 or text.strip() != "OK":
            raise ValueError(f"the GRASS GUI state server at {url} did not answer OK ({status}: {text[:160]}); "
                             "stock GRASS has none: this needs ScienceBoard's instrumented GRASS GUI")
        return text

    return handler


GENERIC: dict[str, Handler] = {
    "launch": _launch, "execute": _execute, "touch": _touch, "download": _download, "opt": _nothing,
    "sleep": _sleep, "chimerax_open": _chimerax_open, "chimerax_turn": _chimerax_turn,
    "chimerax_clear_log": _chimerax_clear_log,
}
BY_APP: dict[str, dict[str, Handler]] = {
    "KAlgebra": {"tab": _kalgebra_tab, "func_2d": _kalgebra_func_2d, "func_3d": _kalgebra_func_3d},
    "Lean": {"import": _lean_import, "open": _lean_open, "def": _lean_def, "query": _lean_query},
    "ChimeraX": {"open": _chimerax_open, "turn": _chimerax_turn, "clear_log": _chimerax_clear_log,
                 "alphafold_match": _chimerax_alphafold_match, "color": _chimerax_color},
    "GrassGIS": {
        "cmd": _grass_gui("GET", "/init/cmd"),
        "map": _grass_gui("POST", "/init/map", lambda i: {k: i.get(k) for k in ("grassdb", "location", "mapset")}),
        "layer": _grass_gui("POST", "/init/layer", lambda i: {"query": i.get("query")}),
        "scale": _grass_gui("POST", "/init/scale", lambda i: {"scale": i.get("scale")}),
    },
}


def handler_for(task_type: str, func: str) -> Handler | None:
    return BY_APP.get(task_type, {}).get(func) or GENERIC.get(func)


def check_items(task_type: str, items: Sequence[Mapping[str, Any]]) -> None:
    """Every function is known before anything runs; else a SetupError naming the first unknown one."""
    for index, item in enumerate(items):
        func = str(item.get("func"))
        if handler_for(task_type, func) is None:
            known = sorted(set(GENERIC) | set(BY_APP.get(task_type, {})))
            raise SetupError(index, func, f"unknown initialize function for a {task_type} task; known: {', '.join(known)}")


async def run_initialize(client: EnvironmentClient, task_type: str, items: Sequence[Mapping[str, Any]],
                         context: SetupContext, *, port: int = 8000) -> None:
    """Run ``items`` in order; a failing one raises SetupError (ProbeConnectionError when the desktop is gone)."""
    check_items(task_type, items)
    state = InitState(client, context, port)
    placeholders = context.placeholders()
    for index, raw in enumerate(items):
        item = substitute(dict(raw), placeholders)
        func = str(item.pop("func"))
        wait = item.pop("wait", 0) or 0
        if not isinstance(wait, (int, float)) or not 0 <= wait <= MAX_WAIT_S:
            raise SetupError(index, func, f"'wait' must be a number of seconds within 0..{MAX_WAIT_S:g}")
        handler = handler_for(task_type, func)
        assert handler is not None
        try:
            await handler(state, item)
        except ProbeConnectionError:
            raise
        except SetupError as exc:
            raise SetupError(index, func, exc.reason) from exc
        except ProbeError as exc:
            raise SetupError(index, func, f"the probe refused: {exc.reason}") from exc
        except (ValueError, OSError, KeyError, TypeError) as exc:
            raise SetupError(index, func, str(exc)) from exc
        if wait:
            await asyncio.sleep(wait)
