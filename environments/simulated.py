"""``simulated``: a SIMULATION of desktops, for throughput and scale work -- no X server, no application.

Nothing here is a real desktop. Each "environment" is a few numbers: a reset and every step sleep for a
configured latency (uniform in a range, as OSWorld's 1-3 s per step), a step fails with a configured
probability (an :class:`~core.errors.EnvironmentFailure`, which the episode retries as for a crashed desktop),
and the judge draws the outcome from a per-task success model. Observations are one small synthetic PNG per
task. Use it to measure what the framework itself costs (the pool's scheduling overhead with 10,000 sessions
in one process, the asynchronous pipeline against slow environments), never to claim an agent's success.

Success model: an episode succeeds when its last action is ``done`` and a draw, seeded by the run seed, the
task and the episode's actions, falls under the task's rate (``metadata.simulated.success_rate`` in the task,
else ``success_rates[task_id]``, else ``success_rate``). The same actions always get the same verdict, so a
policy that behaves the same scores the same.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import itertools
import random
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.errors import EnvironmentFailure
from core.interfaces import Environment, EnvironmentBackend, JudgeServices
from core.types import Action, ActionType, Judgement, Observation, Screenshot, Task
from environments import action_formats, actions

__all__ = ["SimulatedBackend", "SimulatedEnvironment", "SimulatedOptions", "create_backend"]


class SimulatedOptions(BaseModel):
    """Options of the ``simulated`` environment backend (a simulation: see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    max_environments: int = Field(64, ge=1, le=1_000_000, description="most simulated sessions alive at once")
    step_latency_s: tuple[float, float] = Field((0.0, 0.0), description="[min, max] seconds each step takes "
                                                                        "(uniform); OSWorld-like: [1, 3]")
    reset_latency_s: tuple[float, float] = Field((0.0, 0.0), description="[min, max] seconds each reset takes")
    failure_rate: float = Field(0.0, ge=0, le=1, description="probability that a step fails like a crashed desktop")
    success_rate: float = Field(0.5, ge=0, le=1, description="default chance that an episode ending in done succeeds")
    success_rates: dict[str, float] = Field(default_factory=dict, description="per-task success chance (task id -> p)")
    width: int = Field(1280, ge=16, description="screen width the agent is told (coordinates are checked against it)")
    height: int = Field(800, ge=16, description="screen height the agent is told")
    image_size: tuple[int, int] = Field((64, 40), description="pixel size of the synthetic screenshot")
    seed: int = Field(0, description="seeds latencies, failures and verdicts")
    system_prompt: str | None = Field(None, description="the agent's system prompt (default: the full action space, "
                                                        "~700 tokens); a short one makes training cheaper")

    @model_validator(mode="after")
    def _check(self) -> SimulatedOptions:
        for name in ("step_latency_s", "reset_latency_s"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"{name} must be [min, max] with 0 <= min <= max, got [{low}, {high}]")
        bad = {k: v for k, v in self.success_rates.items() if not 0 <= v <= 1}
        if bad:
            raise ValueError(f"success_rates must lie in [0, 1]: {bad}")
        return self


def _screenshot(task_id: str, size: tuple[int, int]) -> Screenshot:
    from PIL import Image

    colour = tuple(hashlib.sha256(task_id.encode()).digest()[:3])
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return Screenshot(png=buffer.getvalue(), width=size[0], height=size[1])


class SimulatedEnvironment(Environment):
    """One simulated session (see the module docstring: nothing here is a desktop)."""

    isolated = True  # nothing to protect: generated getters may "run" here (the simulation has none)
    home_dir = None
    client = None

    def __init__(self, backend: SimulatedBackend, env_id: str) -> None:
        self.backend = backend
        self.env_id = env_id
        o = backend.options
        self.screen_size = (o.width, o.height)
        self.task: Task | None = None
        self.actions: list[Action] = []
        self.steps = 0
        #: the latency drawn for the last reset or step (what a benchmark subtracts to see the overhead)
        self.last_latency_s = 0.0

    async def reset(self, task: Task) -> Observation:
        self.last_latency_s = self.backend.latency(self.backend.options.reset_latency_s)
        await asyncio.sleep(self.last_latency_s)
        self.task, self.actions = task, []
        return self._observation()

    async def step(self, action: Action) -> Observation:
        if self.task is None:
            raise EnvironmentFailure(f"simulated session {self.env_id}: step before reset")
        self.last_latency_s = self.backend.latency(self.backend.options.step_latency_s)
        await asyncio.sleep(self.last_latency_s)
        self.steps += 1
        if self.backend.fails():
            raise EnvironmentFailure(f"simulated session {self.env_id}: injected step failure "
                                     f"(failure_rate={self.backend.options.failure_rate})")
        self.actions.append(action)
        return self._observation()

    async def observe(self) -> Observation:
        return self._observation()

    def _observation(self) -> Observation:
        task_id = self.task.id if self.task is not None else ""
        return Observation(screenshot=self.backend.screenshot(task_id),
                           text=f"simulated step {len(self.actions)}")


class SimulatedBackend(EnvironmentBackend):
    """A pool of simulated sessions (a simulation: see the module docstring)."""

    def __init__(self, options: SimulatedOptions) -> None:
        self.options = options
        self._rng = random.Random(options.seed)
        self._ids = itertools.count()
        self._idle: list[SimulatedEnvironment] = []
        self._alive = 0
        self._slots = asyncio.Semaphore(options.max_environments)
        self._screens: dict[str, Screenshot] = {}
        self._closed = False

    # -- pool ------------------------------------------------------------------

    async def acquire(self) -> SimulatedEnvironment:
        if self._closed:
            raise EnvironmentFailure("the simulated backend is closed")
        await self._slots.acquire()
        if self._idle:
            return self._idle.pop()
        self._alive += 1
        return SimulatedEnvironment(self, f"sim-{next(self._ids):06d}")

    async def release(self, env: Environment, *, discard: bool = False) -> None:
        if not isinstance(env, SimulatedEnvironment) or env.backend is not self:
            raise ValueError(f"environment {getattr(env, 'env_id', env)!r} does not belong to this backend")
        if discard:
            self._alive -= 1
        else:
            env.task, env.actions = None, []
            self._idle.append(env)
        self._slots.release()

    async def close(self) -> None:
        self._closed = True
        self._idle.clear()

    @property
    def size(self) -> int:
        return self._alive

    # -- the simulation's draws ------------------------------------------------------

    def latency(self, bounds: tuple[float, float]) -> float:
        low, high = bounds
        return low if low == high else self._rng.uniform(low, high)

    def fails(self) -> bool:
        return self.options.failure_rate > 0 and self._rng.random() < self.options.failure_rate

    def screenshot(self, task_id: str) -> Screenshot:
        shot = self._screens.get(task_id)
        if shot is None:
            shot = self._screens[task_id] = _screenshot(task_id, self.options.image_size)
        return shot

    def success_rate(self, task: Task) -> float:
        own = (task.metadata.get("simulated") or {}).get("success_rate")
        if own is not None:
            return float(own)
        return self.options.success_rates.get(task.id, self.options.success_rate)

    # -- the agent protocol (our tool-call format) ---------------------------------------

    def system_prompt(self, task: Task) -> str:
        if self.options.system_prompt is not None:
            return self.options.system_prompt
        return ("You are a computer-use agent in a SIMULATED desktop (a benchmark of the framework, no real "
                "application). Act step by step; end with done.\n\n"
                + actions.format_action_space(screen_size=(self.options.width, self.options.height)))

    def parse_response(self, text: str) -> list[Action]:
        return action_formats.parse_response(text, "tool_call", (self.options.width, self.options.height))

    def format_response(self, demonstrated: Sequence[Action]) -> str:
        return actions.format_response(demonstrated, "tool_call")

    async def evaluate(self, env: Environment, task: Task, *, judge: JudgeServices,
                       last_action: Action | None) -> Judgement:
        assert isinstance(env, SimulatedEnvironment)
        done = last_action is not None and last_action.type == ActionType.DONE
        if not done:
            return Judgement(score=0.0, details={"simulated": True, "reason": "the episode did not end with done"})
        digest = hashlib.sha256(f"{self.options.seed}|{task.id}|".encode()
                                + "|".join(a.model_dump_json() for a in env.actions).encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        rate = self.success_rate(task)
        return Judgement(score=1.0 if draw < rate else 0.0,
                         details={"simulated": True, "success_rate": rate, "draw": round(draw, 6)})


def create_backend(options: SimulatedOptions, **_: Any) -> SimulatedBackend:
    """Factory of the ``simulated`` backend (a simulation; context unused)."""
    return SimulatedBackend(options)
