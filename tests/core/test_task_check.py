"""Fail fast: a task pool is checked against the registries and the environment backend before any desktop
starts; unknown names are one config error (or, with tasks.unsupported: skip, tasks left out and listed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.runtime.task_check import check_pool, generated_functions, task_problems
from core.types import Task
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions

ROOT = Path(__file__).resolve().parents[2]


def task(task_id: str, **evaluator: object) -> Task:
    config = evaluator.pop("config", [])
    return Task.model_validate({"id": task_id, "instruction": "x", "config": config,
                                "evaluator": {"func": "exact_match", **evaluator}})


@pytest.fixture(scope="module")
def judge() -> JudgeServices:
    return JudgeServices.of(load_plugins(environ={}))


@pytest.fixture()
def backend(tmp_path: Path) -> LocalDesktopBackend:  # constructing it starts no desktop
    return LocalDesktopBackend(LocalDesktopOptions(work_dir=str(tmp_path / "envs"), desktop_user=None))


def test_every_unknown_name_is_named_with_the_closest_known_one(backend, judge) -> None:  # type: ignore[no-untyped-def]
    good = task("good", result={"type": "vm_file", "path": "~/a"}, expected={"type": "rule", "rules": {}})
    assert task_problems(good, backend, judge) == []
    bad = task("bad", func=["compare_imagez", "exact_match"], result=[{"type": "vm_fil", "path": "~/a"}],
               postconfig=[{"type": "googledrive", "parameters": {}}],
               config=[{"type": "launch", "parameters": {"command": ["x"]}}, {"type": "login", "parameters": {}}])
    assert task_problems(bad, backend, judge) == [
        "setup step type 'login' is not supported by this environment backend",
        "setup step type 'googledrive' is not supported by this environment backend",
        "unknown metric 'compare_imagez' (did you mean 'compare_images'?)",
        "unknown getter 'vm_fil' (did you mean 'vm_file'?)",
    ]


def test_functions_of_the_tasks_generated_code_count_as_known(backend, judge) -> None:  # type: ignore[no-untyped-def]
    code = "def get_state(env, config):\n    return 1\n\ndef my_metric(result, expected):\n    return 1.0\n"
    assert generated_functions(code) == {"get_state", "my_metric"}
    generated = task("gen", func="my_metric", result={"type": "get_state"}, code=code)
    assert task_problems(generated, backend, judge) == []
    assert generated_functions("def broken(:") == set()


def test_the_pool_is_refused_or_trimmed(backend, judge, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pool = [task("good"), task("bad", func="no_such_metric")]
    with pytest.raises(ConfigError) as info:
        check_pool(pool, backend, judge, policy="error")
    assert info.value.problems[0] == "task bad: unknown metric 'no_such_metric'"
    assert "1 of 2 tasks cannot be set up or judged here" in info.value.problems[-1]
    kept = check_pool(pool, backend, judge, policy="skip", run_dir=tmp_path)
    assert [t.id for t in kept] == ["good"]
    assert json.loads((tmp_path / "skipped_tasks.json").read_text()) == {"bad": ["unknown metric 'no_such_metric'"]}
    with pytest.raises(ConfigError, match="left no task"):
        check_pool(pool[1:], backend, judge, policy="skip")


def test_a_run_on_such_a_pool_stops_before_any_desktop(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t.json").write_text(json.dumps({"id": "needs-drive", "instruction": "x", "config": [],
                                              "evaluator": {"func": "compare_pdfz"}}))
    proc = subprocess.run([sys.executable, "-m", "core.run", "--config", str(ROOT / "configs" / "quickstart.yaml"),
                           f"tasks.paths=[{tasks}]", "tasks.domains=null", f"run.output_dir={tmp_path / 'runs'}"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "task needs-drive: unknown metric 'compare_pdfz' (did you mean 'compare_pdfs'?)" in proc.stderr
    assert "desktop started" not in proc.stderr
