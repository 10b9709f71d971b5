"""Getters that ask an application's own REST server inside the desktop: ``async def getter(env, config)``.

* ChimeraX (stock): ``remotecontrol rest start json true port N`` serves ``GET /run?command=...`` and answers
  ``{"log messages": {"note": [...], ...}, "error": null | {...}, ...}``. ``info`` items run ``info <key>``
  there (``chimerax_info``). ``states`` items run ``states <dir> <stamp>``, the command of ScienceBoard's
  published *SessionStates* bundle (``ShiinaHiiragi/chimerax-states`` on GitHub; a user installs it once with
  ``devel install <unpacked bundle>`` or ``toolshed install``), which writes ``<dir>/<stamp>.json``: a flat
  ``{dotted attribute path: repr}`` map of the session (``chimerax_states``).
* Celestia, KAlgebra 3D, GRASS GUI: only ScienceBoard's instrumented builds serve their state
  (``POST /dump`` with a query list; ``POST /func/3d`` with points; ``GET /dump``). Where the stock application
  runs, the getter raises naming the build it needs, and the judge scores the item as crashed.

Everything runs inside the desktop (the servers listen on its loopback), through the probe, so the getters work
for local desktops and containers alike.
"""

from __future__ import annotations

import json
from typing import Any, Mapping
from urllib.parse import quote

from environments.scienceboard.initialize import desktop_http, desktop_script

CHIMERAX_STATES_HINT = ("install ScienceBoard's SessionStates bundle into ChimeraX (github.com/ShiinaHiiragi/"
                        "chimerax-states: download a release, then in ChimeraX 'devel install <unpacked dir>')")

#: dumps the session through the SessionStates bundle's ``states`` command and prints the JSON it wrote
_STATES = r"""
import json, sys, tempfile, time, urllib.parse, urllib.request
port = int(sys.argv[1])
folder = tempfile.mkdtemp(prefix="chimerax-states-")
stamp = str(int(time.time() * 1000))
url = f"http://127.0.0.1:{port}/run?command=" + urllib.parse.quote(f"states {folder} {stamp}")
try:
    answer = json.loads(urllib.request.urlopen(url, timeout=60).read().decode(errors="replace"))
except Exception as exc:
    print(json.dumps({"error": f"no ChimeraX REST server on port {port}: {type(exc).__name__}: {exc}"}))
    sys.exit()
if answer.get("error") is not None:
    print(json.dumps({"error": f"ChimeraX refused 'states': {answer['error']}"}))
    sys.exit()
try:
    print(json.dumps({"states": json.load(open(f"{folder}/{stamp}.json", encoding="utf-8"))}))
except OSError as exc:
    print(json.dumps({"error": f"'states' wrote no dump: {exc}"}))
"""


async def app_json(env: Any, method: str, port: int, path: str, body: Any = None, *, needs: str) -> Any:
    """The JSON an application's server at ``127.0.0.1:<port><path>`` answers; ``needs`` says what serves it."""
    status, text = await desktop_http(env.client, method, f"http://127.0.0.1:{port}{path}", body)
    if status != 200:
        raise RuntimeError(f"no answer from {method} 127.0.0.1:{port}{path} ({status}: {text[:160]}): {needs}")
    try:
        return json.loads(text)
    except ValueError:
        raise RuntimeError(f"{method} 127.0.0.1:{port}{path} answered non-JSON {text[:160]!r}: {needs}") from None


def info_lines(answer: Mapping[str, Any]) -> list[str]:
    """ChimeraX's notes as upstream reads them: every note split into lines, stripped, empty ones dropped."""
    notes = (answer.get("log messages") or {}).get("note") or []
    return [line for note in notes for line in str(note).strip().split("\n") if line != ""]


async def get_chimerax_info(env: Any, config: Mapping[str, Any]) -> list[str] | None:
    """``info <key>`` on ChimeraX's REST server: the lines it logged; None when ChimeraX refused the command."""
    port, key = int(config.get("port", 8000)), str(config["key"])
    answer = await app_json(env, "GET", port, f"/run?command={quote('info ' + key)}",
                            needs="ChimeraX started with 'remotecontrol rest start json true port N'")
    if answer.get("error") is not None:
        return None
    return info_lines(answer)


async def get_chimerax_states(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The session's flat state map, dumped by the SessionStates bundle's ``states`` command."""
    port = int(config.get("port", 8000))
    answer = await desktop_script(env.client, _STATES, str(port), timeout=90,
                                  what=f"the ChimeraX state dump ('states' items need {CHIMERAX_STATES_HINT})")
    return answer["states"]


async def get_celestia_dump(env: Any, config: Mapping[str, Any]) -> Any:
    """``POST /dump`` with the task's ``query`` (bodies to report) to ScienceBoard's instrumented Celestia."""
    return await app_json(env, "POST", int(config.get("port", 8000)), "/dump", list(config.get("query", [])),
                          needs="Celestia's state server exists only in ScienceBoard's instrumented Celestia build "
                                "(/app/bin/celestia-qt6 of their VM image); stock Celestia can serve answer tasks only")


async def get_kalgebra_functions_3d(env: Any, config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """3D plots ``[{"points": {"(x, y, z)": on the surface?}}]`` from ScienceBoard's instrumented KAlgebra
    (``POST /func/3d``); stock KAlgebra shows 3D plots in an OpenGL view that nothing outside can read."""
    answer = await app_json(env, "POST", int(config.get("port", 8000)), "/func/3d",
                            [list(p) for p in config.get("points", [])],
                            needs="3D plots are read from ScienceBoard's instrumented KAlgebra (/app/bin/kalgebra "
                                  "of their VM image)")
    functions = [answer] if isinstance(answer, dict) else list(answer)
    return [{"points": dict(function)} for function in functions]


async def get_grass_gui_dump(env: Any, config: Mapping[str, Any]) -> Any:
    """``info`` (GrassGIS): the GUI state dump of ScienceBoard's instrumented GRASS GUI (``GET /dump``)."""
    return await app_json(env, "GET", int(config.get("port", 8000)), "/dump",
                          needs="'info' items read the state server of ScienceBoard's instrumented GRASS GUI, which "
                                "stock GRASS does not have; use 'db' items (GRASS modules) instead")
