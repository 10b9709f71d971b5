"""``check_python_file_by_test_suite`` imports the agent's program, so it runs only in the judge executor: a
real ``sandbox`` executor (its own process, no network, the fetched files read-only) judging a test suite
against a program the "agent" fixed or left broken, through :func:`environments.judges.evaluate.evaluate` with
the registered metric. Hand-derived scores follow upstream's rules (bool, clipped number, truthiness; any
exception 0); upstream's own function is compared on the same files (run in this process: they are ours)."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.types import JudgementStatus, Task
from environments.judges.evaluate import evaluate
from tests.judges.conftest import make_executor
from tests.judges.upstream import metrics_module

SUITE = """
from snake import grow

def test():
    return grow([1, 2]) == [1, 2, 3]

def half():
    return 0.5 if grow([1]) else 0

def twice():
    return 7

def crash():
    raise RuntimeError("the suite itself fails")

def listing():
    return [0]

flag = 1
"""
FIXED = "def grow(body):\n    return body + [body[-1] + 1]\n"
BROKEN = "def grow(body):\n    return body\n"
NO_IMPORT = "raise ImportError('pygame is not installed')\n"


def _files(root: Path, program: str) -> tuple[list[str], str]:
    """As the task's getters leave them: the agent's files and the suite side by side in the cache."""
    (root / "snake.py").write_text(program)
    (root / "test_suite.py").write_text(SUITE)
    return [str(root / "snake.py")], str(root / "test_suite.py")


def _task(actual: list[str], suite: str, **options: Any) -> Task:
    return Task(id="snake", instruction="fix the game", evaluator={
        "func": "check_python_file_by_test_suite", "result": {"type": "rule", "rules": actual},
        "expected": {"type": "rule", "rules": suite}, "options": options})


CASES = [(FIXED, {}, 1.0), (BROKEN, {}, 0.0), (FIXED, {"test_function_name": "half"}, 0.5),
         (FIXED, {"test_function_name": "twice"}, 1.0), (FIXED, {"test_function_name": "crash"}, 0.0),
         (FIXED, {"test_function_name": "listing"}, 1.0), (FIXED, {"test_function_name": "flag"}, 0.0),
         (FIXED, {"test_function_name": "absent"}, 0.0), (NO_IMPORT, {}, 0.0)]


def test_the_suite_runs_in_the_sandbox_and_scores_as_upstream() -> None:
    upstream = metrics_module("vscode", ("formulas",)).check_python_file_by_test_suite
    judge = JudgeServices.of(load_plugins(environ={}), make_executor())
    env = types.SimpleNamespace(client=None, env_id="test", screen_size=(1280, 800), isolated=True, home_dir=None)
    for program, options, score in CASES:
        with tempfile.TemporaryDirectory(prefix="scalecua-judge-") as scratch:  # under the artifact roots
            actual, suite = _files(Path(scratch), program)
            judgement = asyncio.run(evaluate(_task(actual, suite, **options), env, judge=judge, last_action=None))
            assert judgement.status == JudgementStatus.OK, judgement.error
            assert judgement.score == score, (program, options)
            sys.modules.pop("snake", None)  # upstream imports in this process: each case its own program
            assert upstream(actual, suite, **options) == score, (program, options)
            sys.modules.pop("snake", None)


def test_without_an_executor_it_never_runs_in_process(tmp_path: Path) -> None:
    actual, suite = _files(tmp_path, FIXED)
    judge = JudgeServices.of(load_plugins(environ={}), None)
    env = types.SimpleNamespace(client=None, env_id="test", screen_size=(1280, 800))
    judgement = asyncio.run(evaluate(_task(actual, suite), env, judge=judge, last_action=None))
    assert judgement.status == JudgementStatus.CRASHED and "no judge executor" in (judgement.error or "")
    assert "snake" not in sys.modules  # nothing of the agent's program was imported here
