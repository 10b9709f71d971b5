"""The role LLM client against the scripted OpenAI-compatible server (see scripted_llm.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from core.errors import ConfigError
from plugins.synthesis.llm import LLMClient, LLMError, LLMOptions, ReplyFormatError, Usage

from .scripted_llm import Reply, Rule, ScriptedLLM


def run(client: LLMClient, coro_fn):
    """Run ``coro_fn()`` and close the client inside the same event loop."""

    async def main():
        try:
            return await coro_fn()
        finally:
            await client.close()

    return asyncio.run(main())


def options(server: ScriptedLLM, **overrides) -> LLMOptions:
    values = dict(base_url=server.base_url, model="judger", api_key_env="SCRIPTED_KEY", retry_backoff_s=0.01,
                  timeout_s=5.0)
    values.update(overrides)
    return LLMOptions(**values)


ENV = {"SCRIPTED_KEY": "sk-test-123"}


def test_usage_cost_key_and_parameters_reach_the_endpoint():
    with ScriptedLLM([Rule(model="judger", replies=["one two three"])]) as server:
        client = LLMClient(options(server, temperature=0.3, price_prompt_per_1m=2.0, price_completion_per_1m=10.0),
                           role="judger", environ=ENV)
        usage = Usage()
        text = run(client, lambda: client.complete([{"role": "user", "content": "hello there world"}], usage))
    assert text == "one two three"
    request = server.requests[0]
    assert request["headers"]["authorization"] == "Bearer sk-test-123"
    assert request["body"]["temperature"] == 0.3 and request["body"]["model"] == "judger"
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (1, 3, 3)
    assert usage.cost_usd == pytest.approx((3 * 2.0 + 3 * 10.0) / 1e6)
    assert usage.by_role["judger"]["calls"] == 1


def test_transient_errors_and_timeouts_are_retried():
    replies = [Reply(status=500), Reply(status=429), Reply(text="late", hold=True), "finally"]
    with ScriptedLLM([Rule(model="judger", replies=replies)]) as server:
        client = LLMClient(options(server, timeout_s=0.5, max_retries=3), role="judger", environ=ENV)
        usage = Usage()
        assert run(client, lambda: client.complete([{"role": "user", "content": "x"}], usage)) == "finally"
    assert usage.failed_calls == 3 and usage.calls == 1
    assert len(server.requests) == 4


def test_retries_run_out_with_a_clear_error():
    with ScriptedLLM([Rule(model="judger", replies=[Reply(status=503)], repeat_last=True)]) as server:
        client = LLMClient(options(server, max_retries=2), role="judger", environ=ENV)
        with pytest.raises(LLMError, match="failed 3 times"):
            run(client, lambda: client.complete([{"role": "user", "content": "x"}], Usage()))
    assert len(server.requests) == 3


def test_client_errors_are_not_retried():
    with ScriptedLLM([Rule(model="judger", replies=[Reply(status=401)], repeat_last=True)]) as server:
        client = LLMClient(options(server, max_retries=5), role="judger", environ=ENV)
        with pytest.raises(LLMError, match="HTTP 401.*SCRIPTED_KEY"):
            run(client, lambda: client.complete([{"role": "user", "content": "x"}], Usage()))
    assert len(server.requests) == 1


def test_missing_api_key_names_the_variable():
    with pytest.raises(ConfigError, match="SCRIPTED_KEY is not set"):
        LLMClient(LLMOptions(model="m", api_key_env="SCRIPTED_KEY"), role="judger", environ={})
    LLMClient(LLMOptions(model="m", api_key_env=None), role="judger", environ={})  # keyless endpoints are fine


def test_rate_limit_spaces_request_starts_and_bounds_concurrency():
    # each answer takes 0.35 s: without the concurrency bound, the rate alone would let three overlap
    with ScriptedLLM([Rule(model="judger", replies=[Reply(text="ok", delay_s=0.35)], repeat_last=True)]) as server:
        async def many() -> float:
            client = LLMClient(options(server, requests_per_minute=600, max_concurrent_requests=2), role="judger",
                               environ=ENV)
            await client.complete([{"role": "user", "content": "warm up"}], Usage())  # connection set-up
            started = time.monotonic()
            await asyncio.gather(*(client.complete([{"role": "user", "content": str(i)}], Usage()) for i in range(6)))
            await client.close()
            return started

        started = asyncio.run(many())
    assert len(server.requests) == 7
    # 600/min = one start per 0.1 s: the limiter schedules the k-th start at least k * 0.1 s after the first,
    # which starts no earlier than `started`, and a request reaches the server no earlier than it starts, so
    # the k-th arrival (k = 0..5) is at least k * 0.1 s after `started` however late any of them runs
    # (same clock: the server is a thread of this process)
    arrivals = sorted(r["time"] for r in server.requests[1:])
    late = [(k, round(t - started, 3)) for k, t in enumerate(arrivals) if t - started < k * 0.1 - 1e-3]
    assert not late, f"arrivals earlier than the rate allows (k, seconds after the first could start): {late}"
    # the server never answered more than two at once (it counts a request done before its answer goes out)
    assert server.max_in_flight <= 2, server.max_in_flight


def test_unparsable_replies_are_asked_again_with_the_problem():
    def parse(text: str) -> int:
        if not text.isdigit():
            raise ReplyFormatError("expected digits only")
        return int(text)

    with ScriptedLLM([Rule(model="judger", replies=["forty-two", "42"])]) as server:
        client = LLMClient(options(server), role="judger", environ=ENV)
        assert run(client, lambda: client.complete_parsed([{"role": "user", "content": "n?"}], parse, Usage())) == 42
        second = server.requests[1]["body"]["messages"]
    assert second[-2] == {"role": "assistant", "content": "forty-two"}
    assert "expected digits only" in second[-1]["content"]

    with ScriptedLLM([Rule(model="judger", replies=["nope"], repeat_last=True)]) as server:
        client = LLMClient(options(server, format_retries=1), role="judger", environ=ENV)
        with pytest.raises(ReplyFormatError):
            run(client, lambda: client.complete_parsed([{"role": "user", "content": "n?"}], parse, Usage()))
        assert len(server.requests) == 2
