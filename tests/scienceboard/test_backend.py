"""The ``scienceboard`` backend without desktops: registration, options, agent protocol, initialize validation."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from core.errors import ActionParseError
from core.types import ActionType
from environments.scienceboard.backend import ScienceBoardOptions, parse_scienceboard
from environments.scienceboard.convert import convert_task
from environments.scienceboard.initialize import check_items
from environments.setup import SetupError


@pytest.fixture
def backend(plugins):  # type: ignore[no-untyped-def]
    created = plugins.registry("environment").create("scienceboard", {"max_environments": 1})
    yield created
    asyncio.run(created.close())


def test_registered_with_its_getters_and_metrics(plugins) -> None:  # type: ignore[no-untyped-def]
    assert "scienceboard" in plugins.registry("environment")
    assert {"scienceboard_last_action", "scienceboard_tex_check", "kalgebra_variables", "kalgebra_functions",
            "grass_command", "grass_gui_dump", "scienceboard_lean_check"} <= set(plugins.registry("getter").names())
    assert {"scienceboard_stop", "scienceboard_regex", "scienceboard_passed", "kalgebra_val", "kalgebra_var",
            "kalgebra_eqn", "scienceboard_predicate"} <= set(plugins.registry("metric").names())


def test_desktop_options_are_checked_with_the_config() -> None:
    with pytest.raises(ValidationError, match="Did you mean 'local-desktop'"):
        ScienceBoardOptions.model_validate({"desktop": {"name": "local-dekstop"}})
    with pytest.raises(ValidationError, match="options of local-desktop: acessibility: Extra inputs"):
        ScienceBoardOptions.model_validate({"desktop": {"name": "local-desktop", "options": {"acessibility": True}}})
    with pytest.raises(ValidationError, match="not scienceboard itself"):
        ScienceBoardOptions.model_validate({"desktop": {"name": "scienceboard"}})
    assert ScienceBoardOptions().desktop.options == {"accessibility": True}  # KAlgebra's judges need AT-SPI


def test_the_pool_size_reaches_the_desktop_backend(backend) -> None:  # type: ignore[no-untyped-def]
    assert backend.desktops.options.max_environments == 1 and backend.desktops.options.accessibility is True


def test_the_desktops_probes_serve_the_checkers_as_an_extension(backend, plugins) -> None:  # type: ignore[no-untyped-def]
    assert backend.desktops.options.probe_routes == ["environments.scienceboard.checkers"]
    mine = plugins.registry("environment").create("scienceboard", {"desktop": {
        "name": "local-desktop", "options": {"probe_routes": ["my_plugin.routes", "environments.scienceboard.checkers"]}}})
    try:  # the user's own extensions stay, the checkers are not added twice
        assert mine.desktops.options.probe_routes == ["my_plugin.routes", "environments.scienceboard.checkers"]
    finally:
        asyncio.run(mine.close())


def test_tasks_of_both_formats_load(backend) -> None:  # type: ignore[no-untyped-def]
    native = backend.convert_task({"id": "t", "type": "KAlgebra", "steps": 3, "instruction": "i",
                                   "evaluate": [{"type": "stop", "value": "DONE"}]})
    osworld = backend.convert_task({"id": "o", "instruction": "i", "evaluator": {"func": "infeasible"}})
    assert native.metadata["scienceboard"]["type"] == "KAlgebra" and "scienceboard" not in osworld.metadata


def test_system_prompt_offers_the_scienceboard_primitives(backend) -> None:  # type: ignore[no-untyped-def]
    task = convert_task({"type": "TeXstudio", "steps": 7, "instruction": "i",
                         "evaluate": [{"type": "stop", "value": "DONE"}]})
    prompt = backend.system_prompt(task)
    for text in ("answer: submit the answer", "write_file:", "done:", "fail:", "TeXstudio", "at most 7 steps",
                 "computer_use"):
        assert text in prompt
    actions = backend.parse_response('<tool_call>{"name": "computer_use", "arguments": '
                                     '{"action": "answer", "text": "21"}}</tool_call>')
    assert [(a.type, a.text) for a in actions] == [(ActionType.ANSWER, "21")]


def test_scienceboards_own_response_format() -> None:
    text = "I will click.\n```python\npyautogui.click(640, 400)\n```\nthen\n```\nWAIT 3\n```\n```\nANS 6765\n```"
    actions = parse_scienceboard(text, (1280, 800))
    assert [a.type for a in actions] == [ActionType.LEFT_CLICK, ActionType.WAIT, ActionType.ANSWER]
    assert (actions[0].x, actions[0].y, actions[1].duration, actions[2].text) == (500, 500, 3.0, "6765")
    assert [a.type for a in parse_scienceboard("```\nDONE\n```", (1280, 800))] == [ActionType.DONE]
    assert [a.type for a in parse_scienceboard("```FAIL```", (1280, 800))] == [ActionType.FAIL]
    with pytest.raises(ActionParseError, match="no action found"):
        parse_scienceboard("DONE", (1280, 800))
    with pytest.raises(ActionParseError, match="ANS needs the answer"):
        parse_scienceboard("```\nANS\n```", (1280, 800))


def test_unknown_initialize_functions_fail_before_anything_runs() -> None:
    with pytest.raises(SetupError) as info:
        check_items("KAlgebra", [{"func": "launch", "command": "kalgebra"}, {"func": "func_4d", "expr": "x"}])
    assert info.value.index == 1 and "unknown initialize function for a KAlgebra task" in info.value.reason
    assert "func_2d" in info.value.reason and "touch" in info.value.reason
    check_items("Lean", [{"func": "import", "libs": []}, {"func": "query", "expr": "theorem t : True := by"}])
