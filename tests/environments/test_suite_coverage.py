"""``python -m environments.suite_coverage``: a task counts as covered only when every setup step, getter,
metric, metric option and rule it uses is evaluated here, and each gap is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.pluginmanager import load_plugins
from environments.suite_coverage import Coverage, main, measure


def task(func="compare_table", options=None, result=None, config=None) -> dict:
    return {"id": "t", "instruction": "x", "config": config or [],
            "evaluator": {"func": func, "result": result or {"type": "vm_file", "path": "~/a.xlsx", "dest": "a.xlsx"},
                          "expected": {"type": "vm_file", "path": "~/b.xlsx", "dest": "b.xlsx"},
                          "options": options or {}}}


@pytest.fixture(scope="module")
def coverage() -> Coverage:
    return Coverage(load_plugins())


def test_a_task_using_only_what_is_evaluated_is_covered(coverage: Coverage) -> None:
    rules = [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
             {"type": "check_cell", "sheet_idx": 0, "coordinate": "A1",
              "props": {"value": {"method": "eq", "ref": 3}, "merge": {"method": "eq", "ref": False}}},
             {"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0", "chart_props": ["type"]}]
    assert coverage.missing(task(options={"rules": rules})) == []
    assert coverage.missing(task("compare_pptx_files", {"examine_shape": False, "_note": "x"})) == []
    assert coverage.missing(task("compare_docx_files", {"ignore_blanks": False, "fuzzy_match": True})) == []


def test_every_gap_is_named(coverage: Coverage) -> None:
    rules = [{"type": "glow", "sheet_idx0": 0}, {"type": "style", "props": ["font_bold", "shimmer"]},
             {"type": "check_cell", "props": {"sparkle": {"method": "eq", "ref": 1}}}]
    assert coverage.missing(task(options={"rules": rules})) == [
        "compare_table rule glow", "compare_table style property shimmer", "compare_table check_cell property sparkle"]
    assert coverage.missing(task("compare_pptx_files", {"examine_shimmer": True})) == [
        "compare_pptx_files examine_shimmer"]
    # an option no parameter names is ignored (the function takes **kwargs, as upstream's): listed apart
    assert coverage.missing(task("compare_docx_files", {"shimmer": 1, "fuzzy_match": True})) == []
    assert coverage.ignored == ["compare_docx_files option shimmer"]
    assert coverage.missing(task("no_such_metric", config=[{"type": "teleport", "parameters": {}}],
                                 result={"type": "no_such_getter"})) == [
        "setup teleport", "getter no_such_getter", "metric no_such_metric"]


def test_the_command_counts_by_domain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for domain, body in (("calc", task()), ("odd", task("no_such_metric"))):
        (tmp_path / domain).mkdir()
        (tmp_path / domain / "t.json").write_text(json.dumps(body))
    result = measure(sorted(tmp_path.rglob("*.json")), load_plugins())
    assert (result["covered"], result["tasks"]) == (1, 2) and result["missing"] == {"metric no_such_metric": 1}
    assert result["ignored"] == {}
    assert main([str(tmp_path), "--json"]) == 0 and json.loads(capsys.readouterr().out) == result
    with pytest.raises(SystemExit, match="does not exist"):
        main([str(tmp_path / "nowhere")])
