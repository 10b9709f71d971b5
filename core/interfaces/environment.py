"""Environment backends and the judge executors they evaluate with."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from core.types import Action, Judgement, Observation, Task

if TYPE_CHECKING:
    from core.registry import Registry


# ---------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------


class Environment(abc.ABC):
    """One live desktop reachable through the interaction probe protocol."""

    env_id: str
    screen_size: tuple[int, int]
    #: True when the desktop is sandboxed (container/VM): generated getters may run inside it.
    isolated: bool
    #: host path of the desktop user's home when the desktop shares this host, else None.
    home_dir: Path | None
    #: the probe client (:class:`environments.client.EnvironmentClient`)
    client: Any

    @abc.abstractmethod
    async def reset(self, task: Task) -> Observation:
        """Restore a clean state, run the task's setup steps, return the first observation."""

    @abc.abstractmethod
    async def step(self, action: Action) -> Observation:
        """Execute one action and return the observation after it."""

    @abc.abstractmethod
    async def observe(self) -> Observation: ...

    async def healthy(self) -> bool:
        return True


class EnvironmentBackend(abc.ABC):
    """A pool of environments of one kind; episodes acquire and release them."""

    @abc.abstractmethod
    async def acquire(self) -> Environment: ...

    @abc.abstractmethod
    async def release(self, env: Environment, *, discard: bool = False) -> None:
        """Return ``env``; ``discard`` when it misbehaved (it is replaced, never reused)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop every process/container this backend started."""

    # -- the agent protocol of this kind of environment -------------------------

    @abc.abstractmethod
    def system_prompt(self, task: Task) -> str:
        """The system prompt for an episode of ``task``: role, action space and output format."""

    @abc.abstractmethod
    def parse_response(self, text: str) -> list[Action]:
        """Actions in a model response; raise :class:`core.errors.ActionParseError` when unparsable."""

    def format_response(self, actions: Sequence[Action]) -> str:
        """A response in this backend's action format that :meth:`parse_response` reads back as ``actions``.

        Demonstrations (recorded oracles) are written with it. A backend whose action format cannot be
        written raises :class:`core.errors.ScaleCUAError` naming a format that can.
        """
        from core.errors import ScaleCUAError

        raise ScaleCUAError(f"environment backend {type(self).__name__} cannot write responses in its action "
                            "format, so it cannot record demonstrations; implement format_response()")

    @abc.abstractmethod
    async def evaluate(self, env: Environment, task: Task, *, judge: JudgeServices,
                       last_action: Action | None) -> Judgement:
        """Score ``env``'s final state for ``task`` with ``judge``'s getters, metrics and executor; never raises
        for a judge failure (an environment failure propagates: the episode is retried, not scored)."""

    def unsupported_steps(self, task: Task) -> list[str]:
        """The setup step types of ``task`` (``config`` and ``evaluator.postconfig``) this backend cannot run;
        checked for the whole pool before any desktop starts (:mod:`core.runtime.task_check`). Default: none."""
        return []

    def convert_task(self, raw: Mapping[str, Any]) -> Task:
        """Turn a task file's JSON into a :class:`Task` (OSWorld format by default)."""
        return Task.model_validate(raw)

    async def __aenter__(self) -> EnvironmentBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# ---------------------------------------------------------------------------
# Judges
# ---------------------------------------------------------------------------


@dataclass
class JudgeCall:
    """Outcome of running one piece of judge code. ``status`` uses JudgementStatus values."""

    status: str
    value: Any = None
    error: str | None = None
    duration_s: float = 0.0


class JudgeExecutor(abc.ABC):
    """Runs untrusted (generated) judge code: metrics on the host, getters where the env allows."""

    @abc.abstractmethod
    async def run_metric(
        self, code: str, function: str, result: Any, expected: Any, options: Mapping[str, Any], *,
        validate: bool = True,
    ) -> JudgeCall:
        """Call ``function(result, expected, **options)`` defined in ``code``; value is the score. ``validate``:
        check ``code`` with the rule validator first (a task's generated judge); False for the project's own
        registered code that must run isolated because of what it imports (the agent's program), not because
        of what it is."""

    @abc.abstractmethod
    async def run_getter(self, code: str, function: str, env: Environment, config: Mapping[str, Any]) -> JudgeCall:
        """Call ``function(config)`` defined in ``code`` against ``env``'s state; value is the artifact."""

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class JudgeServices:
    """What judging needs beside the desktop: one per run, built by the core, handed to
    :meth:`EnvironmentBackend.evaluate` by every stage that judges (the episode, the environment check, the
    VeriGen checker, a Ray environment worker).

    ``getters`` / ``metrics`` are the run's registries (a task's evaluator names resolve against them);
    ``executor`` runs generated judge code (``task.evaluator.code``), None where no ``judge`` slot is
    configured (such code then scores as crashed).
    """

    getters: Registry[Any]
    metrics: Registry[Any]
    executor: JudgeExecutor | None = None

    @classmethod
    def of(cls, plugins: Any, executor: JudgeExecutor | None = None) -> JudgeServices:
        """The services of ``plugins`` (a :class:`core.pluginmanager.Plugins`) with ``executor``."""
        return cls(plugins.registry("getter"), plugins.registry("metric"), executor)
