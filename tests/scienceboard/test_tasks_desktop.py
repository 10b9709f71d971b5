"""Bundled ScienceBoard tasks on real desktops, through the ``scienceboard`` backend over ``local-desktop``.

A representative subset covers every kind of judge the suite uses (KAlgebra's plots, variables and answers,
TeXstudio's file comparison and pdflatex + bibtex check, a GRASS module run in the GUI's session); each
must score 0 after setup and 1 after its oracle, as ``core.envcheck`` checks. The whole suite runs with
``python -m core.envcheck --backend scienceboard --path package:environments.scienceboard/tasks``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from core.commands import envcheck
from core.pluginmanager import load_plugins
from core.runtime.tasks import load_tasks
from core.types import Action, ActionType, JudgementStatus
from core.interfaces import JudgeServices
from environments.scienceboard.convert import convert_task
from environments.setup import SetupError

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

SUBSET = ["kalgebra-plot-two-lines", "kalgebra-sum-of-squares", "kalgebra-factorial-answer",
          "texstudio-add-bibliography", "texstudio-fill-angle", "grass-buffer-wells"]
SUITE = "package:environments.scienceboard/tasks"
WORKERS = 2


@pytest.fixture(scope="module")
def plugins():  # type: ignore[no-untyped-def]
    return load_plugins(environ={})


@pytest.fixture(scope="module")
def report(plugins) -> dict:  # type: ignore[no-untyped-def]
    backend = plugins.registry("environment").create("scienceboard", {"max_environments": WORKERS,
                                                                      "settle_s": 0.2})
    tasks = load_tasks([SUITE], convert=backend.convert_task, include=SUBSET)
    result = asyncio.run(envcheck.check_tasks(tasks, backend_name="scienceboard", workers=WORKERS, plugins=plugins,
                                              backend=backend))
    print(json.dumps({k: v for k, v in result.items() if k != "results"}))
    return result


@pytest.mark.parametrize("task_id", SUBSET)
def test_task_scores_zero_after_setup_and_one_after_its_oracle(report: dict, task_id: str) -> None:
    result = next(r for r in report["results"] if r["task_id"] == task_id)
    assert result["ok"], result["error"]
    assert (result["score_before"], result["status_before"]) == (0.0, "ok")
    assert (result["score_after"], result["status_after"]) == (1.0, "ok")


def _task(body: dict) -> object:
    return convert_task({"type": "KAlgebra", "sort": "VM", "steps": 5, "instruction": "test", **body})


def test_answers_are_checked_and_missing_instrumented_apps_are_named(plugins) -> None:  # type: ignore[no-untyped-def]
    """On one desktop: a wrong answer scores 0; ScienceBoard's instrumented-GUI items fail with the reason."""
    getters, metrics = plugins.registry("getter"), plugins.registry("metric")
    backend = plugins.registry("environment").create("scienceboard", {"max_environments": 1, "init_retries": 0})
    gcd = load_tasks([SUITE], convert=backend.convert_task, include=["kalgebra-gcd-answer"])[0]
    gui_items = _task({"type": "GrassGIS", "evaluate": [{"type": "info", "key": "lambda d: d['layers']",
                                                         "value": []}]})
    gui_setup = _task({"type": "GrassGIS", "initialize": [{"func": "map", "grassdb": "~/grassdata",
                                                           "location": "demo", "mapset": "PERMANENT"}],
                       "evaluate": [{"type": "stop", "value": "DONE"}]})

    async def main() -> tuple:
        env = await backend.acquire()
        try:
            await env.reset(gcd)

            async def judge(task, action):  # type: ignore[no-untyped-def]
                return await backend.evaluate(env, task, judge=JudgeServices(getters, metrics),
                                              last_action=action)

            wrong = await judge(gcd, Action(type=ActionType.ANSWER, text="20"))
            right = await judge(gcd, Action(type=ActionType.ANSWER, text="21"))
            failed = await judge(gcd, Action(type=ActionType.FAIL))
            await env.reset(gui_items)
            gui = await judge(gui_items, Action(type=ActionType.DONE))
            with pytest.raises(SetupError) as setup_error:
                await env.reset(gui_setup)
            return wrong, right, failed, gui, setup_error.value
        finally:
            await backend.release(env)
            await backend.close()

    wrong, right, failed, gui, setup_error = asyncio.run(main())
    assert (wrong.score, right.score, failed.score) == (0.0, 1.0, 0.0)
    assert gui.status == JudgementStatus.CRASHED and "instrumented GRASS GUI" in (gui.error or "")
    assert setup_error.step_type == "map" and "instrumented GRASS GUI" in setup_error.reason


def test_envcheck_cli_runs_scienceboard_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    code = envcheck.main(["--backend", "scienceboard", "--path", SUITE, "--tasks", "texstudio-count-sections-answer",
                          "--workers", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["passed"] == 1 and out["backend"] == "scienceboard"
