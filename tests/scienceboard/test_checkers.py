"""The probe's ``/tex/check`` (real pdflatex and bibtex) and ``/lean/check`` on a real desktop session.

Debian packages no Lean 4 toolchain, so the Lean test puts a stand-in ``lake`` where elan installs it
(``~/.elan/bin/lake``): a shell script that behaves like ``lake build`` on the outcomes the checker
reads (exit status, the "declaration uses 'sorry'" warning). Without it the endpoint must say why.
"""

from __future__ import annotations

import os
import stat

import pytest

from environments.client import ProbeError
from tests.environments.desktop_fixtures import start_session, stop_session

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A real desktop session whose probe serves the checkers as an extension (``--probe-routes``)."""
    session = start_session(tmp_path_factory.mktemp("desktop"),
                            extra_args=("--probe-routes", "environments.scienceboard.checkers"))
    try:
        yield session
    finally:
        stop_session(session)


GOOD = "\\documentclass{article}\n\\begin{document}\nHello \\textbf{world}.\n\\end{document}\n"
BROKEN = "\\documentclass{article}\n\\begin{document}\n\\begin{itemize}\n\\item one\n\\end{document}\n"
CITING = ("\\documentclass{article}\n\\begin{document}\nSee \\cite{knuth}.\n\\bibliographystyle{plain}\n"
          "\\bibliography{refs}\n\\end{document}\n")
CITING_NO_BIB = "\\documentclass{article}\n\\begin{document}\nSee \\cite{knuth}.\n\\end{document}\n"
REFS = "@book{knuth, author = {Donald Knuth}, title = {The TeXbook}, publisher = {AW}, year = {1984}}\n"


def write(home, relative: str, text: str) -> None:
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_tex_check_compiles_without_leaving_files_behind(desktop) -> None:
    write(desktop.home, "doc/main.tex", GOOD)
    result = desktop.run(lambda c: c.tex_check("~/doc", "main"))
    assert result["pass"] is True
    assert sorted(os.listdir(desktop.home / "doc")) == ["main.tex"]  # build outputs went to a scratch directory


def test_tex_check_reports_the_failing_step_and_the_log(desktop) -> None:
    write(desktop.home, "broken/main.tex", BROKEN)
    result = desktop.run(lambda c: c.tex_check("~/broken", "main"))
    assert result["pass"] is False and result["step"] == "pdflatex" and result["returncode"] != 0
    assert "itemize" in result["log"]
    missing = desktop.run(lambda c: c.tex_check("~/nowhere", "main"))
    assert missing["pass"] is False and "no such file" in missing["log"]


def test_tex_check_runs_bibtex_when_asked(desktop) -> None:
    write(desktop.home, "bib/main.tex", CITING)
    write(desktop.home, "bib/refs.bib", REFS)
    write(desktop.home, "nobib/main.tex", CITING_NO_BIB)
    write(desktop.home, "nobib/refs.bib", REFS)
    assert desktop.run(lambda c: c.tex_check("~/bib", "main", bibtex=True))["pass"] is True
    without = desktop.run(lambda c: c.tex_check("~/nobib", "main", bibtex=True))
    assert without["pass"] is False and without["step"] == "bibtex"
    assert desktop.run(lambda c: c.tex_check("~/nobib", "main", bibtex=False))["pass"] is True


def test_tex_check_refuses_paths_in_the_file_name(desktop) -> None:
    with pytest.raises(ProbeError) as info:
        desktop.run(lambda c: c.tex_check("~", "../etc/passwd"))
    assert info.value.status_code == 400 and "without directories" in info.value.reason


LAKE = """#!/bin/sh
# stand-in for `lake build` (see the module docstring)
echo "Build started in $(pwd)"
if grep -q sorry Sci/Basic.lean; then echo "warning: ./Sci/Basic.lean:3:8: declaration uses 'sorry'"; fi
if grep -q 'rfl_wrong' Sci/Basic.lean; then echo "error: type mismatch"; exit 1; fi
echo "Build completed successfully."
"""
THEOREM = "theorem add_comm' (a b : Nat) : a + b = b + a := by"


def test_lean_check_without_a_toolchain_says_what_is_missing(desktop) -> None:
    with pytest.raises(ProbeError) as info:
        desktop.run(lambda c: c.lean_check(THEOREM))
    assert info.value.status_code == 501 and "no Lean toolchain" in info.value.reason


@pytest.mark.parametrize(("proof", "passed"), [
    ("  sorry\n", False),                         # the task's initial state
    ("  exact Nat.add_comm a b\n", True),
    ("  exact rfl_wrong\n", False),               # does not build
])
def test_lean_check_with_a_lake_build(desktop, proof: str, passed: bool) -> None:
    lake = desktop.home / ".elan" / "bin" / "lake"
    lake.parent.mkdir(parents=True, exist_ok=True)
    lake.write_text(LAKE)
    lake.chmod(lake.stat().st_mode | stat.S_IEXEC)
    try:
        write(desktop.home, "sci/Sci/Basic.lean", f"import Mathlib\n\n{THEOREM}\n{proof}")
        result = desktop.run(lambda c: c.lean_check(THEOREM))
        assert result["pass"] is passed, result
        assert result["sorry"] is ("sorry" in proof)
        edited = desktop.run(lambda c: c.lean_check(THEOREM.replace("b + a", "a + b")))
        assert edited["pass"] is False and "no longer" in edited["reason"]  # the statement was changed
    finally:
        lake.unlink()
