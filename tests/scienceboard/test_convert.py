"""ScienceBoard task JSON -> Task: every evaluate type, path and port mapping, and errors that say what is wrong."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.errors import ConfigError
from core.runtime.tasks import load_tasks
from environments.scienceboard import convert
from environments.scienceboard.convert import convert_task

TEX = "\\documentclass{article}\n\\begin{document}\nValue: xxx.\n\\end{document}\n"


def sb(app: str, evaluate: list[dict[str, Any]], initialize: list[dict[str, Any]] | None = None,
       **extra: Any) -> dict[str, Any]:
    """A task in ScienceBoard's schema (as upstream files are written: no id, upstream's home)."""
    return {"type": app, "sort": "VM", "steps": 5, "instruction": f"do something in {app}", "version": "0.1",
            "initialize": initialize or [], "evaluate": evaluate, **extra}


def metrics(task) -> list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]]:
    e = task.evaluator
    expected = e.expected or [{}] * len(e.funcs)
    return list(zip(e.funcs, e.result, expected, e.options))


def test_texstudio_file_and_compile_become_exact_match_and_the_tex_check() -> None:
    task = convert_task(sb("TeXstudio", [
        {"type": "file", "path": "/home/user/atelier/main.tex", "source": "xxx", "target": "42"},
        {"type": "compile", "path": "/home/user/atelier", "file": "main"},
    ], [{"func": "touch", "path": "/home/user/atelier/main.tex", "text": TEX},
        {"func": "launch", "command": "texstudio /home/user/atelier/main.tex", "shell": True}]))
    (f1, r1, x1, _), (f2, r2, x2, _) = metrics(task)
    assert (f1, r1) == ("exact_match", {"type": "vm_file_text", "path": "~/atelier/main.tex"})
    assert x1 == {"type": "rule", "rules": {"expected": TEX.replace("xxx", "42")}}
    assert (f2, r2, x2) == ("scienceboard_passed", {"type": "scienceboard_tex_check", "path": "~/atelier",
                                                     "file": "main", "bibtex": False}, {})
    assert task.evaluator.conj == "and" and task.config == []
    initialize = task.metadata["scienceboard"]["initialize"]
    assert initialize[0]["path"] == "{HOME}/atelier/main.tex"  # a setup placeholder: the desktop's real home
    assert initialize[1]["command"] == "texstudio {HOME}/atelier/main.tex"
    assert task.domain == "TeXstudio" and task.related_apps == ["TeXstudio"] and task.metadata["max_steps"] == 5


def test_a_bib_file_written_by_initialize_turns_bibtex_on_and_include_is_a_regex() -> None:
    task = convert_task(sb("TeXstudio", [
        {"type": "include", "path": "/home/user/a/main.tex", "pattern": r"\\cite\{x\}"},
        {"type": "compile", "path": "/home/user/a", "file": "main"},
    ], [{"func": "touch", "path": "/home/user/a/refs.bib", "text": "@book{x, title={T}}"}]))
    (f1, r1, x1, _), (_, r2, _, _) = metrics(task)
    assert f1 == "scienceboard_regex" and x1["rules"] == {"pattern": r"\\cite\{x\}"}
    assert r2["bibtex"] is True


def test_kalgebra_items_read_the_variables_panel_and_the_function_list() -> None:
    points = [[11, 5.749901739308773], [-16, -3.05]]
    task = convert_task(sb("KAlgebra", [
        {"type": "var", "key": "p", "value": "1+-i"},
        {"type": "val", "key": "s", "value": 385},
        {"type": "eqn", "key": points, "value": {"(11, 5.749901739308773)": True, "(-16, -3.05)": False}},
        {"type": "eqn", "key": "#SIZE", "value": 2},
    ], [{"func": "launch", "command": "kalgebra «PORTLIKE»", "shell": True}]), port=8123)
    (f1, r1, _, o1), (f2, r2, _, o2), (f3, r3, _, o3), (f4, r4, _, o4) = metrics(task)
    assert (f1, r1["type"], r1["numeric"], o1) == ("kalgebra_var", "kalgebra_variables", [], {"key": "p", "value": "1+-i"})
    assert (f2, r2["numeric"], o2) == ("kalgebra_val", ["s"], {"key": "s", "value": 385})
    assert (f3, r3, o3["value"]["(-16, -3.05)"]) == ("kalgebra_eqn", {"type": "kalgebra_functions", "points": points}, False)
    assert (f4, r4["points"], o4) == ("kalgebra_eqn", [], {"size": 2})
    assert task.metadata["scienceboard"]["initialize"][0]["command"] == "kalgebra 8123"


def test_stop_items_check_the_last_action_and_ans_falls_back_to_the_reference_answer() -> None:
    with_args = convert_task(sb("Celestia", [{"type": "stop", "value": "ANS", "args": ["5"]}], ans="ANS 5"))
    from_ans = convert_task(sb("ChimeraX", [{"type": "stop", "value": "ANS"}], ans="ANS CTCGAG"))
    infeasible = convert_task(sb("KAlgebra", [{"type": "stop", "value": "FAIL"}], ans="FAIL"))
    assert metrics(with_args)[0][:2] == ("scienceboard_stop", {"type": "scienceboard_last_action"})
    assert metrics(with_args)[0][3] == {"value": "ANS", "args": ["5"]}
    assert metrics(from_ans)[0][3] == {"value": "ANS", "args": ["CTCGAG"]}
    assert metrics(infeasible)[0][3] == {"value": "FAIL"}
    assert with_args.metadata["reference_answer"] == "ANS 5"


def test_grass_db_and_info_and_lean_placeholder() -> None:
    task = convert_task(sb("GrassGIS", [
        {"type": "db", "cmd": "g.list", "kwargs": {"type": "raster"}, "key": "lambda out: out.split()",
         "value": "slope", "pred": "lambda key, value: value in key"},
        {"type": "info", "key": "lambda dump: dump['layers']", "value": "countries@PERMANENT"},
    ]), port=8000)
    (f1, r1, _, o1), (f2, r2, _, o2) = metrics(task)
    assert (f1, r1) == ("scienceboard_predicate", {"type": "grass_command", "cmd": "g.list", "kwargs": {"type": "raster"}})
    assert o1 == {"key": "lambda out: out.split()", "value": "slope", "pred": "lambda key, value: value in key",
                  "field": "stdout"}
    assert (f2, r2, o2) == ("scienceboard_predicate", {"type": "grass_gui_dump", "port": 8000},
                            {"key": "lambda dump: dump['layers']", "value": "countries@PERMANENT"})
    theorem = "theorem t (a b : Nat) : a + b = b + a := by sorry"
    lean = convert_task(sb("Lean", [{"type": "placeholder"}], [{"func": "import", "libs": ["Mathlib"]},
                                                                {"func": "query", "expr": theorem}]))
    assert metrics(lean)[0][:2] == ("scienceboard_passed", {"type": "scienceboard_lean_check", "header": theorem})


def test_instrumented_and_rest_items_convert_to_their_apps_getters() -> None:
    """Celestia info (instrumented build's /dump with the task's query), KAlgebra 3D eqn (its /func/3d), ChimeraX
    info / states / file (stock REST server, the SessionStates bundle, a file's text)."""
    celestia = convert_task(sb("Celestia", [{"type": "info", "key": "lambda dump: dump['time']['scale']",
                                             "value": 100, "pred": "lambda key, value: abs(key - value) < 0.1"}],
                               query=[{"name": "Mercury", "type": 2}]), port=8001)
    assert metrics(celestia)[0] == ("scienceboard_predicate",
                                    {"type": "celestia_dump", "port": 8001, "query": [{"name": "Mercury", "type": 2}]},
                                    {}, {"key": "lambda dump: dump['time']['scale']", "value": 100,
                                           "pred": "lambda key, value: abs(key - value) < 0.1"})
    surface = convert_task(sb("KAlgebra", [{"type": "eqn", "key": [[5.13, -1, 5.13]], "value": {"(5.13, -1, 5.13)": True}}]))
    assert metrics(surface)[0][:2] == ("kalgebra_eqn", {"type": "kalgebra_functions_3d", "port": 8000,
                                                        "points": [[5.13, -1, 5.13]]})
    chimerax = convert_task(sb("ChimeraX", [
        {"type": "info", "key": "sel", "value": ["atom id /A:9@N1 idatm_type N3+"]},
        {"type": "states", "key": "_state_containers.models._models.(1,)._name", "value": "2olx"},
        {"type": "states", "key": "lambda key: key.startswith('x')", "value": None},
        {"type": "states", "find": "lambda key, value: key.endswith('page_source')", "key": "lambda key: key",
         "pattern": "4 clashes"},
        {"type": "file", "key": "/home/user/Downloads/best_model.pdb", "value": "ATOM     14  CA  ASN A"},
    ]), port=8002)
    info, name, absent, found, file = metrics(chimerax)
    assert info == ("chimerax_info", {"type": "chimerax_info", "port": 8002, "key": "sel"}, {},
                    {"value": ["atom id /A:9@N1 idatm_type N3+"]})
    assert name == ("chimerax_states", {"type": "chimerax_states", "port": 8002}, {},
                    {"key": "_state_containers.models._models.(1,)._name", "value": "2olx", "absent": False})
    assert absent[3] == {"key": "lambda key: key.startswith('x')", "value": None, "absent": True}
    assert found[3] == {"key": "lambda key: key", "pattern": "4 clashes",
                        "find": "lambda key, value: key.endswith('page_source')"}
    assert file == ("scienceboard_contains", {"type": "vm_file_text", "path": "~/Downloads/best_model.pdb"}, {},
                    {"value": "ATOM     14  CA  ASN A"})


def test_ids_are_kept_or_derived_stably_and_the_oracle_is_carried() -> None:
    raw = sb("KAlgebra", [{"type": "stop", "value": "DONE"}])
    first, second = convert_task(raw), convert_task(copy.deepcopy(raw))
    assert first.id == second.id and first.id.startswith("kalgebra-")
    other = convert_task({**raw, "instruction": "something else"})
    assert other.id != first.id
    named = convert_task({**raw, "id": "my-task", "oracle": [{"type": "done"}]})
    assert named.id == "my-task" and named.metadata["oracle"] == [{"type": "done"}]
    assert "oracle" not in named.metadata["scienceboard"]


def test_upstream_home_mapping_can_be_turned_off() -> None:
    raw = sb("TeXstudio", [{"type": "compile", "path": "/home/user/a", "file": "main"}])
    assert metrics(convert_task(raw, upstream_home=""))[0][1]["path"] == "/home/user/a"


@pytest.mark.parametrize(("raw", "message"), [
    (sb("KAlgebra", [{"type": "eqn", "key": [[1, 2], [1, 2, 3]], "value": {}}]), "[x, y, z] (3D) points"),
    (sb("Celestia", [{"type": "info", "key": "x", "value": 1}], query=[{"name": "Mars"}]), "list of {name, type}"),
    (sb("ChimeraX", [{"type": "states", "key": "x"}]), "states needs 'value'"),
    (sb("ChimeraX", [{"type": "info", "key": "sel", "value": "x"}]), "the list of lines"),
    (sb("ChimeraX", [{"type": "file", "key": "/home/user/a.pdb"}]), "file needs 'value'"),
    (sb("TeXstudio", [{"type": "file", "path": "/home/user/m.tex"}]), "needs an initialize 'touch'"),
    (sb("KAlgebra", [{"type": "stop", "value": "MAYBE"}]), "one of DONE, FAIL, ANS"),
    (sb("KAlgebra", [{"type": "stop", "value": "ANS"}]), "needs 'args'"),
    (sb("KAlgebra", [{"type": "wobble"}]), "'wobble' of a KAlgebra task is not supported; supported: stop"),
    (sb("Lean", [{"type": "placeholder"}]), "needs an initialize 'query'"),
])
def test_unsupported_items_name_the_task_item_and_reason(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="evaluate\\[0\\]") as info:
        convert_task(raw)
    assert message in str(info.value)


def test_schema_errors_are_reported_per_file_by_the_loader(tmp_path) -> None:
    good = sb("KAlgebra", [{"type": "stop", "value": "DONE"}], id="good")
    bad = {k: v for k, v in good.items() if k != "steps"} | {"id": "bad"}
    empty = sb("KAlgebra", [], id="empty")
    for name, body in (("good", good), ("bad", bad), ("empty", empty)):
        (tmp_path / f"{name}.json").write_text(__import__("json").dumps(body))
    with pytest.raises(ConfigError) as info:
        load_tasks([str(tmp_path)], convert=convert_task)
    problems = info.value.problems
    assert len(problems) == 2
    assert any("bad.json" in p and "steps" in p for p in problems)
    assert any("empty.json" in p and "evaluate" in p for p in problems)


def test_osworld_json_is_not_mistaken_for_scienceboard() -> None:
    assert convert.is_scienceboard({"evaluate": []})
    assert not convert.is_scienceboard({"id": "x", "instruction": "y", "evaluator": {"func": "exact_match"}})


def test_the_bundled_suite_has_ten_tasks_per_application_each_with_an_oracle() -> None:
    tasks = load_tasks(["package:environments.scienceboard/tasks"], convert=convert_task)
    by_app: dict[str, int] = {}
    for task in tasks:
        by_app[task.domain] = by_app.get(task.domain, 0) + 1
        assert task.metadata["oracle"], task.id
        assert task.source_dir and task.source_dir.endswith(task.domain)
    assert set(by_app) == {"KAlgebra", "TeXstudio", "GrassGIS"}
    assert min(by_app.values()) >= 10
