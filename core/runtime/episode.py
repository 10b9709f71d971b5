"""One episode: the agent loop between a rollout engine and a live environment.

The segmenter owns the model context: the engine generates from exactly the
token stream the segmenter keeps, and the same stream becomes the training
segments. Failures of the environment (crashed desktop, unreachable probe)
end the episode with status ``env_error``; the caller retries it on a fresh
environment and never scores it. Failures of our own components propagate.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

import structlog

from core.runtime import logs
from core.config import AlgorithmSection, RolloutSection
from core.errors import ActionParseError
from core.interfaces import (
    ChatRenderer,
    EngineRestarted,
    Environment,
    EnvironmentBackend,
    Generation,
    GenerationRequest,
    JudgeServices,
    RolloutEngine,
    Segmenter,
)
from core.types import Action, ActionType, EpisodeStatus, Judgement, Observation, Task, Trajectory, Turn

log = structlog.get_logger(__name__)
T = TypeVar("T")


class EnvironmentFault(Exception):
    """Raised inside the episode when the environment (not the agent, not our code) failed."""


_ALGORITHM, _LOOP = AlgorithmSection.model_fields, RolloutSection.model_fields


@dataclass
class EpisodeSettings:
    """What one episode needs of ``algorithm`` and ``rollout_loop`` (defaults: theirs, one source)."""

    max_turns: int = _ALGORITHM["max_turns"].default
    max_new_tokens: int = _ALGORITHM["max_new_tokens"].default
    max_seq_len: int = _ALGORITHM["max_seq_len"].default
    temperature: float = _ALGORITHM["temperature"].default
    top_p: float = _ALGORITHM["top_p"].default
    max_parse_failures: int = _ALGORITHM["max_parse_failures"].default
    #: greedy decoding (evaluations only: a greedy rollout has no spread for GRPO to learn from)
    greedy: bool = False
    env_call_timeout_s: float = _LOOP["env_call_timeout_s"].default
    episode_timeout_s: float = _LOOP["episode_timeout_s"].default


@dataclass
class EpisodeDeps:
    """Everything an episode needs, shared by all episodes of an iteration."""

    backend: EnvironmentBackend
    engine: RolloutEngine
    renderer: ChatRenderer
    segmenter: Segmenter
    judge: JudgeServices
    settings: EpisodeSettings
    #: pushes the trainer's weights again after the engine's server restarted (:mod:`core.runtime.weights`);
    #: None: an :class:`EngineRestarted` ends the run (it resumes from its last checkpoint)
    restore_weights: Callable[[], Awaitable[None]] | None = None


async def _env_call(what: str, awaitable: Awaitable[T], timeout_s: float) -> T:
    """Await an environment call; any failure becomes an :class:`EnvironmentFault`."""
    try:
        return await asyncio.wait_for(awaitable, timeout_s)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the environment's failure modes are open-ended (HTTP, X, processes)
        raise EnvironmentFault(f"{what}: {type(exc).__name__}: {exc}") from exc


def feedback_text(actions: list[Action], observation: Observation) -> str | None:
    """The loop's own text before the next screenshot (the cursor position after ``cursor_position``).

    The environment's text (command output, a refused action) is ``observation.text``, which the
    segmenter's observation message adds itself.
    """
    if any(a.type == ActionType.CURSOR_POSITION for a in actions) and "cursor" in observation.info:
        return f"Cursor position: {observation.info['cursor']}"
    return None


def parse_error_feedback(error: Exception) -> str:
    return f"Your last response could not be parsed: {error}"


async def run_episode(
    task: Task,
    deps: EpisodeDeps,
    *,
    trajectory_id: str,
    group_id: str,
    seed: int | None = None,
    on_turn: Callable[[Trajectory], None] | None = None,
) -> Trajectory:
    """Run one episode of ``task`` on an environment from the pool and judge its final state."""
    s = deps.settings
    traj = Trajectory(trajectory_id=trajectory_id, task_id=task.id, group_id=group_id)
    logs.bind(episode_id=trajectory_id, task_id=task.id)
    env: Environment | None = None
    discard = False
    started = time.monotonic()
    traj.metadata["started_at"] = time.time()
    try:
        env = await _env_call("acquire", deps.backend.acquire(), s.env_call_timeout_s)
        traj.metadata["env_id"] = env.env_id
        observation = await _env_call("reset", env.reset(task), s.env_call_timeout_s)
        traj.metadata["acted_at"] = time.time()  # the last environment call that returned (reset, step, observe)
        traj.metadata["env_id"] = env.env_id  # a reset may move to a fresh desktop (one that died during it)
        traj.initial_observation = observation
        if "recording" in observation.info:  # where the environment saves this episode's screen recording (an MP4)
            traj.metadata["recording"] = observation.info["recording"]
        context = deps.segmenter.start(
            renderer=deps.renderer,
            trajectory_id=trajectory_id,
            task_id=task.id,
            system_prompt=deps.backend.system_prompt(task),
            instruction=task.instruction,
            observation=observation,
        )
        last_action: Action | None = None
        parse_failures = 0
        traj.status, traj.status_reason = EpisodeStatus.INCOMPLETE, "turn limit"
        for index in range(s.max_turns):
            if time.monotonic() - started > s.episode_timeout_s:
                traj.status_reason = "episode timeout"
                break
            if context.num_tokens + s.max_new_tokens > s.max_seq_len:
                traj.status_reason = "context limit"
                break
            turn_started = time.monotonic()
            prompt_ids, images = context.prompt()
            generation = await _generate(
                deps,
                GenerationRequest(
                    prompt_ids=prompt_ids,
                    images=images,
                    max_new_tokens=s.max_new_tokens,
                    temperature=s.temperature,
                    top_p=s.top_p,
                    stop_ids=deps.renderer.stop_ids,
                    seed=None if seed is None else seed * 1000 + index,
                    greedy=s.greedy,
                )
            )
            context.add_response(generation.ids, generation.logprobs, generation.text)
            turn = Turn(index, generation.text, list(generation.ids), list(generation.logprobs),
                        weight_version=generation.weight_version)
            traj.turns.append(turn)
            try:
                actions = deps.backend.parse_response(generation.text)
            except ActionParseError as exc:
                parse_failures += 1
                turn.parse_error = str(exc)
                if parse_failures >= s.max_parse_failures:
                    traj.status_reason = f"{parse_failures} unparsable responses"
                    break
                observation = await _env_call("observe", env.observe(), s.env_call_timeout_s)
                turn.observation, turn.feedback = observation, parse_error_feedback(exc)
                traj.metadata["acted_at"] = time.time()
                context.add_observation(observation, turn.feedback)
                turn.duration_s = time.monotonic() - turn_started
                continue
            turn.actions = actions
            terminal = next((a for a in actions if a.is_terminal), None)
            for action in actions:
                if action.is_terminal:
                    break
                observation = await _env_call(f"step {action.type.value}", env.step(action), s.env_call_timeout_s)
                traj.metadata["acted_at"] = time.time()
                last_action = action
            turn.observation = observation
            turn.duration_s = time.monotonic() - turn_started
            if on_turn is not None:
                on_turn(traj)
            if terminal is not None:
                last_action = terminal
                traj.status, traj.status_reason = EpisodeStatus.COMPLETED, terminal.type.value
                if terminal.type == ActionType.ANSWER:
                    traj.metadata["answer"] = terminal.text
                break
            turn.feedback = feedback_text(actions, observation)
            context.add_observation(observation, turn.feedback)
        traj.segments = context.finish()
        oldest = traj.oldest_weight_version
        for segment in traj.segments:
            segment.weight_version = oldest
        judge_started = time.monotonic()
        traj.judgement = await _judge(deps, env, task, last_action, s)
        traj.metadata["judged_at"] = time.time()  # the outcome is fixed from here on (release follows)
        traj.metadata["judge_s"] = time.monotonic() - judge_started
    except EnvironmentFault as exc:
        discard = True
        traj.status, traj.status_reason = EpisodeStatus.ENV_ERROR, str(exc)
        traj.segments = []
        log.warning("environment failed; the episode will be retried", error=str(exc))
    finally:
        traj.metadata["duration_s"] = time.monotonic() - started
        if env is not None:
            try:
                await deps.backend.release(env, discard=discard)
            except Exception as exc:  # releasing a dead env must not hide the episode's outcome
                log.warning("releasing environment failed", error=str(exc))
        logs.unbind("episode_id", "task_id")
    return traj


#: restores one generation may wait for before its episode gives up (the server keeps restarting)
GENERATION_RESTORES = 3


async def _generate(deps: EpisodeDeps, request: GenerationRequest) -> Generation:
    """``deps.engine.generate(request)``; after a rollout-server restart, the weights are pushed again and the
    request re-issued (the same policy version answers it, so the episode goes on as if nothing happened)."""
    for attempt in range(GENERATION_RESTORES + 1):
        try:
            return await deps.engine.generate(request)
        except EngineRestarted as exc:
            if deps.restore_weights is None or attempt == GENERATION_RESTORES:
                raise
            log.warning("the rollout server lost the weights; pushing them again", error=str(exc),
                        attempt=attempt + 1)
            await deps.restore_weights()
    raise AssertionError("unreachable")


async def _judge(deps: EpisodeDeps, env: Environment, task: Task, last_action: Action | None,
                 s: EpisodeSettings) -> Judgement:
    try:
        return await asyncio.wait_for(
            deps.backend.evaluate(env, task, judge=deps.judge, last_action=last_action),
            s.env_call_timeout_s,
        )
    except asyncio.TimeoutError:
        # like every environment call past env_call_timeout_s: the desktop hung, the episode is retried
        raise EnvironmentFault(f"evaluate timed out after {s.env_call_timeout_s:g} s") from None
    except Exception as exc:
        # evaluate() must not raise for judge failures; if it does, the environment is at fault.
        raise EnvironmentFault(f"evaluate: {type(exc).__name__}: {exc}") from exc
