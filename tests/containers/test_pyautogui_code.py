"""Our actions as the pyautogui code OSWorld's VM runs: exact statements, and a round trip through the
pyautogui parser (:func:`environments.osworld_actions.from_pyautogui`) that lands within a pixel."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.types import Action, ActionType
from environments.actions import grid_to_pixels
from environments.containers.pyautogui_code import (
    PREFIX,
    action_code,
    command,
    pyautogui_key,
)
from environments.osworld_actions import from_pyautogui

SCREEN = (1920, 1080)


@pytest.mark.parametrize(("action", "code"), [
    (Action(type="left_click", x=500, y=500), "pyautogui.click(960, 540)"),
    (Action(type="right_click", x=0, y=1000), "pyautogui.rightClick(0, 1079)"),
    (Action(type="triple_click", x=250, y=250), "pyautogui.tripleClick(480, 270)"),
    (Action(type="left_mouse_down"), "pyautogui.mouseDown(button='left')"),
    (Action(type="left_mouse_up", x=500, y=500), "pyautogui.mouseUp(960, 540, button='left')"),
    (Action(type="left_click_drag", start_x=0, start_y=0, x=500, y=500),
     "pyautogui.moveTo(0, 0); pyautogui.dragTo(960, 540, duration=0.5, button='left')"),
    (Action(type="key", keys=["ctrl", "shift", "t"]), "pyautogui.hotkey('ctrl', 'shift', 't')"),
    (Action(type="key", keys=["Return"]), "pyautogui.press('enter')"),
    (Action(type="key", keys=["pgdn"]), "pyautogui.press('pagedown')"),
    (Action(type="key", keys=["super"]), "pyautogui.press('win')"),
    (Action(type="key", keys=["ctrl", "-"]), "pyautogui.hotkey('ctrl', '-')"),
    (Action(type="hold_key", keys=["shift", "a"], duration=0.25),
     ("pyautogui.keyDown('shift'); pyautogui.keyDown('a'); time.sleep(0.25); pyautogui.keyUp('a'); "
     "pyautogui.keyUp('shift')")),
    (Action(type="scroll", direction="up", amount=5, x=500, y=500), "pyautogui.scroll(5, 960, 540)"),
    (Action(type="scroll", direction="right", amount=2), "pyautogui.hscroll(2)"),
    (Action(type="type", text="x<y"),
     "pyautogui.write('x', interval=0.01); pyautogui.hotkey('shift', ','); pyautogui.write('y', interval=0.01)"),
])
def test_statements(action: Action, code: str) -> None:
    assert action_code(action, SCREEN) == code


@pytest.mark.parametrize("kind", ["wait", "screenshot", "cursor_position", "done", "fail"])
def test_actions_without_desktop_input_send_nothing(kind: str) -> None:
    assert command(Action(type=kind), SCREEN) is None


def test_command_is_upstreams_execute_payload() -> None:
    argv = command(Action(type="left_click", x=1, y=2), SCREEN, python="python3")
    assert argv == ["python3", "-c", PREFIX + "pyautogui.click(2, 2)"]
    assert PREFIX == "import pyautogui; import time; pyautogui.FAILSAFE = False; "


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        pyautogui_key("hyperdrive!")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40))
def test_typed_text_cannot_break_out_and_arrives_whole(text: str) -> None:
    code = action_code(Action(type="type", text=text), SCREEN)
    assert code is not None
    tree = ast.parse(code)  # valid Python whatever the text holds
    typed = []
    for statement in tree.body:
        call = statement.value  # type: ignore[attr-defined]
        assert isinstance(call, ast.Call) and call.func.attr in ("write", "hotkey")  # type: ignore[attr-defined]
        if call.func.attr == "write":  # type: ignore[attr-defined]
            typed.append(ast.literal_eval(call.args[0]))
        else:
            assert [ast.literal_eval(a) for a in call.args] == ["shift", ","]
            typed.append("<")
    assert "".join(typed) == text


points = st.integers(0, 1000)
pointer_actions = st.one_of(
    st.builds(lambda t, x, y: Action(type=t, x=x, y=y),
              st.sampled_from(["left_click", "right_click", "middle_click", "double_click", "triple_click",
                               "mouse_move"]), points, points),
    st.builds(lambda x, y: Action(type="left_click_drag", x=x, y=y), points, points),
    st.builds(lambda d, n, x, y: Action(type="scroll", direction=d, amount=n, x=x, y=y),
              st.sampled_from(["up", "down", "left", "right"]), st.integers(1, 20), points, points),
    st.builds(lambda keys: Action(type="key", keys=keys),
              st.lists(st.sampled_from(["ctrl", "alt", "shift", "enter", "esc", "tab", "f5", "a", "z", "1",
                                        "home", "end", "pageup", "delete", "space", "backspace"]),
                       min_size=1, max_size=3, unique=True)),
)


@settings(max_examples=300, deadline=None)
@given(pointer_actions, st.sampled_from([(1920, 1080), (1280, 800), (1280, 720)]))
def test_round_trip_through_the_pyautogui_parser_lands_within_a_pixel(action: Action, screen: tuple[int, int]) -> None:
    (back,) = from_pyautogui(action_code(action, screen) or "", screen)
    assert back.type == action.type
    if action.x is not None:  # within one pixel: the grid is coarser than the screen at its edges
        (bx, by), (ax, ay) = grid_to_pixels(back.x, back.y, screen), grid_to_pixels(action.x, action.y, screen)
        assert abs(bx - ax) <= 1 and abs(by - ay) <= 1
    if action.type == ActionType.SCROLL:
        assert (back.direction, back.amount) == (action.direction, action.amount)
    if action.type == ActionType.KEY:
        assert [pyautogui_key(k) for k in back.keys or []] == [pyautogui_key(k) for k in action.keys or []]
