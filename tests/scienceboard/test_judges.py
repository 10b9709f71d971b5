"""ScienceBoard's metrics, its judge lambdas, KAlgebra's widget parsing and real calgebra evaluation."""

from __future__ import annotations

import math
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from environments.scienceboard import kalgebra, metrics
from environments.scienceboard.getters import grass_argv
from environments.scienceboard.lambdas import SAFE_BUILTINS, UnsafeLambda, _internal_import, compile_lambda


# -- metrics --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("result", "options", "score"), [
    ({"type": "done", "text": None}, {"value": "DONE"}, 1.0),
    ({"type": "answer", "text": "x"}, {"value": "DONE"}, 0.0),
    ({"type": "fail", "text": None}, {"value": "FAIL"}, 1.0),
    ({"type": "done", "text": None}, {"value": "FAIL"}, 0.0),
    ({"type": "answer", "text": " 479001600 "}, {"value": "ANS", "args": ["479001600"]}, 1.0),
    ({"type": "answer", "text": "Donald Knuth"}, {"value": "ANS", "args": ["Donald", "Knuth"]}, 1.0),
    ({"type": "answer", "text": "479001600.0"}, {"value": "ANS", "args": ["479001600"]}, 0.0),
    ({"type": "done", "text": None}, {"value": "ANS", "args": ["1"]}, 0.0),
    (None, {"value": "DONE"}, 0.0),
])
def test_stop(result, options, score) -> None:
    assert metrics.scienceboard_stop(result, **options) == score


def test_regex_passed_and_kalgebra_values() -> None:
    assert metrics.scienceboard_regex("a\\usepackage{amsmath}b", {"pattern": r"\\usepackage\{amsmath\}"}) == 1.0
    assert metrics.scienceboard_regex("nothing", {"pattern": "x"}) == 0.0
    assert metrics.scienceboard_regex(None, {"pattern": "x"}) == 0.0
    assert metrics.scienceboard_passed({"pass": True}) == 1.0
    assert metrics.scienceboard_passed({"pass": "yes"}) == 0.0
    state = {"variables": {"k": "1024", "f": "x->x^2+1"}, "numbers": {"k": 1024.0000001, "r": None}}
    assert metrics.kalgebra_val(state, key="k", value=1024) == 1.0
    assert metrics.kalgebra_val(state, key="k", value=1025) == 0.0
    assert metrics.kalgebra_val(state, key="r", value=1) == 0.0
    assert metrics.kalgebra_var(state, key="f", value="x->x^2+1") == 1.0
    assert metrics.kalgebra_var(state, key="f", value="x->x^2") == 0.0
    assert metrics.kalgebra_var(state, key="g", value="#UNDEF") == 1.0
    assert metrics.kalgebra_var(state, key="k", value="#UNDEF") == 0.0
    assert metrics.kalgebra_var(None, key="g", value="#UNDEF") == 0.0  # KAlgebra not running: nothing is known


def test_eqn_needs_one_plot_matching_every_point() -> None:
    plots = [{"points": {"(0, 0)": True, "(1, 1)": False}}, {"points": {"(0, 0)": False, "(1, 1)": True}}]
    assert metrics.kalgebra_eqn(plots, value={"(0, 0)": True, "(1, 1)": False}) == 1.0
    assert metrics.kalgebra_eqn(plots, value={"(0, 0)": True, "(1, 1)": True}) == 0.0
    assert metrics.kalgebra_eqn([], value={"(0, 0)": True}) == 0.0
    assert metrics.kalgebra_eqn(plots, size=2) == 1.0 and metrics.kalgebra_eqn(plots, size=1) == 0.0


def test_predicate_with_lambdas_plain_keys_and_missing_state() -> None:
    out = {"stdout": "n=10\nmean=452.5\n", "returncode": 0}
    key = "lambda out: float(dict(line.split('=') for line in out.split())['mean'])"
    assert metrics.scienceboard_predicate(out, key=key, value=452.5, field="stdout") == 1.0
    assert metrics.scienceboard_predicate(out, key=key, value=452.51, pred="lambda a, b: abs(a - b) < 0.1",
                                          field="stdout") == 1.0
    dump = {"toolbars": {"shown": False}, "layers": [{"name": "a@P"}]}
    assert metrics.scienceboard_predicate(dump, key="lambda d: d['toolbars']['shown']", value=False) == 1.0
    assert metrics.scienceboard_predicate(dump, key="layers", value=[{"name": "a@P"}]) == 1.0
    assert metrics.scienceboard_predicate(dump, key="lambda d: d['missing']", value=1) == 0.0  # KeyError: 0
    with pytest.raises(UnsafeLambda):
        metrics.scienceboard_predicate(dump, key="lambda d: d.__class__", value=1)


# -- lambdas ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [
    "lambda x: __import__('os').system('true')",
    "lambda x: x.__class__.__mro__",
    "lambda x: open('/etc/passwd').read()",
    "lambda x: eval('1')",
    "lambda x: getattr(x, 'y')",
    "(lambda x: x)",  # fine as a lambda...
])
def test_only_plain_lambdas_over_their_arguments_compile(source: str) -> None:
    if source == "(lambda x: x)":
        assert compile_lambda(source)(3) == 3
        return
    with pytest.raises(UnsafeLambda):
        compile_lambda(source)


def test_non_lambdas_and_syntax_errors_are_refused_with_the_reason() -> None:
    with pytest.raises(UnsafeLambda, match="single 'lambda"):
        compile_lambda("[1, 2]")
    with pytest.raises(UnsafeLambda, match="not valid Python"):
        compile_lambda("lambda x: (")
    with pytest.raises(UnsafeLambda, match="Yield is not allowed"):
        compile_lambda("lambda x: (yield x)")
    assert compile_lambda("lambda x: (y := x + 1, y * 2)[-1]")(1) == 4  # upstream's Celestia keys bind names


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.()[]'\" :=+-*/,0123456789", max_size=40))
def test_any_input_is_refused_cleanly_or_compiled_into_the_restricted_namespace(body: str) -> None:
    """Property: junk never escapes as another exception, and whatever compiles sees no builtins but the safe ones
    and reaches no underscore attribute."""
    try:
        function = compile_lambda(f"lambda x: {body}")
    except UnsafeLambda:
        return
    assert function.__globals__["__builtins__"] == {"__import__": _internal_import}
    assert set(function.__globals__) - {"__builtins__"} <= set(SAFE_BUILTINS)
    assert not any(name.startswith("_") and name != "__import__" for name in function.__code__.co_names)


# -- KAlgebra's widgets and calgebra -------------------------------------------------------------------

TREE = """<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state" name="main">
<application name="kalgebra"><frame name="">
 <frame name="Functions"><filler name=""><tree name="">
  <table-column-header name="Name" /><table-column-header name="Plot" />
  <table-cell name="f0" /><table-cell name="x^2-4" /><table-cell name="f1" /><table-cell name="x^2+y^2=9" />
 </tree></filler></frame>
 <frame name="Variables"><tree name="">
  <table-column-header name="Name" /><table-column-header name="Value" />
  <table-cell name="pi" /><table-cell name="3.141592653589793" />
  <table-cell name="r" /><table-cell name="root(2, 2)" /><table-cell name="f" /><table-cell name="x-&gt;x^2+1" />
 </tree></frame>
 <frame name="Variables"><tree name=""><table-cell name="pi" /><table-cell name="3.14159" /></tree></frame>
</frame></application>
<application name="mousepad" />
</desktop-frame>"""


def test_variables_and_functions_come_from_kalgebras_widgets() -> None:
    variables = kalgebra.variables_from_tree(TREE)
    assert variables == {"pi": "3.141592653589793", "r": "root(2, 2)", "f": "x->x^2+1"}
    assert kalgebra.functions_from_tree(TREE) == [{"name": "f0", "expression": "x^2-4"},
                                                 {"name": "f1", "expression": "x^2+y^2=9"}]
    empty = '<desktop-frame name="main"><application name="texstudio" /></desktop-frame>'
    assert kalgebra.variables_from_tree(empty) is None and kalgebra.functions_from_tree(empty) is None


def test_point_probes_by_kind_of_plot() -> None:
    assert kalgebra.point_probe("x^2-4", [2, 0]) == ("(x->x^2-4)(2.0)", 0.0)
    assert kalgebra.point_probe("x->ln(x)^2", [11, 5.7]) == ("(x->ln(x)^2)(11.0)", 5.7)
    assert kalgebra.point_probe("y->y^2", [4, 2]) == ("(y->y^2)(2.0)", 4.0)
    assert kalgebra.point_probe("y^3", [8, 2]) == ("(y->y^3)(2.0)", 8.0)
    assert kalgebra.point_probe("x^2+y^2=9", [3, 0]) == ("((x, y)->(x^2+y^2)-(9))(3.0, 0.0)", 0.0)
    assert kalgebra.point_probe("t->vector{cos(t), sin(t)}", [1, 0]) is None
    assert kalgebra.point_key([11, 5.749901739308773]) == "(11, 5.749901739308773)"
    assert kalgebra.on_curve("5.74990173931", 5.749901739308773) and not kalgebra.on_curve("5.75", 5.7499017)
    assert not kalgebra.on_curve(None, 0.0) and not kalgebra.on_curve("nan", 0.0)


def test_calgebra_output_parsing_keeps_errors_in_place() -> None:
    stderr = "2\nError:\n - Unknown identifier: 'foo'\n4\nvector { 1, 2 }\n\nExit.\n"
    assert kalgebra.parse_calgebra(stderr, 5) == ["2", None, "4", "vector { 1, 2 }", None]


def test_real_calgebra_decides_points_on_curves() -> None:
    points = [("x^2-4", [2.0, 0.0], True), ("x^2-4", [1.0, 1.0], False), ("sin(x)", [0.5, math.sin(0.5)], True),
              ("x^2+y^2=9", [1.8, 2.4], True), ("x^2+y^2=9", [2.0, 2.0], False), ("ln(x)^2", [-16, -3.05], False)]
    probes = [kalgebra.point_probe(e, p) for e, p, _ in points]
    run = subprocess.run(["calgebra", "--calculate"], input=kalgebra.calgebra_script([p[0] for p in probes]),
                         capture_output=True, text=True, timeout=60, check=True)
    values = kalgebra.parse_calgebra(run.stderr, len(probes))
    assert [kalgebra.on_curve(v, p[1]) for v, p in zip(values, probes)] == [want for _, _, want in points]


def test_grass_arguments_follow_grass_script_conventions() -> None:
    assert grass_argv("r.univar", {"flags": "g", "map": "dem"}) == ["r.univar", "-g", "map=dem"]
    assert grass_argv("g.remove", {"type": ["raster", "vector"], "overwrite": True, "quiet": False}) == \
        ["g.remove", "type=raster,vector", "--overwrite"]
