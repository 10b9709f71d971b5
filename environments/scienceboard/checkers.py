"""The checkers ScienceBoard's evaluators call inside the desktop, as probe endpoints.

* ``POST /tex/check {path, file="main", bibtex=false}`` -> ``{"pass": bool, "step", "returncode", "log"}``:
  ``pdflatex <file>.tex`` in ``path`` (and, with ``bibtex``, ``bibtex`` then
  ``pdflatex`` twice), as upstream's ``tex_check``. Unlike upstream, the
  build runs non-interactively with a time limit and writes its outputs to a
  scratch directory, so judging leaves the user's directory as it was.
* ``POST /lean/check {header, project="~/sci", file="Sci/Basic.lean"}`` ->
  ``{"pass": bool, ...}``: the file still holds the theorem line ``header``
  and ``lake build`` succeeds without "declaration uses 'sorry'" (upstream's
  ``lean_check``). Without a Lean toolchain it answers 501 with the reason.

Standard library only: the probe loads this module in minimal images.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from environments.probe.processes import run_command
from environments.probe.server import HTTPError, Request, Response, json_response

STEP_TIMEOUT_S = 120.0
LEAN_TIMEOUT_S = 900.0
LOG_TAIL_CHARS = 2000
SORRY_WARNING = "declaration uses 'sorry'"


def _tail(text: str) -> str:
    return text[-LOG_TAIL_CHARS:]


def _tex_env(state: Any, source_dir: str, out_dir: str) -> dict[str, str]:
    # sources first, then the build's own outputs (the .bbl), then (trailing ':') TeX's default path
    search = os.pathsep.join([source_dir, out_dir, ""])
    return {**state.env, "TEXINPUTS": search, "BIBINPUTS": search, "BSTINPUTS": search}


def tex_check(state: Any, req: Request) -> Response:
    data = req.json()
    source_dir = state.path(req.field(data, "path", str, "~"))
    name = req.field(data, "file", str, "main")
    bibtex = req.field(data, "bibtex", bool, False)
    if os.sep in name or not name:
        raise HTTPError(400, f"field 'file' must be a file name without directories, got {name!r}")
    if shutil.which("pdflatex", path=state.env.get("PATH")) is None:
        raise HTTPError(501, "pdflatex is not installed on this desktop (Debian package texlive-latex-base)")
    if not os.path.isfile(os.path.join(source_dir, f"{name}.tex")):
        return json_response({"pass": False, "step": "pdflatex", "returncode": None,
                              "log": f"no such file: {os.path.join(source_dir, name + '.tex')}"})
    with tempfile.TemporaryDirectory(prefix="tex-check-") as out_dir:
        if state.user is not None:  # pdflatex runs as the desktop's user and writes here
            os.chown(out_dir, state.user.uid, state.user.gid)
        env = _tex_env(state, source_dir, out_dir)
        latex = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
                 f"-output-directory={out_dir}", f"{name}.tex"]
        steps: list[tuple[str, list[str], str]] = [("pdflatex", latex, source_dir)]
        if bibtex:
            steps += [("bibtex", ["bibtex", name], out_dir), ("pdflatex", latex, source_dir),
                      ("pdflatex", latex, source_dir)]
        for step, argv, cwd in steps:
            result = run_command(argv, timeout=STEP_TIMEOUT_S, cwd=cwd, env=env, merge_stderr=True,
                                 as_user=state.as_user)
            if result.timed_out or result.returncode != 0:
                reason = f"timed out after {STEP_TIMEOUT_S:g} s" if result.timed_out else ""
                return json_response({"pass": False, "step": step, "returncode": result.returncode,
                                      "log": _tail(result.stdout + reason)})
    return json_response({"pass": True, "step": None, "returncode": 0, "log": ""})


def find_lake(env: dict[str, str], home: str) -> str | None:
    """``lake`` on PATH, else in elan's default place (``~/.elan/bin``), where upstream's VM has it."""
    found = shutil.which("lake", path=env.get("PATH"))
    if found:
        return found
    candidate = os.path.join(home, ".elan", "bin", "lake")
    return candidate if os.access(candidate, os.X_OK) else None


def lean_check(state: Any, req: Request) -> Response:
    data = req.json()
    header = req.field(data, "header", str)
    project = state.path(req.field(data, "project", str, "~/sci"))
    relative = req.field(data, "file", str, "Sci/Basic.lean")
    lake = find_lake(state.env, state.home)
    if lake is None:
        raise HTTPError(501, "no Lean toolchain on this desktop: 'lake' is neither on PATH nor in ~/.elan/bin. "
                             "Install elan and a Mathlib project (environments/scienceboard/README.md)")
    source = os.path.join(project, relative)
    try:
        with open(source, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except OSError as exc:
        return json_response({"pass": False, "reason": f"cannot read {source}: {exc.strerror}"})
    if header not in lines:
        return json_response({"pass": False, "reason": f"the theorem line is no longer in {source}"})
    env = {**state.env, "PATH": os.path.dirname(lake) + os.pathsep + state.env.get("PATH", "")}
    result = run_command([lake, "build"], timeout=LEAN_TIMEOUT_S, cwd=project, env=env, merge_stderr=True,
                         as_user=state.as_user)
    uses_sorry = SORRY_WARNING in result.stdout
    passed = not result.timed_out and result.returncode == 0 and not uses_sorry
    return json_response({"pass": passed, "returncode": result.returncode, "sorry": uses_sorry,
                          "timed_out": result.timed_out, "log": _tail(result.stdout)})


ROUTES = {
    ("POST", "/tex/check"): tex_check,
    ("POST", "/lean/check"): lean_check,
}
