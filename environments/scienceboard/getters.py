"""Getters of ScienceBoard's evaluate items: ``async def getter(env, config) -> Any``.

``env`` is the evaluation view of the environment (``env.client`` speaks the
probe protocol). Everything runs through the probe, inside the desktop, so
the getters work for local desktops and containers alike.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import structlog

from core.types import Action
from environments.scienceboard import kalgebra
from environments.scienceboard.initialize import desktop_script

log = structlog.get_logger(__name__)

CALGEBRA_TIMEOUT_S = 60
GRASS_TIMEOUT_S = 120
A11Y_HINT = ("start the desktops with accessibility on (scienceboard option desktop.options.accessibility: true) "
             "and KAlgebra with QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1")


async def get_scienceboard_last_action(env: Any, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The action that ended the episode (``{type, text}``), recorded by the ``scienceboard`` backend."""
    try:
        action = env.last_action
    except AttributeError:
        raise RuntimeError("the 'stop' check needs the scienceboard environment backend, which records the "
                           "episode's last action") from None
    if action is None:
        return None
    if isinstance(action, Action):
        return {"type": action.type.value, "text": action.text}
    return {"type": str(action), "text": None}


async def get_scienceboard_tex_check(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /tex/check``: whether ``<path>/<file>.tex`` compiles (with bibtex when the task wrote a .bib)."""
    return await env.client.tex_check(str(config["path"]), str(config.get("file", "main")),
                                      bool(config.get("bibtex", False)))


async def get_scienceboard_lean_check(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /lean/check``: the theorem ``header`` is proved (lake build, no sorry)."""
    fields = {k: config[k] for k in ("project", "file") if k in config}
    return await env.client.lean_check(str(config["header"]), **fields)


# -- KAlgebra ----------------------------------------------------------------------------


async def _tree(env: Any) -> str:
    tree = await env.client.accessibility_tree()
    if not tree:
        raise RuntimeError(f"KAlgebra's state is read over AT-SPI, but the desktop has no accessibility tree: "
                           f"{A11Y_HINT}")
    return tree


async def calgebra(env: Any, expressions: list[str]) -> list[str | None]:
    """Evaluate ``expressions`` with ``calgebra --calculate`` inside the desktop (one process for all)."""
    if not expressions:
        return []
    script = 'printf "%s" "$1" | calgebra --calculate'
    result = await env.client.execute(["bash", "-c", script, "calgebra", kalgebra.calgebra_script(expressions)],
                                      timeout=CALGEBRA_TIMEOUT_S)
    if result.get("returncode") != 0:
        raise RuntimeError(f"calgebra failed on the desktop (is kalgebra installed?): {result.get('error')!s:.300}")
    return kalgebra.parse_calgebra(result.get("error") or "", len(expressions))


async def get_kalgebra_variables(env: Any, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{variables: {name: shown value}, numbers: {name: float|None}}`` for the ``numeric`` names; None when
    KAlgebra is not running."""
    variables = kalgebra.variables_from_tree(await _tree(env))
    if variables is None:
        return None
    wanted = [str(n) for n in config.get("numeric", []) if n in variables]
    numbers: dict[str, float | None] = {}
    symbolic = []
    for name in wanted:
        try:
            numbers[name] = float(variables[name])
        except ValueError:
            symbolic.append(name)  # e.g. "root(2, 2)": let Analitza compute it
    for name, value in zip(symbolic, await calgebra(env, [variables[n] for n in symbolic])):
        numbers[name] = kalgebra.as_number(value)
    return {"variables": variables, "numbers": numbers}


async def get_kalgebra_functions(env: Any, config: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The 2D plots ``[{name, expression, points: {"(x, y)": on the curve?}}]`` (ScienceBoard's ``/func/2d``)."""
    functions = kalgebra.functions_from_tree(await _tree(env))
    if functions is None:
        return None
    points = [list(p) for p in config.get("points", [])]
    probes: list[tuple[int, str, str, float]] = []  # (function index, point key, expression, target)
    for index, function in enumerate(functions):
        function["points"] = {}
        for point in points:
            key = kalgebra.point_key(point)
            probe = kalgebra.point_probe(function["expression"], point)
            if probe is None:
                function["points"][key] = False
            else:
                probes.append((index, key, *probe))
    values = await calgebra(env, [p[2] for p in probes])
    for (index, key, _, target), value in zip(probes, values):
        functions[index]["points"][key] = kalgebra.on_curve(value, target)
    return functions


# -- GRASS GIS ----------------------------------------------------------------------------

#: runs one GRASS module in the GRASS session of this desktop (its GISRC: location, mapset), or in the last
#: session's (~/.grass8/rc), without the `grass` launcher and its mapset lock; prints the outcome as JSON
_GRASS_RUNNER = r"""
import glob, json, os, subprocess, sys, tempfile
spec = json.loads(sys.argv[1])
home = os.path.expanduser("~")
gisrc = None
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        pairs = [p.split(b"=", 1) for p in open(path, "rb").read().split(b"\0") if b"=" in p]
    except OSError:
        continue
    env = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}
    if env.get("HOME") == home and os.path.isfile(env.get("GISRC", "")):
        gisrc = env["GISRC"]
gisrc = gisrc or os.path.join(home, ".grass8", "rc")
if not os.path.isfile(gisrc):
    print(json.dumps({"error": "no GRASS session on this desktop (no running GRASS and no ~/.grass8/rc)"}))
    sys.exit(0)
keep = [l for l in open(gisrc) if l.split(":")[0] in ("GISDBASE", "LOCATION_NAME", "MAPSET")]
handle = tempfile.NamedTemporaryFile("w", suffix=".gisrc", delete=False)
handle.writelines(keep)
handle.close()
base = subprocess.run(["grass", "--config", "path"], capture_output=True, text=True).stdout.strip()
env = dict(os.environ, GISRC=handle.name, GISBASE=base, GRASS_PYTHON="/usr/bin/python3", LC_ALL="C",
           PATH=":".join([base + "/bin", base + "/scripts", "/usr/bin", "/bin", os.environ.get("PATH", "")]),
           PYTHONPATH=base + "/etc/python", LD_LIBRARY_PATH=base + "/lib")
try:
    run = subprocess.run(spec["argv"], env=env, capture_output=True, text=True, timeout=spec["timeout"])
    print(json.dumps({"stdout": run.stdout, "stderr": run.stderr, "returncode": run.returncode, "gisrc": gisrc}))
except (OSError, subprocess.TimeoutExpired) as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
finally:
    os.unlink(handle.name)
"""


def grass_argv(cmd: str, kwargs: Mapping[str, Any]) -> list[str]:
    """``("r.univar", {"map": "dem", "flags": "g"})`` -> ``["r.univar", "-g", "map=dem"]`` (grass.script style)."""
    argv = [cmd]
    for key, value in kwargs.items():
        if key == "flags":
            argv.append(f"-{value}")
        elif value is True:
            argv.append(f"--{key}")
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            argv.append(f"{key}={','.join(str(v) for v in value)}")
        else:
            argv.append(f"{key}={value}")
    return argv


async def get_grass_command(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """``db``: run GRASS module ``cmd`` with ``kwargs`` in the desktop's GRASS session; ``{stdout, stderr,
    returncode}``."""
    spec = {"argv": grass_argv(str(config["cmd"]), config.get("kwargs") or {}), "timeout": GRASS_TIMEOUT_S}
    outcome = await desktop_script(env.client, _GRASS_RUNNER, json.dumps(spec), timeout=GRASS_TIMEOUT_S + 10,
                                   what=f"grass_command {spec['argv']}")
    if outcome["returncode"] != 0:
        log.info("GRASS module failed", argv=spec["argv"], stderr=outcome["stderr"][-300:])
    return outcome
