"""ScienceBoard items judged through the applications' own servers: ChimeraX (stock REST server + the
SessionStates bundle), Celestia and KAlgebra 3D (ScienceBoard's instrumented builds).

Neither ChimeraX nor Celestia is packaged for this machine, and the instrumented builds exist only in
ScienceBoard's VM image, so the desktop-side getters are tested against real loopback HTTP servers that speak
the same protocols (ChimeraX's ``/run?command=`` JSON answers, with ``states <dir> <stamp>`` writing the dump
file as the bundle does; Celestia's ``POST /dump``; KAlgebra's ``POST /func/3d``), reached from inside a real
local desktop through the probe. The metrics are checked against cases derived by hand from upstream's
``sci/ChimeraX/task.py`` and ``sci/Celestia/task.py`` (ScienceBoard is not an installable package).
"""

from __future__ import annotations

import asyncio
import datetime
import http.server
import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.types import Action, ActionType, JudgementStatus
from environments.scienceboard import metrics
from environments.scienceboard.convert import convert_task
from environments.scienceboard.lambdas import UnsafeLambda, compile_lambda
from tests.environments.desktops import closed_port, serving

STATES = {
    "_state_containers.models._models.(1,)._name": "2olx",
    "_state_containers.models._models.(1,)._ladder_params.stubs_only": "False",
    "_state_containers.models._models.(2,)._name": "hydrogen bonds",
    "_state_containers.models._models.(2,)._pbond_drawing._opaque_color_count": "12",
    "_state_containers.tools.log.page_source": "<p>termini: <br>61 hydrogens added</p>",
    "_state_containers.models._models.(1,)._positions": [1.5, 2.0],
}
SELECTION = ["atom id /A:9@N1 idatm_type N3+\natom id /A:9@C2 idatm_type C3", ""]


def test_chimerax_states_follows_upstreams_lookup_rules() -> None:
    """Each branch of upstream's ``_eval_states``: plain key, key lambda, find + key lambda, null value, pattern."""
    def score(**options: Any) -> float:
        return metrics.chimerax_states(STATES, **options)

    assert score(key="_state_containers.models._models.(1,)._name", value="2olx") == 1.0
    assert score(key="_state_containers.models._models.(1,)._name", value="2OLX") == 0.0
    assert score(key="_state_containers.models._models.(9,)._name", value="2olx") == 0.0  # no entry: 0, no raise
    assert score(key="_state_containers.models._models.(9,)._name", value=None, absent=True) == 1.0
    assert score(key="_state_containers.models._models.(1,)._name", value=None, absent=True) == 0.0
    assert score(key="lambda key: key.startswith('_state_containers.models._models.(1,)._ring')", value=None,
                 absent=True) == 1.0
    assert score(key="lambda key: key.endswith('stubs_only')", value="False") == 1.0
    by_name = "lambda key, value: key.endswith('._name') and value == 'hydrogen bonds'"
    sibling = "lambda key: '.'.join(key.split('.')[:-1] + ['_pbond_drawing', '_opaque_color_count'])"
    assert score(find=by_name, key=sibling, value="12") == 1.0
    assert score(find=by_name, key=sibling, value="13") == 0.0
    assert score(find=by_name, key=sibling, value=None, absent=True) == 0.0  # upstream fails this branch
    log = "lambda key, value: key.endswith('page_source')"
    assert score(find=log, key="lambda key: key", pattern="61 hydrogens added") == 1.0
    assert score(find=log, key="lambda key: key", pattern="62 hydrogens") == 0.0
    assert score(key="_state_containers.models._models.(1,)._positions", pattern=r"^\[1\.5, 2\.0\]$") == 1.0
    assert metrics.chimerax_states(None, key="x", value="y") == 0.0


def test_chimerax_info_compares_logged_lines_as_a_set_and_file_items_call_their_lambda() -> None:
    lines = ["atom id /A:9@C2 idatm_type C3", "atom id /A:9@N1 idatm_type N3+"]
    assert metrics.chimerax_info(list(reversed(lines)), value=lines) == 1.0
    assert metrics.chimerax_info(lines[:1], value=lines) == 0.0
    assert metrics.chimerax_info(None, value=lines) == 0.0
    today = datetime.date.today().strftime("%Y-%m-%d")
    dated = "lambda: __import__('datetime').datetime.today().strftime('%Y-%m-%d')"
    assert metrics.scienceboard_contains(f"started {today}\n", value=dated) == 1.0
    assert metrics.scienceboard_contains("started 1999-01-01\n", value=dated) == 0.0
    assert metrics.scienceboard_contains("ATOM     14  CA  ASN A", value="ATOM     14  CA  ASN A") == 1.0
    assert metrics.scienceboard_contains(None, value="x") == 0.0


def test_celestia_lambdas_with_assignment_expressions_and_math_run_safely() -> None:
    """Upstream's Celestia B-12 key: the Sun-Earth-Moon angle's cosine through walrus bindings and math.sqrt."""
    key = ("lambda dump: (s := dump['entity']['Sol']['position'], e := dump['entity']['Earth']['position'], "
           "m := dump['entity']['Moon']['position'], mv := [m[i] - e[i] for i in range(3)], "
           "sv := [s[i] - e[i] for i in range(3)], dp := mv[0] * sv[0] + mv[1] * sv[1] + mv[2] * sv[2], "
           "_mv := __import__('math').sqrt(mv[0]**2 + mv[1]**2 + mv[2]**2), "
           "_sv := __import__('math').sqrt(sv[0]**2 + sv[1]**2 + sv[2]**2), dp / (_mv * _sv))[-1]")
    dump = {"entity": {"Sol": {"position": [10, 0, 0]}, "Earth": {"position": [0, 0, 0]},
                       "Moon": {"position": [1, 1, 0]}}}
    assert compile_lambda(key)(dump) == pytest.approx(1 / math.sqrt(2))
    assert metrics.scienceboard_predicate(dump, key=key, value=0.7071,
                                          pred="lambda key, value: abs(key - value) < 0.001") == 1.0
    for unsafe in ("lambda: __import__('os').system('true')", "lambda: __import__('math', None)",
                   "lambda: __import__('math').__loader__", "lambda n: __import__(n)", "lambda: [__import__][0]('os')"):
        with pytest.raises(UnsafeLambda):
            compile_lambda(unsafe)()


class AppServers(http.server.BaseHTTPRequestHandler):
    """ChimeraX's REST protocol (``remotecontrol rest start json true``; ``states`` as the SessionStates bundle
    writes it), Celestia's instrumented ``/dump`` and KAlgebra's instrumented ``/func/3d``, on one port."""

    requests: list[tuple[str, Any]] = []

    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        command = parse_qs(url.query).get("command", [""])[0]
        self.requests.append(("GET", command))
        notes: list[str] = []
        error = None
        if command == "info sel":
            notes = SELECTION
        elif command in ("alphafold match A8Z1J3", "color bypolymer", "rainbow"):
            notes = [f"ran {command}"]
        elif command.startswith("states "):
            _, folder, stamp = command.split()
            Path(folder, f"{stamp}.json").write_text(json.dumps(STATES))
        else:
            error = {"type": "UserError", "message": f"Unknown command: {command}"}
        self._answer({"python values": [], "json values": [], "error": error,
                      "log messages": {"traceback": [], "error": [], "warning": [], "info": [], "note": notes}})

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers["Content-Length"])).decode()
        if self.path == "/add/3d":  # upstream posts the expression as plain text, answered "OK"
            self.requests.append((self.path, raw))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")
            return
        body = json.loads(raw or "null")
        self.requests.append((self.path, body))
        if self.path == "/dump":
            names = [q["name"] for q in body]
            self._answer({"time": {"scale": 100.0}, "entity": {n: {"hidden": n == "Mercury"} for n in names}})
        elif self.path == "/func/3d":
            self._answer([{str(tuple(p)): abs(p[0] ** 2 + p[1] ** 2 - p[2] ** 2 - 1) < 1e-9 for p in body}])
        else:
            self.send_error(404)


def _sb(app: str, evaluate: list[dict[str, Any]], initialize: list[dict[str, Any]] | None = None,
        **extra: Any) -> dict[str, Any]:
    return {"type": app, "sort": "VM", "steps": 5, "instruction": f"test {app}", "initialize": initialize or [],
            "evaluate": evaluate, **extra}


@pytest.mark.desktop
def test_items_are_judged_through_the_apps_servers_from_inside_a_desktop(tmp_path: Path) -> None:
    plugins = load_plugins(environ={})
    judge = JudgeServices.of(plugins)
    AppServers.requests = []
    with serving(AppServers) as url:
        port = int(url.rsplit(":", 1)[1])
        backend = plugins.registry("environment").create(
            "scienceboard", {"max_environments": 1, "init_retries": 0, "app_port": port,
                             "desktop": {"name": "local-desktop", "options": {"work_dir": str(tmp_path / "envs"), "desktop_user": None,
                                                                              "settle_s": 0.1}}})
        chimerax = backend.convert_task(_sb("ChimeraX", initialize=[
            {"func": "alphafold_match", "name": "A8Z1J3"}, {"func": "color", "style": "bypolymer"},
            {"func": "color", "style": "rainbow"}], evaluate=[
            {"type": "info", "key": "sel", "value": ["atom id /A:9@C2 idatm_type C3", "atom id /A:9@N1 idatm_type N3+"]},
            {"type": "states", "key": "_state_containers.models._models.(1,)._name", "value": "2olx"},
            {"type": "states", "find": "lambda key, value: key.endswith('page_source')", "key": "lambda key: key",
             "pattern": "61 hydrogens added"},
        ]))
        wrong_state = backend.convert_task(_sb("ChimeraX", [
            {"type": "states", "key": "_state_containers.models._models.(1,)._name", "value": "1dns"}]))
        celestia = backend.convert_task(_sb("Celestia", [
            {"type": "info", "key": "lambda dump: dump['entity']['Mercury']['hidden']", "value": True},
            {"type": "info", "key": "lambda dump: dump['time']['scale']", "value": 100,
             "pred": "lambda key, value: abs(key - value) < 0.1"}], query=[{"name": "Mercury", "type": 2}]))
        surface = backend.convert_task(_sb("KAlgebra", initialize=[{"func": "func_3d", "expr": "x^2+y^2-z^2=1"}],
                                           evaluate=[
            {"type": "eqn", "key": [[5.13, -1, 5.13], [2, 2, 2]], "value": {"(5.13, -1, 5.13)": True,
                                                                          "(2, 2, 2)": True}}]))
        on_surface = backend.convert_task(_sb("KAlgebra", [
            {"type": "eqn", "key": [[5.13, -1, 5.13]], "value": {"(5.13, -1, 5.13)": True}}]))

        async def main() -> list[Any]:
            env = await backend.acquire()
            try:
                verdicts = []
                for task in (chimerax, wrong_state, celestia, surface, on_surface):
                    await env.reset(task)
                    verdicts.append(await backend.evaluate(env, task, judge=judge,
                                                           last_action=Action(type=ActionType.DONE)))
                # Celestia is not running (nothing on its port): the item crashes, naming the build it needs
                stopped = convert_task(_sb("Celestia", celestia.metadata["scienceboard"]["evaluate"],
                                           query=[{"name": "Mercury", "type": 2}]), port=closed_port())
                await env.reset(stopped)
                verdicts.append(await backend.evaluate(env, stopped, judge=judge, last_action=None))
                return verdicts
            finally:
                await backend.release(env)
                await backend.close()

        both, wrong, sky, plot, plot_on, stopped = asyncio.run(main())
    assert (both.status, both.score) == (JudgementStatus.OK, 1.0), both
    assert (wrong.status, wrong.score) == (JudgementStatus.OK, 0.0), wrong
    assert (sky.status, sky.score) == (JudgementStatus.OK, 1.0), sky
    assert (plot.status, plot.score) == (JudgementStatus.OK, 0.0), plot  # (2, 2, 2) is not on the hyperboloid
    assert (plot_on.status, plot_on.score) == (JudgementStatus.OK, 1.0), plot_on
    assert stopped.status == JudgementStatus.CRASHED and "instrumented Celestia" in (stopped.error or "")
    assert AppServers.requests[:3] == [("GET", "alphafold match A8Z1J3"), ("GET", "color bypolymer"), ("GET", "rainbow")]
    assert ("/add/3d", "x^2+y^2-z^2=1") in AppServers.requests
    assert ("GET", "info sel") in AppServers.requests
    assert ("/dump", [{"name": "Mercury", "type": 2}]) in AppServers.requests
    assert ("/func/3d", [[5.13, -1, 5.13], [2, 2, 2]]) in AppServers.requests
