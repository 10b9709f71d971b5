"""The agent protocol and judging shared by the backends whose desktops run the probe (local-desktop,
container-desktop): system prompt, response parsing and writing in the configured action format, the setup
steps they can run, and OSWorld-style evaluation with their setup runner for postconfig.

A backend mixes it in; it reads ``self.options`` (``width``, ``height``, ``action_format``,
``scienceboard_actions``, ``system_prompt``).
"""

from __future__ import annotations

from typing import Any, Sequence

from core.interfaces import Environment, JudgeServices
from core.types import Action, Judgement, Task
from environments import action_formats, actions
from environments.setup import run_postconfig_steps, unsupported_step_types


class DesktopProtocol:
    options: Any

    def system_prompt(self, task: Task) -> str:
        o = self.options
        if o.system_prompt is not None:
            return o.system_prompt
        if o.action_format == "tool_call":
            space = actions.format_action_space(scienceboard=o.scienceboard_actions, screen_size=(o.width, o.height))
        elif o.action_format == "pyautogui":
            space = (f"You control a {o.width}x{o.height} Linux desktop. Answer with one ```python``` block of "
                     "pyautogui calls (absolute pixel coordinates), or with WAIT, FAIL or DONE.")
        else:
            space = (f"You control a {o.width}x{o.height} Linux desktop. Answer with one ```json``` block "
                     '{"action_type": ..., "parameters": {...}} (OSWorld computer_13), or with WAIT, FAIL or DONE.')
        return (
            "You are a computer-use agent. You see a screenshot of the desktop after every action and "
            "complete the user's task step by step. Think briefly, then act.\n\n" + space
        )

    def parse_response(self, text: str) -> list[Action]:
        return action_formats.parse_response(text, self.options.action_format, (self.options.width, self.options.height))

    def format_response(self, demonstrated: Sequence[Action]) -> str:
        return actions.format_response(demonstrated, self.options.action_format)

    def unsupported_steps(self, task: Task) -> list[str]:
        return unsupported_step_types(task)

    async def evaluate(self, env: Environment, task: Task, *, judge: JudgeServices,
                       last_action: Action | None) -> Judgement:
        from environments.judges.evaluate import evaluate  # judges load only when something is judged

        return await evaluate(task, env, judge=judge, last_action=last_action, postconfig=run_postconfig_steps)
