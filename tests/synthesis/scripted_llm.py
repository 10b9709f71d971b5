"""A scripted OpenAI-compatible LLM server on loopback — a test double for a hosted LLM API.

There is no LLM API on the development or CI machines, so the VeriGen tests
talk to this real HTTP server instead. It speaks the real protocol
(``POST /v1/chat/completions`` with OpenAI's request and response JSON,
including ``usage`` token counts, and ``GET /v1/models``) through the real
``openai`` client, but its replies are *scripted*: each :class:`Rule` matches
requests by model name (one per role in the tests) and by a substring of the
conversation, and replays its replies in order. Replies can also be HTTP
errors, delayed, or held until the client hangs up, to exercise retries,
timeouts and rate limits, or held until a file appears (an event outside the
server, such as a command typed on a desktop having run).

Token counts are deterministic: prompt tokens = whitespace-separated words of
every text part + 85 per image; completion tokens = words of the reply.
Every request is recorded (body, headers, arrival time) for assertions, and
``max_in_flight`` is the most requests ever being answered at once.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

IMAGE_TOKENS = 85
HOLD_LIMIT_S = 600.0


@dataclass
class Reply:
    """One scripted answer: assistant text, or an HTTP error status; optionally delayed.

    ``hold``: answer only once the client has closed the connection (it timed out, or its process died), or
    after ``HOLD_LIMIT_S`` (a bound on a hang, no test waits that long): a reply that is "too late" whatever
    the machine's speed.

    ``wait_for``: answer only once this file exists, and remove it then (so a rerun waits again); if it does
    not appear within ``wait_for_s`` (a bound on a hang), answer HTTP 504 saying so.
    """

    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    hold: bool = False
    wait_for: Path | None = None
    wait_for_s: float = 90.0


@dataclass
class Rule:
    """Answers requests for ``model`` (any if None) whose conversation contains ``contains`` (any if None).

    ``replies`` are used in order; the last one repeats when ``repeat_last``,
    otherwise an exhausted rule stops matching. ``respond`` computes a reply
    from the request body instead.
    """

    model: str | None = None
    contains: str | None = None
    replies: list[Reply | str] = field(default_factory=list)
    repeat_last: bool = False
    respond: Callable[[dict[str, Any]], Reply | str] | None = None
    used: int = 0

    def matches(self, body: dict[str, Any], text: str) -> bool:
        if self.model is not None and body.get("model") != self.model:
            return False
        if self.contains is not None and self.contains not in text:
            return False
        return self.respond is not None or self.used < len(self.replies) or (self.repeat_last and bool(self.replies))

    def next_reply(self, body: dict[str, Any]) -> Reply:
        if self.respond is not None:
            reply = self.respond(body)
        else:
            reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        return Reply(text=reply) if isinstance(reply, str) else reply


def conversation_text(body: dict[str, Any]) -> tuple[str, int]:
    """All text of a chat request, and how many images it carries."""
    texts: list[str] = []
    images = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "text":
                    texts.append(part.get("text", ""))
                elif part.get("type") == "image_url":
                    images += 1
    return "\n".join(texts), images


class ScriptedLLM:
    """The server; use as a context manager. ``base_url`` ends in ``/v1``."""

    def __init__(self, rules: list[Rule] | None = None):
        self.rules: list[Rule] = list(rules or [])
        self.requests: list[dict[str, Any]] = []
        #: (model, prompt_tokens, completion_tokens) of every successful answer
        self.usage: list[tuple[str, int, int]] = []
        #: requests being answered right now, and the most there ever were at once
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-llm", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *rules: Rule) -> None:
        with self._lock:
            self.rules.extend(rules)

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["body"].get("model") == model]

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any], Reply | None]:
        text, images = conversation_text(body)
        with self._lock:
            self.requests.append({"body": body, "headers": headers, "time": time.monotonic()})
            rule = next((r for r in self.rules if r.matches(body, text)), None)
            reply = rule.next_reply(body) if rule is not None else None
        if reply is None:
            last = text[-300:].replace("\n", " ")
            return 400, {"error": {"message": f"scripted server has no reply for model={body.get('model')!r}; "
                                              f"conversation ends with: {last}", "type": "invalid_request_error"}}, None
        if reply.status != 200:
            return reply.status, {"error": {"message": f"scripted HTTP {reply.status}", "type": "server_error"}}, reply
        prompt_tokens = len(text.split()) + IMAGE_TOKENS * images
        completion_tokens = len(reply.text.split())
        with self._lock:
            self.usage.append((body.get("model", ""), prompt_tokens, completion_tokens))
        payload = {
            "id": f"chatcmpl-scripted-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop",
                 "logprobs": None}
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        return 200, payload, reply

    def _started(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _finished(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                return

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

            def _hold(self) -> None:
                """Wait until the client closes the connection (or the server stops, or HOLD_LIMIT_S)."""
                deadline = time.monotonic() + HOLD_LIMIT_S
                while not server._closing.is_set() and time.monotonic() < deadline:
                    readable, _, _ = select.select([self.connection], [], [], 0.1)
                    if not readable:
                        continue
                    try:
                        if not self.connection.recv(1, socket.MSG_PEEK):
                            return  # the client hung up
                    except OSError:
                        return
                    time.sleep(0.05)  # it sent more (it should not, while waiting for this answer)

            def _appeared(self, reply: Reply) -> bool:
                """Wait until ``reply.wait_for`` exists, then remove it; False after ``reply.wait_for_s``."""
                assert reply.wait_for is not None
                deadline = time.monotonic() + reply.wait_for_s
                while not server._closing.is_set():
                    try:
                        reply.wait_for.unlink()
                        return True
                    except FileNotFoundError:
                        if time.monotonic() > deadline:
                            return False
                        time.sleep(0.05)
                return False

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    models = sorted({r.model for r in server.rules if r.model})
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError as exc:
                    self._send(400, {"error": {"message": f"invalid JSON: {exc}"}})
                    return
                server._started()
                try:
                    status, payload, reply = server._answer(body, {k.lower(): v for k, v in self.headers.items()})
                    if reply is not None and reply.delay_s:
                        time.sleep(reply.delay_s)
                    if reply is not None and reply.hold:
                        self._hold()
                    if reply is not None and reply.wait_for is not None and not self._appeared(reply):
                        status, payload = 504, {"error": {"message": f"scripted server: {reply.wait_for} did not "
                                                f"appear within {reply.wait_for_s:g} s", "type": "server_error"}}
                finally:
                    server._finished()  # before the answer goes out: the client cannot start another first
                self._send(status, payload)

        return Handler
