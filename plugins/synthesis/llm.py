"""An OpenAI-compatible chat client for the VeriGen roles: retries, timeouts, rate limits, cost accounting.

Every role talks to its own endpoint (``base_url`` + ``model``), so a proposer
can run on a large hosted model while the checker runs on a local vLLM server.
The API key is read from the environment variable named by ``api_key_env`` and
is never written to a config or a run directory.

The ``openai`` client's own retries are switched off: this module retries
(timeouts, connection errors, HTTP 429 and 5xx) with exponential backoff so
that every attempt is logged and counted, and so that a request waiting for a
rate-limit slot does not use up its timeout.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.errors import ConfigError, ScaleCUAError
from core.types import Screenshot

log = structlog.get_logger(__name__)


class LLMOptions(BaseModel):
    """How a role reaches its LLM (any OpenAI-compatible ``/v1/chat/completions`` endpoint)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field("https://api.openai.com/v1", description="endpoint root, ending in /v1")
    model: str = Field(..., min_length=1, description="model name the endpoint serves")
    api_key_env: str | None = Field(
        "OPENAI_API_KEY",
        description="name of the environment variable holding the API key; null for endpoints without keys",
    )
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(4096, ge=1, description="completion token limit per call")
    timeout_s: float = Field(180.0, gt=0, description="per-request timeout")
    max_retries: int = Field(4, ge=0, description="retries after timeouts, connection errors, HTTP 429/5xx")
    retry_backoff_s: float = Field(2.0, ge=0, description="first retry delay; doubles per retry (with jitter)")
    retry_backoff_max_s: float = Field(60.0, ge=0)
    max_concurrent_requests: int = Field(16, ge=1, description="requests in flight at once for this role")
    requests_per_minute: float | None = Field(None, gt=0, description="spacing between request starts; null: none")
    format_retries: int = Field(2, ge=0, description="re-asks when a reply cannot be parsed")
    price_prompt_per_1m: float = Field(0.0, ge=0, description="USD per 1M prompt tokens")
    price_completion_per_1m: float = Field(0.0, ge=0, description="USD per 1M completion tokens")


class LLMError(ScaleCUAError):
    """An LLM call failed for good (retries used up, or a non-retryable HTTP status)."""


class ReplyFormatError(ValueError):
    """A reply could not be parsed into what the role expects; the message is shown to the LLM."""


@dataclass
class Usage:
    """Token and cost accounting, per candidate and per run."""

    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    llm_seconds: float = 0.0
    by_role: dict[str, dict[str, float]] = field(default_factory=dict)

    def add_call(self, role: str, prompt: int, completion: int, cost: float, seconds: float) -> None:
        self.calls += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cost_usd += cost
        self.llm_seconds += seconds
        entry = self.by_role.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0})
        entry["calls"] += 1
        entry["prompt_tokens"] += prompt
        entry["completion_tokens"] += completion
        entry["cost_usd"] += cost

    def merge(self, other: Usage) -> None:
        self.calls += other.calls
        self.failed_calls += other.failed_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.llm_seconds += other.llm_seconds
        for role, entry in other.by_role.items():
            mine = self.by_role.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0})
            for key, value in entry.items():
                mine[key] += value

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "failed_calls": self.failed_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "llm_seconds": round(self.llm_seconds, 3),
            "by_role": self.by_role,
        }


class RateLimiter:
    """At most ``max_concurrent`` requests in flight, and request starts spaced by 60/``per_minute`` s."""

    def __init__(self, max_concurrent: int, per_minute: float | None = None):
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self._interval = 60.0 / per_minute if per_minute else 0.0
        self._next_start = 0.0
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> None:
        await self._semaphore.acquire()
        if self._interval:
            async with self._lock:
                now = time.monotonic()
                start = max(now, self._next_start)
                self._next_start = start + self._interval
            if start > now:
                await asyncio.sleep(start - now)

    async def __aexit__(self, *exc: object) -> None:
        self._semaphore.release()


def image_part(screenshot: Screenshot) -> dict[str, Any]:
    """A screenshot as an OpenAI ``image_url`` content part (inline PNG data URL)."""
    data = base64.b64encode(screenshot.png).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


def user_message(*parts: str | Screenshot | None) -> dict[str, Any]:
    """A user message interleaving text and screenshots (``None`` parts are skipped)."""
    content: list[dict[str, Any]] = []
    for part in parts:
        if part is None:
            continue
        content.append(image_part(part) if isinstance(part, Screenshot) else {"type": "text", "text": part})
    return {"role": "user", "content": content}


def resolve_api_key(api_key_env: str | None, *, where: str, environ: Any = None) -> str:
    environ = os.environ if environ is None else environ
    if api_key_env is None:
        return "EMPTY"  # OpenAI-compatible servers without authentication ignore the key
    value = environ.get(api_key_env)
    if not value:
        raise ConfigError(
            [
                f"{where}.api_key_env: the environment variable {api_key_env} is not set; export it "
                f"(export {api_key_env}=...) or set api_key_env: null for an endpoint without keys"
            ]
        )
    return value


class LLMClient:
    """One role's connection to its endpoint."""

    def __init__(self, options: LLMOptions, *, role: str, where: str | None = None, environ: Any = None):
        from openai import AsyncOpenAI

        self.options = options
        self.role = role
        key = resolve_api_key(options.api_key_env, where=where or f"synthesis.{role}.options", environ=environ)
        self._client = AsyncOpenAI(api_key=key, base_url=options.base_url, max_retries=0, timeout=options.timeout_s)
        self._limiter = RateLimiter(options.max_concurrent_requests, options.requests_per_minute)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        o = self.options
        return (prompt_tokens * o.price_prompt_per_1m + completion_tokens * o.price_completion_per_1m) / 1e6

    async def complete(self, messages: Sequence[dict[str, Any]], usage: Usage, *, temperature: float | None = None) -> str:
        """The assistant text for ``messages``; retries transient failures; records usage."""
        import openai

        o = self.options
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                async with self._limiter:
                    started = time.monotonic()
                    response = await self._client.chat.completions.create(
                        model=o.model,
                        messages=list(messages),
                        temperature=o.temperature if temperature is None else temperature,
                        max_tokens=o.max_tokens,
                        timeout=o.timeout_s,
                    )
            except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                    openai.InternalServerError) as exc:
                usage.failed_calls += 1
                if attempt >= o.max_retries:
                    raise LLMError(
                        f"{self.role}: {o.model} at {o.base_url} failed {attempt + 1} times; last error: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                delay = min(o.retry_backoff_max_s, o.retry_backoff_s * 2**attempt) * (0.5 + random.random() / 2)
                log.warning("llm call failed; retrying", role=self.role, attempt=attempt + 1, delay_s=round(delay, 2),
                            error=f"{type(exc).__name__}: {exc}")
                attempt += 1
                await asyncio.sleep(delay)
                continue
            except openai.APIStatusError as exc:
                usage.failed_calls += 1
                raise LLMError(
                    f"{self.role}: {o.model} at {o.base_url} refused the request (HTTP {exc.status_code}): "
                    f"{exc.message}. Check base_url, model and the API key in {o.api_key_env or '(no key)'}."
                ) from exc
            seconds = time.monotonic() - started
            prompt = getattr(response.usage, "prompt_tokens", 0) or 0
            completion = getattr(response.usage, "completion_tokens", 0) or 0
            usage.add_call(self.role, prompt, completion, self.cost(prompt, completion), seconds)
            if not response.choices:
                raise LLMError(f"{self.role}: {o.model} returned no choices")
            text = response.choices[0].message.content or ""
            log.debug("llm reply", role=self.role, prompt_tokens=prompt, completion_tokens=completion,
                      seconds=round(seconds, 3))
            return text

    async def complete_parsed(self, messages: Sequence[dict[str, Any]], parse: Any, usage: Usage) -> Any:
        """Call, then ``parse(text)``; on :class:`ReplyFormatError` re-ask with the problem, up to ``format_retries``."""
        history = list(messages)
        for attempt in range(self.options.format_retries + 1):
            text = await self.complete(history, usage)
            try:
                return parse(text)
            except ReplyFormatError as exc:
                if attempt >= self.options.format_retries:
                    raise
                log.info("reply unparsable; asking again", role=self.role, problem=str(exc)[:200])
                history = [
                    *history,
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": f"Your reply could not be used: {exc}\nReply again, following the "
                                                "required format exactly."},
                ]
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self._client.close()
