"""The ``tally`` environment backend: a pool of tally applications (:mod:`scalecua_tally.app`) in this process.

Task files are OSWorld-shaped JSON. Setup steps: ``{"type": "tally_set", "parameters": {"value": N}}``. The
evaluator: ``{"func": "tally_equals", "expected": {"value": N}}`` (1 when the tally shows N when the episode
ends with ``done``); an infeasible task expects ``{"func": "infeasible"}`` and the agent's ``fail``.

The agent acts in the tool-call format: ``<tool_call>{"name": "computer_use", "arguments": {"action":
"left_click", "coordinate": [500, 700]}}</tool_call>``; actions: left_click, key (up / down), wait, done, fail.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from core.errors import ActionParseError, EnvironmentFailure
from core.interfaces import Environment, EnvironmentBackend, JudgeServices
from core.types import Action, ActionType, Judgement, JudgementStatus, Observation, Task
from scalecua_tally.app import Tally

SETUP_STEPS = frozenset({"tally_set"})
KEYS = {"up": "plus", "down": "minus", "plus": "plus", "minus": "minus"}
TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
PROMPT = """You operate the tally application: a number and three buttons below it, "-", "+" and "reset".
Act with one tool call per step:
<tool_call>
{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 720]}}
</tool_call>
Coordinates are on a 1000x1000 grid over the screen. Actions: left_click (coordinate), key (keys: ["up"] or
["down"]), wait, done (the task is complete), fail (the task cannot be done)."""


class TallyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_environments: int = Field(8, ge=1, description="tally applications alive at once")
    width: int = Field(320, ge=64, description="screenshot width in pixels")
    height: int = Field(200, ge=64, description="screenshot height in pixels")


class TallyEnvironment(Environment):
    isolated = True  # nothing outside this process is reachable from it
    home_dir = None
    client = None

    def __init__(self, backend: TallyBackend, env_id: str) -> None:
        self.backend, self.env_id = backend, env_id
        self.screen_size = (backend.options.width, backend.options.height)
        self.app = Tally()

    async def reset(self, task: Task) -> Observation:
        self.app = Tally()
        for step in task.config:
            if step.type != "tally_set":
                raise EnvironmentFailure(f"tally {self.env_id}: setup step {step.type!r} is not one of "
                                         f"{sorted(SETUP_STEPS)} (task {task.id})")
            self.app.value = int(step.parameters["value"])
        return self._observe(None)

    async def step(self, action: Action) -> Observation:
        if action.type == ActionType.LEFT_CLICK:
            button = self.app.button_at(action.x, action.y)  # type: ignore[arg-type]  # checked by Action
            feedback = self.app.press(button) if button else f"nothing at ({action.x}, {action.y})"
        elif action.type == ActionType.KEY:
            key = "+".join(action.keys or []).lower()
            feedback = self.app.press(KEYS[key]) if key in KEYS else f"the key {key!r} does nothing here"
        elif action.type in (ActionType.WAIT, ActionType.DONE, ActionType.FAIL):
            feedback = ""
        else:
            feedback = f"{action.type.value} does nothing in the tally"
        await asyncio.sleep(0)  # a real backend awaits its desktop here
        return self._observe(feedback)

    async def observe(self) -> Observation:
        return self._observe(None)

    def _observe(self, feedback: str | None) -> Observation:
        return Observation(screenshot=self.app.render(*self.screen_size), text=feedback or None,
                           info={"value": self.app.value})


class TallyBackend(EnvironmentBackend):
    def __init__(self, options: TallyOptions) -> None:
        self.options = options
        self._slots = asyncio.Semaphore(options.max_environments)
        self._ids = itertools.count()
        self._idle: list[TallyEnvironment] = []

    async def acquire(self) -> TallyEnvironment:
        await self._slots.acquire()
        return self._idle.pop() if self._idle else TallyEnvironment(self, f"tally-{next(self._ids)}")

    async def release(self, env: Environment, *, discard: bool = False) -> None:
        if not isinstance(env, TallyEnvironment) or env.backend is not self:
            raise ValueError(f"environment {getattr(env, 'env_id', env)!r} does not belong to this tally backend")
        if not discard:
            self._idle.append(env)
        self._slots.release()

    async def close(self) -> None:
        self._idle.clear()

    def system_prompt(self, task: Task) -> str:
        return PROMPT

    def parse_response(self, text: str) -> list[Action]:
        calls = TOOL_CALL.findall(text)
        if not calls:
            raise ActionParseError("no <tool_call>{...}</tool_call> block in the response")
        out = []
        for raw in calls:
            try:
                arguments = dict(json.loads(raw)["arguments"])
                kind = ActionType(arguments.pop("action"))
                point = arguments.pop("coordinate", None)
                if point is not None:
                    arguments["x"], arguments["y"] = (int(v) for v in point)
                out.append(Action(type=kind, **arguments))
            except (ValueError, KeyError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                raise ActionParseError(f"unreadable tool call {raw[:80]!r}: {exc}") from None
        return out

    def format_response(self, actions: Sequence[Action]) -> str:
        calls = []
        for action in actions:
            arguments: dict[str, Any] = {"action": action.type.value}
            if action.x is not None:
                arguments["coordinate"] = [action.x, action.y]
            if action.keys:
                arguments["keys"] = action.keys
            calls.append("<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments})
                         + "\n</tool_call>")
        return "\n".join(calls)

    def unsupported_steps(self, task: Task) -> list[str]:
        steps = [*task.config, *task.evaluator.postconfig]
        return sorted({step.type for step in steps if step.type not in SETUP_STEPS})

    async def evaluate(self, env: Environment, task: Task, *, judge: JudgeServices,
                       last_action: Action | None) -> Judgement:
        """The task's getter and metric, resolved by name in the run's registries; the episode must end with
        ``done`` (``fail`` for an infeasible task)."""
        assert isinstance(env, TallyEnvironment)
        ev = task.evaluator
        if ev.func == "infeasible":
            failed = last_action is not None and last_action.type == ActionType.FAIL
            return Judgement(score=1.0 if failed else 0.0, details={"infeasible": True})
        if not (isinstance(ev.func, str) and isinstance(ev.result, dict) and isinstance(ev.options, dict)):
            return Judgement(score=0.0, status=JudgementStatus.CRASHED,
                             error=f"task {task.id}: the tally judges one metric on one getter's result "
                                   "(func: NAME, result: {type: GETTER}, options: {...})")
        try:
            result = await judge.getters.get(ev.result["type"]).factory(env, ev.result)
            score = float(judge.metrics.get(ev.func).factory(result, None, **ev.options))
        except Exception as exc:  # a judge failure is a verdict (crashed), never an exception
            return Judgement(score=0.0, status=JudgementStatus.CRASHED, error=f"{type(exc).__name__}: {exc}")
        done = last_action is not None and last_action.type == ActionType.DONE
        return Judgement(score=score if done else 0.0, details={"result": result, "done": done})


def create_backend(options: TallyOptions, **_context: Any) -> TallyBackend:
    return TallyBackend(options)
