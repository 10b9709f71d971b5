"""A rollout server that restarts mid-run: its answers are refused until the trainer's weights are pushed again.

Real servers on loopback (``plugins.serving``, in front of an in-process ``hf`` engine): a restart is the
server stopped and a fresh one, with the model's initial weights, started on the same port. What the remote
engine generates after the push again must equal what an in-process engine with the pushed weights generates.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
import torch

from core.interfaces import EngineRestarted, GenerationRequest
from core.runtime.episode import EpisodeDeps, _generate
from core.runtime.weights import EngineWeights
from core.weight_sync import sync_weights
from plugins.serving.server import EngineServer
from tests.rollout.serve_fixtures import hf_engine, record, remote_engine, text_prompt, tiny_policy


class _Trainer:
    """A trainer as far as a weight push sees one: it exports these (name, tensor) pairs as one bucket."""

    def __init__(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        self.weights = weights

    def export_weights(self) -> list[list[tuple[str, torch.Tensor]]]:
        return [self.weights]


def _perturbed(seed: int) -> list[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [(name, p.detach().clone() + 0.05 * torch.randn(p.shape, generator=generator))
            for name, p in hf_engine().model.named_parameters() if not name.startswith("model.visual.")]


def _request(seed: int = 5) -> GenerationRequest:
    _, model = tiny_policy()
    return GenerationRequest(prompt_ids=text_prompt(), images=[], max_new_tokens=10, temperature=0.8,
                             stop_ids=model.renderer().stop_ids, seed=seed)


class _Servers:
    """A server on one port that can be restarted (stopped, then a fresh one with initial weights started)."""

    def __init__(self) -> None:
        _, self.model = tiny_policy()
        self.server = self._start(0)
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        return int(urlsplit(self._url).port or 0)

    def _start(self, port: int) -> EngineServer:
        server = EngineServer(hf_engine(), self.model, served_model_name="tiny")
        self._url = server.start("127.0.0.1", port)
        return server

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server = self._start(self.port)

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def servers() -> Iterator[_Servers]:
    s = _Servers()
    try:
        yield s
    finally:
        s.server.stop()


def _direct(weights: list[tuple[str, torch.Tensor]], version: int) -> Any:
    engine = hf_engine()
    sync_weights(_Trainer(weights), engine, version)
    return engine


def test_a_restarted_server_is_refused_until_the_weights_are_pushed_again() -> None:
    weights = _perturbed(1)
    direct = _direct(weights, 3)
    [expected] = asyncio.run(_gen(direct, _request()))
    with servers() as s:
        engine = remote_engine(s.url, max_retries=0)
        keeper = EngineWeights(_Trainer(weights), engine)
        keeper.push(3)

        async def scenario() -> None:
            before = await engine.generate(_request())
            assert (before.ids, before.logprobs, before.weight_version) == (expected.ids, expected.logprobs, 3)
            s.restart()
            with pytest.raises(EngineRestarted, match="restarted during a generation") as first:
                await engine.generate(_request())
            assert first.value.version == 3 and engine.weight_version is None
            served = record(s.server, "POST", "/v1/completions")
            with pytest.raises(EngineRestarted, match="lost the weights of version 3"):
                await engine.generate(_request())  # refused before any request reaches the server
            assert served == []
            await keeper.restore()
            await keeper.restore()  # nothing left to restore: no second push
            after = await engine.generate(_request())
            assert (after.ids, after.logprobs, after.weight_version) == (expected.ids, expected.logprobs, 3)
            assert keeper.restores == 1 and len(served) == 1
            await engine.close()

        asyncio.run(scenario())


def test_a_generation_waits_for_a_restarting_server_and_the_episode_re_issues_it() -> None:
    """The server is down while a generation is sent: the request waits through the refused connections, the
    restarted server's answer is refused, the weights are pushed again and the same request answered."""
    weights = _perturbed(2)
    [expected] = asyncio.run(_gen(_direct(weights, 1), _request(seed=9)))
    with servers() as s:
        engine = remote_engine(s.url, max_retries=0, retry_backoff_s=0.01)
        keeper = EngineWeights(_Trainer(weights), engine)
        keeper.push(1)
        deps = EpisodeDeps(backend=None, engine=engine, renderer=None, segmenter=None, judge=None,  # type: ignore[arg-type]
                           settings=None, restore_weights=keeper.restore)  # type: ignore[arg-type]
        asyncio.run(_gen(engine, _request()))  # the engine knows the first server's process
        s.stop()

        async def scenario() -> Any:
            job = asyncio.ensure_future(_generate(deps, _request(seed=9)))
            while engine.restarts.identity.refusals == 0:  # the request meets the stopped server and waits for it
                assert not job.done(), "the generation did not wait for the server"
                await asyncio.sleep(0.01)
            s.start()
            try:
                return await job
            finally:
                await engine.close()

        answer = asyncio.run(scenario())
        assert (answer.ids, answer.logprobs, answer.weight_version) == (expected.ids, expected.logprobs, 1)
        assert keeper.restores == 1


def test_a_push_after_an_unnoticed_restart_joins_the_new_server() -> None:
    first, second = _perturbed(3), _perturbed(4)
    [expected] = asyncio.run(_gen(_direct(second, 2), _request()))
    with servers() as s:
        engine = remote_engine(s.url)
        sync_weights(_Trainer(first), engine, 1)
        s.restart()  # no generation in between: the push is the first to meet the new process
        sync_weights(_Trainer(second), engine, 2)
        [after] = asyncio.run(_gen(engine, _request(), close=True))
        assert (after.ids, after.logprobs, after.weight_version) == (expected.ids, expected.logprobs, 2)


def test_a_server_never_pushed_to_may_restart_freely() -> None:
    with servers() as s:
        engine = remote_engine(s.url)
        [before] = asyncio.run(_gen(engine, _request()))
        s.restart()
        [after] = asyncio.run(_gen(engine, _request(), close=True))
        assert (after.ids, after.weight_version) == (before.ids, None)


async def _gen(engine: Any, *requests: GenerationRequest, close: bool = False) -> list[Any]:
    try:
        return [await engine.generate(r) for r in requests]
    finally:
        if close:
            await engine.close()
