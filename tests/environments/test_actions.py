"""The agent's action format, the grid mapping, and OSWorld's pyautogui / computer_13 converters."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ActionParseError
from core.types import Action, ActionType
from environments.actions import (
    action_arguments,
    format_action,
    format_action_space,
    grid_to_pixels,
    parse_actions,
    pixels_to_grid,
    split_keys,
    xdotool_key,
)
from environments.action_formats import parse_response
from environments.osworld_actions import from_computer_13, from_pyautogui


def call(args: dict) -> str:
    return f'<tool_call>\n{json.dumps({"name": "computer_use", "arguments": args})}\n</tool_call>'


# -- the tool-call format ---------------------------------------------------------------


def test_parses_tool_calls_and_bare_action_blocks_in_order() -> None:
    text = (
        "<think>maybe <tool_call>{not json</tool_call></think> I will save.\n"
        + call({"action": "key", "keys": "ctrl+s"})
        + '<action>{"action": "left_click", "coordinate": [500, 300]}</action>'
    )
    assert parse_actions(text) == [
        Action(type=ActionType.KEY, keys=["ctrl", "s"]),
        Action(type=ActionType.LEFT_CLICK, x=500, y=300),
    ]


def test_aliases_from_qwen_and_scienceboard() -> None:
    assert parse_actions(call({"action": "terminate", "status": "success"})) == [Action(type=ActionType.DONE)]
    assert parse_actions(call({"action": "terminate", "status": "failure"})) == [Action(type=ActionType.FAIL)]
    assert parse_actions(call({"action": "scroll", "pixels": -5})) == [
        Action(type=ActionType.SCROLL, direction="down", amount=5)
    ]
    assert parse_actions(call({"action": "wait", "time": 2})) == [Action(type=ActionType.WAIT, duration=2)]
    # ScienceBoard puts write_file's path in "text"
    assert parse_actions(call({"action": "write_file", "text": "~/a.txt", "content": "x"})) == [
        Action(type=ActionType.WRITE_FILE, path="~/a.txt", content="x")
    ]


def test_an_unclosed_last_block_still_parses() -> None:
    text = call({"action": "type", "text": "hi"}).removesuffix("</tool_call>")
    assert parse_actions(text) == [Action(type=ActionType.TYPE, text="hi")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I clicked it.", "no action found"),
        ("<tool_call>{'action': 'left_click'}</tool_call>", "not valid JSON"),
        (call({"action": "teleport"}), "unknown action 'teleport'"),
        (call({"action": "left_click", "coordinate": [5, 5], "force": 1}), "unknown argument(s) ['force']"),
        (call({"action": "left_click", "coordinate": [1200, 5]}), "off the 0..1000 grid"),
        (call({"action": "left_click"}), 'left_click needs "coordinate"'),
        (call({"action": "double_click", "coordinate": "middle"}), "coordinate must be [x, y]"),
        (call({"action": "key", "keys": ["ctrl", "s?x"]}), "unknown key 's?x'"),
        (call({"action": "key"}), 'key needs "keys"'),
        (call({"action": "scroll", "direction": "down"}), "non-zero amount"),
        (call({"action": "type"}), "type needs text"),
        ('<tool_call>{"name": "browser", "arguments": {"action": "done"}}</tool_call>', "unknown tool 'browser'"),
        ("<tool_call>[1, 2]</tool_call>", "must be a JSON object"),
    ],
)
def test_unparsable_output_gets_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_actions(text)
    assert message in str(info.value)


grid = st.integers(0, 1000)
safe_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
keys = st.lists(st.sampled_from(["ctrl", "alt", "shift", "enter", "a", "Z", "5", "f5", "-", "Return"]), min_size=1,
                max_size=3)
actions = st.one_of(
    st.builds(Action, type=st.sampled_from([ActionType.LEFT_CLICK, ActionType.RIGHT_CLICK, ActionType.MIDDLE_CLICK,
                                            ActionType.DOUBLE_CLICK, ActionType.TRIPLE_CLICK, ActionType.MOUSE_MOVE]),
              x=grid, y=grid),
    st.builds(Action, type=st.just(ActionType.LEFT_CLICK_DRAG), x=grid, y=grid, start_x=grid, start_y=grid),
    st.builds(Action, type=st.sampled_from([ActionType.LEFT_MOUSE_DOWN, ActionType.LEFT_MOUSE_UP])),
    st.builds(Action, type=st.just(ActionType.KEY), keys=keys),
    st.builds(Action, type=st.just(ActionType.HOLD_KEY), keys=keys, duration=st.floats(0, 5)),
    st.builds(Action, type=st.just(ActionType.TYPE), text=safe_text),
    st.builds(Action, type=st.just(ActionType.SCROLL), direction=st.sampled_from(["up", "down", "left", "right"]),
              amount=st.integers(1, 20), x=grid, y=grid),
    st.builds(Action, type=st.sampled_from([ActionType.SCREENSHOT, ActionType.CURSOR_POSITION, ActionType.DONE,
                                            ActionType.FAIL])),
    st.builds(Action, type=st.just(ActionType.WAIT), duration=st.floats(0, 60)),
    st.builds(Action, type=st.just(ActionType.ANSWER), text=safe_text),
    st.builds(Action, type=st.just(ActionType.WRITE_FILE), path=st.just("~/out.txt"), content=safe_text),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(actions, min_size=1, max_size=3))
def test_formatting_then_parsing_gives_the_same_actions(batch: list[Action]) -> None:
    text = "Thinking...\n" + "\n".join(format_action(a) for a in batch)
    assert parse_actions(text) == batch


def test_every_action_is_documented_for_the_prompt() -> None:
    osworld = format_action_space()
    scienceboard = format_action_space(scienceboard=True)
    for kind in ActionType:
        assert f"- {kind.value}:" in scienceboard
        assert (f"- {kind.value}:" in osworld) == (kind not in (ActionType.ANSWER, ActionType.WRITE_FILE))
    assert "<tool_call>" in osworld and "1000x1000" in osworld
    # the example in the prompt parses
    example = osworld[osworld.index("<tool_call>"):osworld.index("</tool_call>") + len("</tool_call>")]
    assert parse_actions(example) == [Action(type=ActionType.LEFT_CLICK, x=500, y=300)]


# -- grid and keys ------------------------------------------------------------------------


@settings(max_examples=500)
@given(st.integers(0, 1279), st.integers(0, 799))
def test_pixels_survive_the_grid_within_one_pixel(px: int, py: int) -> None:
    gx, gy = pixels_to_grid(px, py, (1280, 800))
    back = grid_to_pixels(gx, gy, (1280, 800))
    assert abs(back[0] - px) <= 1 and abs(back[1] - py) <= 1


@given(grid, grid, st.sampled_from([(1280, 800), (1920, 1080), (800, 600)]))
def test_grid_points_land_on_the_screen(x: int, y: int, size: tuple[int, int]) -> None:
    px, py = grid_to_pixels(x, y, size)
    assert 0 <= px < size[0] and 0 <= py < size[1]


def test_grid_corners_and_centre() -> None:
    assert grid_to_pixels(0, 0, (1280, 800)) == (0, 0)
    assert grid_to_pixels(500, 500, (1280, 800)) == (640, 400)
    assert grid_to_pixels(1000, 1000, (1280, 800)) == (1279, 799)


def test_key_names_map_to_x_keysyms() -> None:
    assert [xdotool_key(k) for k in ["enter", "Esc", "ctrl", "cmd", "-", "pagedown", "F11", "a", "KP_Enter"]] == [
        "Return", "Escape", "ctrl", "super", "minus", "Next", "F11", "a", "KP_Enter"]
    assert split_keys("ctrl+shift+t") == ["ctrl", "shift", "t"]
    assert split_keys(["ctrl++"]) == ["ctrl", "+"]
    assert split_keys("+") == ["+"]
    with pytest.raises(ValueError, match="unknown key"):
        xdotool_key("ctrl s")


def test_action_arguments_use_the_documented_names() -> None:
    drag = Action(type=ActionType.LEFT_CLICK_DRAG, start_x=1, start_y=2, x=3, y=4)
    assert action_arguments(drag) == {"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [3, 4]}


# -- OSWorld pyautogui ---------------------------------------------------------------------


def test_pyautogui_code_becomes_actions_on_the_grid() -> None:
    code = (
        "import pyautogui, time\n"
        "pyautogui.click(640, 400)\n"
        "pyautogui.doubleClick(x=128, y=80)\n"
        "pyautogui.click(1279, 799, button='right')\n"
        "pyautogui.moveTo(0, 0, duration=0.5)\n"
        "pyautogui.dragTo(640, 400, duration=1.0, button='left')\n"
        "pyautogui.typewrite('hello <world>', interval=0.05)\n"
        "pyautogui.press(['tab', 'enter'])\n"
        "pyautogui.hotkey('ctrl', 'shift', 's')\n"
        "pyautogui.scroll(-3)\n"
        "pyautogui.hscroll(2, x=640, y=400)\n"
        "time.sleep(0.5)\n"
        "pyautogui.click()\n"
    )
    assert from_pyautogui(code) == [
        Action(type=ActionType.LEFT_CLICK, x=500, y=500),
        Action(type=ActionType.DOUBLE_CLICK, x=100, y=100),
        Action(type=ActionType.RIGHT_CLICK, x=999, y=999),
        Action(type=ActionType.MOUSE_MOVE, x=0, y=0),
        Action(type=ActionType.LEFT_CLICK_DRAG, x=500, y=500),
        Action(type=ActionType.TYPE, text="hello <world>"),
        Action(type=ActionType.KEY, keys=["tab"]),
        Action(type=ActionType.KEY, keys=["enter"]),
        Action(type=ActionType.KEY, keys=["ctrl", "shift", "s"]),
        Action(type=ActionType.SCROLL, direction="down", amount=3),
        Action(type=ActionType.SCROLL, direction="right", amount=2, x=500, y=500),
        Action(type=ActionType.WAIT, duration=0.5),
        Action(type=ActionType.LEFT_MOUSE_DOWN),
        Action(type=ActionType.LEFT_MOUSE_UP),
    ]
    assert from_pyautogui("DONE") == [Action(type=ActionType.DONE)]
    assert from_pyautogui(" FAIL ") == [Action(type=ActionType.FAIL)]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import os; os.system('rm -rf ~')", "os.system() is not a supported pyautogui action"),
        ("x = 5\npyautogui.click(x, 5)", "only pyautogui.<call>(...) statements"),
        ("pyautogui.click(x, 5)", "only literal arguments"),
        ("pyautogui.click(1, 2", "does not parse"),
        ("pyautogui.rightClick()", "without x, y cannot be expressed"),
        ("pyautogui.keyDown('shift')", "pyautogui.keyDown() is not a supported"),
        ("pyautogui.press('hyper key')", "unknown key"),
        ("import pyautogui", "contains no action"),
        ("pyautogui.click(1, 2, 3, 4, 5, 6, 7, 8)", "too many positional"),
    ],
)
def test_pyautogui_code_that_cannot_be_converted_is_refused(code: str, message: str) -> None:
    with pytest.raises(ActionParseError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        from_pyautogui(code)


# -- OSWorld computer_13 -------------------------------------------------------------------


def test_computer_13_actions_convert() -> None:
    items = [
        {"action_type": "MOVE_TO", "parameters": {"x": 640, "y": 400}},
        {"action_type": "CLICK", "parameters": {"button": "left", "x": 640, "y": 400, "num_clicks": 3}},
        {"action_type": "RIGHT_CLICK", "parameters": {"x": 0, "y": 0}},
        {"action_type": "MOUSE_DOWN", "parameters": {}},
        {"action_type": "DRAG_TO", "parameters": {"x": 1279, "y": 0}},
        {"action_type": "MOUSE_UP"},
        {"action_type": "SCROLL", "parameters": {"dx": -1, "dy": 4}},
        {"action_type": "TYPING", "parameters": {"text": "=SUM(A1:A3)"}},
        {"action_type": "PRESS", "parameters": {"key": "enter"}},
        {"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "c"]}},
        {"action_type": "WAIT"},
        "DONE",
    ]
    assert from_computer_13(items) == [
        Action(type=ActionType.MOUSE_MOVE, x=500, y=500),
        Action(type=ActionType.TRIPLE_CLICK, x=500, y=500),
        Action(type=ActionType.RIGHT_CLICK, x=0, y=0),
        Action(type=ActionType.LEFT_MOUSE_DOWN),
        Action(type=ActionType.LEFT_CLICK_DRAG, x=999, y=0),
        Action(type=ActionType.LEFT_MOUSE_UP),
        Action(type=ActionType.SCROLL, direction="left", amount=1),
        Action(type=ActionType.SCROLL, direction="up", amount=4),
        Action(type=ActionType.TYPE, text="=SUM(A1:A3)"),
        Action(type=ActionType.KEY, keys=["enter"]),
        Action(type=ActionType.KEY, keys=["ctrl", "c"]),
        Action(type=ActionType.WAIT),
        Action(type=ActionType.DONE),
    ]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"action_type": "KEY_DOWN", "parameters": {"key": "shift"}}, "KEY_DOWN is not supported"),
        ({"action_type": "JUMP"}, "unknown computer_13 action_type 'JUMP'"),
        ({"action_type": "SCROLL", "parameters": {}}, "non-zero dx or dy"),
        ({"action_type": "CLICK", "parameters": {"x": "a", "y": 1}}, "must be numbers"),
        ({"parameters": {}}, "action_type"),
    ],
)
def test_computer_13_refusals(item: dict, message: str) -> None:
    with pytest.raises(ActionParseError, match=message):
        from_computer_13(item)


def test_responses_in_each_format() -> None:
    assert parse_response(call({"action": "done"})) == [Action(type=ActionType.DONE)]
    assert parse_response("Click it.\n```python\npyautogui.click(640, 400)\n```", "pyautogui") == [
        Action(type=ActionType.LEFT_CLICK, x=500, y=500)]
    assert parse_response('```json\n{"action_type": "PRESS", "parameters": {"key": "esc"}}\n```', "computer_13") == [
        Action(type=ActionType.KEY, keys=["esc"])]
    with pytest.raises(ActionParseError, match="computer_13 actions are JSON"):
        parse_response("press escape", "computer_13")
    with pytest.raises(ValueError, match="unknown action format 'xml'"):
        parse_response("x", "xml")
