"""The ``simulated`` backend (a SIMULATION of desktops, for scale and throughput work): pool, draws, judge, and
episodes through the real episode runner with the real tiny tokenizer's renderer and a scripted policy."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from core.runtime.episode import EpisodeDeps, EpisodeSettings, run_episode
from core.errors import EnvironmentFailure
from core.interfaces import Generation, GenerationRequest, RolloutEngine
from core.types import Action, ActionType, EpisodeStatus, Task
from core.interfaces import JudgeServices
from core.registry import Registry
from environments.simulated import SimulatedBackend, SimulatedOptions

DONE = Action(type=ActionType.DONE)


def task(task_id: str = "t", **simulated: float) -> Task:
    return Task(id=task_id, instruction="do it", evaluator={"func": "simulated"},
                metadata={"simulated": simulated} if simulated else {})


def backend(**options: object) -> SimulatedBackend:
    return SimulatedBackend(SimulatedOptions.model_validate(options))


async def episode(b: SimulatedBackend, t: Task, steps: list[Action]) -> float:
    env = await b.acquire()
    try:
        await env.reset(t)
        for action in steps:
            await env.step(action)
        judgement = await b.evaluate(env, t, judge=JudgeServices(Registry("getter"), Registry("metric")),
                                     last_action=steps[-1] if steps else None)
        return judgement.score
    finally:
        await b.release(env)


def test_the_pool_never_holds_more_sessions_than_allowed_and_reuses_released_ones() -> None:
    async def body() -> None:
        b = backend(max_environments=2)
        first, second = await b.acquire(), await b.acquire()
        third = asyncio.ensure_future(b.acquire())
        await asyncio.sleep(0)
        assert not third.done()  # both slots are taken
        await b.release(first)
        assert await third is first and b.size == 2
        await b.release(second, discard=True)
        assert b.size == 1
        with pytest.raises(ValueError, match="does not belong"):
            await backend().release(third.result())

    asyncio.run(body())


def test_verdicts_follow_the_task_rate_and_repeat_for_the_same_actions() -> None:
    b = backend(success_rate=0.3, success_rates={"easy": 0.9})

    async def body() -> None:
        scores = [await episode(b, task(), [Action(type=ActionType.TYPE, text=f"try {i}"), DONE])
                  for i in range(2000)]
        assert 0.26 < sum(scores) / len(scores) < 0.34
        easy = [await episode(b, task("easy"), [Action(type=ActionType.TYPE, text=f"try {i}"), DONE])
                for i in range(500)]
        assert sum(easy) / len(easy) > 0.85
        assert await episode(b, task(success_rate=1.0), [DONE]) == 1.0  # the task's own rate wins
        same = [Action(type=ActionType.TYPE, text="same"), DONE]
        assert len({await episode(b, task(), same) for _ in range(20)}) == 1
        assert await episode(b, task(success_rate=1.0), [Action(type=ActionType.WAIT)]) == 0.0  # never done

    asyncio.run(body())


def test_injected_failures_are_environment_failures_at_the_configured_rate() -> None:
    b = backend(failure_rate=0.25)

    async def body() -> int:
        env = await b.acquire()
        await env.reset(task())
        failures = 0
        for _ in range(2000):
            try:
                await env.step(Action(type=ActionType.WAIT))
            except EnvironmentFailure as exc:
                assert "injected step failure" in str(exc)
                failures += 1
        return failures

    assert 400 < asyncio.run(body()) < 600


def test_bad_options_name_the_problem() -> None:
    with pytest.raises(ValidationError, match=r"step_latency_s must be \[min, max\]"):
        SimulatedOptions(step_latency_s=(3.0, 1.0))
    with pytest.raises(ValidationError, match="success_rates must lie in"):
        SimulatedOptions(success_rates={"t": 1.5})
    with pytest.raises(ValidationError, match="Extra inputs"):
        SimulatedOptions.model_validate({"latency": 1})


def test_ten_thousand_concurrent_sessions_in_one_process() -> None:
    """AgentRL's published scale: 10,000 sessions alive at once, each reset, stepped and judged."""
    b = backend(max_environments=10_000, success_rate=1.0)

    async def body() -> list[float]:
        return await asyncio.gather(*(episode(b, task(f"t{i % 50}"), [Action(type=ActionType.WAIT), DONE])
                                      for i in range(10_000)))

    scores = asyncio.run(body())
    assert len(scores) == 10_000 and all(s == 1.0 for s in scores) and b.size == 10_000


class AlwaysDone(RolloutEngine):
    """A scripted policy: every response is a ``done`` tool call (no model weights)."""

    def __init__(self, renderer) -> None:  # type: ignore[no-untyped-def]
        self.renderer = renderer
        self.text = '<tool_call>\n{"name": "computer_use", "arguments": {"action": "done"}}\n</tool_call>'

    async def generate(self, request: GenerationRequest) -> Generation:
        ids = [*self.renderer.encode_text(self.text), self.renderer.stop_ids[0]]
        return Generation(ids=ids, logprobs=[0.0] * len(ids), text=self.text, finish_reason="stop")

    weight_version = None

    def begin_weight_update(self, version: int) -> None:
        raise TypeError("scripted")

    def update_weights(self, weights) -> None:  # type: ignore[no-untyped-def]
        raise TypeError("scripted")

    def commit_weight_update(self) -> None:
        raise TypeError("scripted")

    def abort_weight_update(self) -> None:
        return None


def test_episodes_run_through_the_real_episode_runner(plugins) -> None:
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    renderer = QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0)).renderer()
    b = plugins.registry("environment").create("simulated", {"success_rate": 1.0, "step_latency_s": [0.0, 0.001]})
    deps = EpisodeDeps(backend=b, engine=AlwaysDone(renderer), renderer=renderer,
                       segmenter=plugins.registry("segmenter").create("sliding-window", {}),
                       judge=JudgeServices.of(plugins),
                       settings=EpisodeSettings(max_turns=3, max_new_tokens=64))

    async def body() -> list:
        return await asyncio.gather(*(run_episode(task(f"t{i}"), deps, trajectory_id=f"r{i}", group_id="g")
                                      for i in range(8)))

    trajectories = asyncio.run(body())
    assert all(t.status == EpisodeStatus.COMPLETED and t.success for t in trajectories)
    assert all(t.segments and t.turns[0].actions[0].type == ActionType.DONE for t in trajectories)


def test_an_environment_fault_under_the_judge_is_retried_never_scored(plugins) -> None:
    """The desktop dying (an EnvironmentFailure from the judge's getters) or hanging past env_call_timeout_s while
    the episode is judged ends the episode as an environment error, like a fault during any other call: found by
    bench/faults.py, where such episodes used to be recorded with a crashed or timed-out judgement and a reward."""
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    renderer = QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0)).renderer()

    class FailingJudge(SimulatedBackend):
        def __init__(self, mode: str) -> None:
            super().__init__(SimulatedOptions(success_rate=1.0))
            self.mode = mode

        async def evaluate(self, env, task, **kwargs):
            if self.mode == "hang":
                await asyncio.Event().wait()
            raise EnvironmentFailure("probe unreachable: connection refused")

    for mode in ("dead", "hang"):
        deps = EpisodeDeps(backend=FailingJudge(mode), engine=AlwaysDone(renderer), renderer=renderer,
                           segmenter=plugins.registry("segmenter").create("sliding-window", {}),
                           judge=JudgeServices.of(plugins),
                           settings=EpisodeSettings(max_turns=3, max_new_tokens=64, env_call_timeout_s=0.5))
        traj = asyncio.run(run_episode(task("t"), deps, trajectory_id="r", group_id="g"))
        assert traj.status == EpisodeStatus.ENV_ERROR and traj.judgement is None and not traj.segments, mode
        assert ("timed out" if mode == "hang" else "connection refused") in traj.status_reason
