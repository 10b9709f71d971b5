"""Every bundled task on real desktops: the judge scores 0 after setup and 1 after the oracle's GUI actions.

The whole suite runs once per module through :func:`core.envcheck.check_tasks`
(the ``local-desktop`` backend: Xvfb, openbox, the probe and the real
applications), three desktops side by side; each task is then its own test.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from core.commands import envcheck
from core.pluginmanager import load_plugins
from environments.tasks import load_bundled_tasks

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

TASKS = load_bundled_tasks()
WORKERS = 3
#: the oracles wait explicitly where an application needs time, so the per-action pause before each
#: screenshot can be shorter than an agent's default (0.3 s): it saves about a third of the suite's time
BACKEND_OPTIONS = {"settle_s": 0.1}


@pytest.fixture(scope="module")
def report() -> dict:
    result = asyncio.run(envcheck.check_tasks(TASKS, workers=WORKERS, backend_options=BACKEND_OPTIONS,
                                              plugins=load_plugins(environ={})))
    print(json.dumps({k: v for k, v in result.items() if k != "results"}))  # wall time in the test log
    return result


@pytest.mark.parametrize("task_id", [t.id for t in TASKS])
def test_task_scores_zero_after_setup_and_one_after_its_oracle(report: dict, task_id: str) -> None:
    result = next(r for r in report["results"] if r["task_id"] == task_id)
    assert result["ok"], result["error"]
    assert (result["score_before"], result["status_before"]) == (0.0, "ok")
    assert (result["score_after"], result["status_after"]) == (1.0, "ok")


def test_suite_report_shape(report: dict) -> None:
    assert report["tasks"] == len(TASKS) and report["workers"] == WORKERS
    assert report["passed"] + len(report["failed"]) == report["tasks"]
    timings = report["results"][0]["timings"]
    assert {"reset_s", "judge_before_s", "oracle_s", "judge_after_s", "total_s"} <= set(timings)


def test_envcheck_cli_prints_json_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    code = envcheck.main(["--tasks", "os-infeasible-windows-installer", "os-make-executable", "--json",
                          "--workers", "1"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["passed"] == 2 and out["failed"] == []
    assert [r["task_id"] for r in out["results"]] == ["os-infeasible-windows-installer", "os-make-executable"]


def test_envcheck_cli_rejects_unknown_tasks_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    from core.commands.cli import main_guard

    assert main_guard(envcheck.main, ["--tasks", "no-such-task"]) == 2
    assert "unknown task ids ['no-such-task']" in capsys.readouterr().err
