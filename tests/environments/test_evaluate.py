"""OSWorld evaluation semantics: postconfig, infeasible/FAIL, conj and/or, FileNotFoundError, failures -> status.

Getters and metrics come from the real plugin registries (the built-ins plus a
test plugin registered in-process); generated judge code runs through the
real ``sandbox`` judge executor.
"""

from __future__ import annotations

import asyncio
import math
import os
import types
from pathlib import Path
from typing import Any

import pytest

from core import hookimpl
from core.pluginmanager import Plugins
from core.types import Action, ActionType, JudgementStatus, Task
from core.interfaces import JudgeServices
from environments.judges.evaluate import defined_functions, evaluate, last_action_failed

CALLS: list[str] = []


async def get_literal(env: Any, config: dict) -> Any:
    CALLS.append(f"get:{config.get('value')}")
    return config["value"]


async def get_missing(env: Any, config: dict) -> Any:
    CALLS.append("get:missing")
    raise FileNotFoundError("no such file on the desktop")


async def get_broken(env: Any, config: dict) -> Any:
    raise RuntimeError("the getter has a bug")


async def get_slow(env: Any, config: dict) -> Any:
    await asyncio.get_running_loop().create_future()  # never answers: only the judge's timeout ends it


async def get_desktop_gone(env: Any, config: dict) -> Any:
    from environments.client import ProbeConnectionError

    raise ProbeConnectionError("/file", "cannot reach http://127.0.0.1:1: connection refused")


async def get_cache_dir(env: Any, config: dict) -> Any:
    return env.cache_dir


def score_of(result: Any, expected: Any = None, **options: Any) -> float:
    CALLS.append(f"metric:{result}")
    return result


def only_result(result: Any, *, bonus: float = 0.0) -> float:
    """A metric without an ``expected`` parameter, called as OSWorld does when no expected config exists."""
    return min(1.0, result + bonus)


class TestJudges:
    @hookimpl
    def scalecua_register_getters(self, registry):
        for name, fn in [("literal", get_literal), ("missing", get_missing), ("broken", get_broken),
                         ("slow", get_slow), ("cache_dir", get_cache_dir),
                         ("desktop_gone", get_desktop_gone)]:
            registry.register(name, fn)

    @hookimpl
    def scalecua_register_metrics(self, registry):
        registry.register("score_of", score_of)
        registry.register("only_result", only_result)


@pytest.fixture
def judges(plugins: Plugins):
    name = plugins.register(TestJudges(), "test-judges")
    CALLS.clear()
    yield plugins.registry("getter"), plugins.registry("metric")
    plugins.unregister(name)


def lit(value: Any) -> dict:
    return {"type": "literal", "value": value}


def make_task(**evaluator: Any) -> Task:
    return Task(id="t", instruction="do it", evaluator=evaluator)


def judge(task: Task, judges, *, env: Any = None, last_action: Any = None, **kwargs: Any):  # type: ignore[no-untyped-def]
    getters, metrics = judges
    env = env or types.SimpleNamespace(client=None, env_id="test", screen_size=(1280, 800))
    return asyncio.run(evaluate(task, env, judge=JudgeServices(getters, metrics, kwargs.pop("executor", None)),
                                last_action=last_action, postconfig=kwargs.pop("postconfig", _no_postconfig),
                                **kwargs))


async def _no_postconfig(env: Any, steps: Any, **_: Any) -> None:
    CALLS.append(f"postconfig:{len(steps)}")


def test_single_metric_with_a_rule_getter(judges) -> None:  # type: ignore[no-untyped-def]
    task = make_task(func="exact_match", result=lit("yes"), expected={"type": "rule", "rules": {"expected": "yes"}})
    judgement = judge(task, judges)
    assert (judgement.score, judgement.status) == (1.0, JudgementStatus.OK)
    wrong = make_task(func="exact_match", result=lit("no"), expected={"type": "rule", "rules": {"expected": "yes"}})
    assert judge(wrong, judges).score == 0.0


def test_metric_without_expected_is_called_with_result_and_options_only(judges) -> None:  # type: ignore[no-untyped-def]
    task = make_task(func="only_result", result=lit(0.25), options={"bonus": 0.5})
    assert judge(task, judges).score == 0.75


def test_postconfig_runs_before_the_getters(judges) -> None:  # type: ignore[no-untyped-def]
    task = make_task(func="score_of", result=lit(1.0),
                     postconfig=[{"type": "sleep", "parameters": {"seconds": 0}}])
    judge(task, judges)
    assert CALLS == ["postconfig:1", "get:1.0", "metric:1.0"]


def test_failing_postconfig_is_a_crashed_judgement(judges) -> None:  # type: ignore[no-untyped-def]
    async def broken_postconfig(env: Any, steps: Any, **_: Any) -> None:
        raise OSError("the window to save is gone")

    task = make_task(func="score_of", result=lit(1.0), postconfig=[{"type": "sleep", "parameters": {"seconds": 0}}])
    judgement = judge(task, judges, postconfig=broken_postconfig)
    assert judgement.status == JudgementStatus.CRASHED and judgement.score == 0.0
    assert "postconfig failed" in judgement.error


def test_infeasible_scores_by_the_last_action(judges) -> None:  # type: ignore[no-untyped-def]
    task = make_task(func="infeasible")
    assert judge(task, judges, last_action=Action(type=ActionType.FAIL)).score == 1.0
    assert judge(task, judges, last_action=Action(type=ActionType.DONE)).score == 0.0
    assert judge(task, judges, last_action=None).score == 0.0
    assert judge(task, judges, last_action="FAIL").score == 1.0  # OSWorld's pyautogui form
    assert judge(task, judges, last_action={"action_type": "FAIL"}).score == 1.0  # computer_13
    feasible = make_task(func="score_of", result=lit(1.0))
    assert judge(feasible, judges, last_action=Action(type=ActionType.FAIL)).score == 0.0
    assert CALLS.count("get:1.0") == 0  # FAIL short-circuits before any getter runs


def test_file_not_found_scores_zero_with_status_ok(judges) -> None:  # type: ignore[no-untyped-def]
    judgement = judge(make_task(func="score_of", result={"type": "missing"}), judges)
    assert (judgement.score, judgement.status) == (0.0, JudgementStatus.OK)
    assert "no such file" in judgement.details["metrics"][0]["file_not_found"]


def test_conj_and_averages_and_stops_at_zero(judges) -> None:  # type: ignore[no-untyped-def]
    both = make_task(func=["score_of", "score_of"], result=[lit(1.0), lit(0.5)])
    assert judge(both, judges).score == 0.75
    CALLS.clear()
    stop = make_task(func=["score_of", "score_of", "score_of"], result=[lit(1.0), lit(0.0), lit(0.7)])
    assert judge(stop, judges).score == 0.0
    assert "get:0.7" not in CALLS
    missing = make_task(func=["score_of", "score_of"], result=[{"type": "missing"}, lit(1.0)])
    assert judge(missing, judges).score == 0.0


def test_conj_or_takes_the_max_and_stops_at_one(judges) -> None:  # type: ignore[no-untyped-def]
    best = make_task(func=["score_of", "score_of"], conj="or", result=[lit(0.25), lit(0.5)])
    assert judge(best, judges).score == 0.5
    first = make_task(func=["score_of", "score_of"], conj="or", result=[lit(1.0), {"type": "broken"}])
    assert judge(first, judges).score == 1.0  # the broken getter never runs
    missing = make_task(func=["score_of", "score_of"], conj="or", result=[{"type": "missing"}, lit(0.5)])
    assert judge(missing, judges).score == 0.5


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, "1.0", None])
def test_scores_outside_the_unit_interval_are_invalid(judges, bad) -> None:  # type: ignore[no-untyped-def]
    judgement = judge(make_task(func="score_of", result=lit(bad)), judges)
    assert judgement.status == JudgementStatus.INVALID_SCORE and judgement.score == 0.0


def test_judge_failures_become_statuses_never_exceptions(judges) -> None:  # type: ignore[no-untyped-def]
    crashed = judge(make_task(func="score_of", result={"type": "broken"}), judges)
    assert crashed.status == JudgementStatus.CRASHED and "the getter has a bug" in crashed.error
    unknown = judge(make_task(func="compare_tables", result=lit(1)), judges)
    assert unknown.status == JudgementStatus.CRASHED and "unknown metric 'compare_tables'" in unknown.error
    assert "compare_table" in unknown.error  # the available names are listed
    no_type = judge(make_task(func="score_of", result={"path": "x"}), judges)
    assert "needs a 'type'" in no_type.error
    lengths = judge(make_task(func=["score_of", "score_of"], result=[lit(1.0)]), judges)
    assert lengths.status == JudgementStatus.CRASHED and "list of 2 entries" in lengths.error
    slow = judge(make_task(func="score_of", result={"type": "slow"}), judges, timeout_s=0.3)
    assert slow.status == JudgementStatus.TIMEOUT and slow.score == 0.0


def test_an_environment_failure_under_the_judge_propagates(judges) -> None:  # type: ignore[no-untyped-def]
    """A dead probe under a getter or the postconfig is the environment's failure, not the judge's: it reaches
    the episode (retried, never scored) instead of becoming a crashed judgement with a score."""
    from core.errors import EnvironmentFailure
    from environments.client import ProbeConnectionError

    with pytest.raises(EnvironmentFailure, match="connection refused"):
        judge(make_task(func="score_of", result={"type": "desktop_gone"}), judges)

    async def gone(env: Any, steps: Any, **_: Any) -> None:
        raise ProbeConnectionError("/execute", "timed out after 15 s")

    task = make_task(func="score_of", result=lit(1.0), postconfig=[{"type": "sleep", "parameters": {"seconds": 0}}])
    with pytest.raises(EnvironmentFailure, match="timed out"):
        judge(task, judges, postconfig=gone)


def test_getters_get_a_fresh_cache_dir_per_evaluation(judges, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    task = make_task(func="exact_match", result={"type": "cache_dir"},
                     expected={"type": "rule", "rules": {"expected": str(tmp_path / "keep")}})
    assert judge(task, judges, cache_dir=tmp_path / "keep").score == 1.0
    assert (tmp_path / "keep").is_dir()


GENERATED = '''
import os


def get_note(config):
    with open(os.path.join(os.path.expanduser("~"), config["name"])) as handle:
        return handle.read().strip()


def note_says(result, expected, word="done"):
    return 1.0 if result == word else 0.0
'''


def test_generated_code_runs_through_the_judge_executor(judges, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from plugins.judges.options import SandboxOptions
    from plugins.judges.sandbox import SandboxExecutor

    home = tmp_path / "home"
    home.mkdir()
    (home / "note.txt").write_text("done\n")
    for path in (tmp_path, home):  # the sandboxed judge runs unprivileged: it must be able to enter the home
        os.chmod(path, 0o755)
    env = types.SimpleNamespace(client=None, env_id="gen", home_dir=home, isolated=False, screen_size=(1280, 800))
    task = make_task(func="note_says", result={"type": "note", "name": "note.txt"}, code=GENERATED)
    assert defined_functions(GENERATED) == {"get_note", "note_says"}
    executor = SandboxExecutor(SandboxOptions())
    judgement = judge(task, judges, env=env, executor=executor)
    assert (judgement.score, judgement.status) == (1.0, JudgementStatus.OK), judgement.error
    missing = make_task(func="note_says", result={"type": "note", "name": "absent.txt"}, code=GENERATED)
    gone = judge(missing, judges, env=env, executor=executor)
    assert (gone.score, gone.status) == (0.0, JudgementStatus.OK)  # FileNotFoundError -> 0, as OSWorld
    assert "absent.txt" in gone.details["metrics"][0]["file_not_found"]
    without = judge(task, judges, env=env, executor=None)
    assert without.status == JudgementStatus.CRASHED and "no judge executor" in without.error


def test_last_action_forms() -> None:
    assert last_action_failed(Action(type=ActionType.FAIL))
    assert not last_action_failed(Action(type=ActionType.DONE))
    assert last_action_failed(" fail ") and not last_action_failed("DONE")
    assert last_action_failed({"action_type": "FAIL"}) and not last_action_failed(None)


def test_relative_reference_files_resolve_against_the_task_file(judges, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "gold.txt").write_text("42\n")
    (tmp_path / "answer.txt").write_text("42\n")
    task = make_task(func="compare_text_file",
                     result={"type": "cloud_file", "path": (tmp_path / "answer.txt").as_uri(), "dest": "answer.txt"},
                     expected={"type": "cloud_file", "path": "assets/gold.txt", "dest": "gold.txt"})
    unplaced = judge(task, judges)
    assert unplaced.status == JudgementStatus.CRASHED and "needs the task's directory" in unplaced.error
    task._source_dir = str(tmp_path)
    assert judge(task, judges).score == 1.0
