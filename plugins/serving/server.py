"""``python -m plugins.serving --model DIR | --config FILE``: serve the in-process policy over vLLM's HTTP API.

The rollout engine (``hf`` by default, created through the registry) answers
the subset of the OpenAI/vLLM protocol that the ``openai-compatible`` engine
uses, so that engine and vLLM's weight-update protocol are exercised against a
real server on any machine:

* ``POST /v1/completions`` (token-id prompts), ``POST /v1/chat/completions``,
  ``POST /v1/chat/completions/render`` and ``POST /inference/v1/generate``
  (vLLM's tokens-in/tokens-out pair), with ``return_token_ids`` and
  sampled-token ``logprobs`` (at the request's temperature, as vLLM's
  ``--logprobs-mode processed_logprobs``); ``GET /v1/models``, ``GET /health``.
* ``POST /init_weight_transfer_engine``, ``/start_weight_update``,
  ``/update_weights``, ``/finish_weight_update`` (data plane: Gloo, see
  :mod:`plugins.serving.weight_transfer`), ``POST /pause`` / ``/resume``,
  ``GET /is_paused``, ``GET /get_world_size``.

Every answer names the server process in an ``X-ScaleCUA-Instance`` header (a fresh id at every start), so
the ``openai-compatible`` engine sees that a restarted server, holding the weights it loaded at start rather
than those the trainer pushed, answers, refuses its generations and has the weights pushed again.

Differences from vLLM: one choice per request, no streaming, sampling only
(temperature 0: greedy, as vLLM); ``/pause`` always waits for in-flight requests (an
in-process generation cannot be aborted); with ``--api-key`` every route but
``/health`` needs the key (vLLM guards only ``/v1``). Binds to 127.0.0.1
unless told otherwise: the weight routes let any caller replace the model, so
a server bound beyond loopback without a key still serves generation but
refuses them (``/pause``, ``/resume`` and the four weight-update routes: 403).
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import ipaddress
import json
import os
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence
from urllib.parse import parse_qs, urlsplit

import structlog

from plugins.serving import protocol as proto
from core.errors import ConfigError
from core.interfaces import Generation, GenerationRequest, PolicyModel, RolloutEngine
from plugins.serving.protocol import BadRequest
from plugins.serving.gate import Gate
from plugins.serving.routes import CONTROL_ROUTES, Routes, WeightReceiver

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 512 << 20


class EngineServer:
    """An HTTP server (one thread per connection) in front of a rollout engine on its own event loop."""

    def __init__(self, engine: RolloutEngine, model: PolicyModel, *, served_model_name: str = "policy",
                 api_key: str | None = None, trust_request_chat_template: bool = False,
                 request_timeout_s: float = 3600.0, weight_timeout_s: float = 600.0) -> None:
        self.engine = engine
        self.renderer = model.renderer()
        self.vocab_size = model.vocab_size()
        self.banned_ids = tuple(model.suppressed_ids())
        self.model_name = served_model_name
        self.api_key = api_key
        self.trust_request_chat_template = trust_request_chat_template
        self.request_timeout_s = request_timeout_s
        self.instance = uuid.uuid4().hex  # sent with every answer (protocol.INSTANCE_HEADER)
        self.gate = Gate()
        self.weights = WeightReceiver(engine, self.gate, timeout_s=weight_timeout_s)
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, name="plugins.serving-engine", daemon=True)
        self._httpd: ThreadingHTTPServer | None = None
        self.exposed = False  # bound beyond loopback (set by start)
        self._http_thread: threading.Thread | None = None
        self.routes = Routes(self)

    def start(self, host: str = "127.0.0.1", port: int = 8000) -> str:
        """Start serving in background threads; returns the base URL (``port`` 0 picks a free port)."""
        self._loop_thread.start()
        handler = type("Handler", (_Handler,), {"server_app": self})
        self._httpd = _Listener((host, port), handler)
        self._http_thread = threading.Thread(target=self._httpd.serve_forever, name="plugins.serving-http", daemon=True)
        self._http_thread.start()
        bound_host, bound_port = self._httpd.server_address[:2]
        self.exposed = not ipaddress.ip_address(bound_host).is_loopback
        if self.exposed and self.api_key is None:
            log.warning("listening beyond loopback without an API key: generation is open, weight updates and "
                        "pause/resume are refused; pass --api-key (or $SCALECUA_SERVE_API_KEY) to allow them",
                        host=bound_host)
        log.info("serving", url=f"http://{bound_host}:{bound_port}", model=self.model_name)
        return f"http://{bound_host}:{bound_port}"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd.close_connections()  # kept-alive clients must not reach a stopped engine
        if self._loop_thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.engine.close(), self.loop).result(timeout=60)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._loop_thread.join(timeout=10)
        self.weights.close()

    def generate(self, request: GenerationRequest) -> Generation:
        with self.gate.generation():
            future = asyncio.run_coroutine_threadsafe(self.engine.generate(request), self.loop)
            try:
                return future.result(timeout=self.request_timeout_s)
            except ValueError as exc:  # the engine's own validation
                raise BadRequest(str(exc)) from None


class _Listener(ThreadingHTTPServer):
    """A threading HTTP server that can close its open (kept-alive) connections when it stops."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open: set[Any] = set()
        self._open_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        import socket

        with self._open_lock:
            open_now, self._open = list(self._open), set()
        for conn in open_now:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the client


class _Handler(BaseHTTPRequestHandler):
    server_app: EngineServer
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    disable_nagle_algorithm = True  # headers and body leave in separate writes; no 40 ms delayed-ACK stall

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        app = self.server_app
        url = urlsplit(self.path)
        try:
            if url.path != "/health" and app.api_key is not None and not self._authorized(app.api_key):
                self.close_connection = True  # the unread body must not be taken for the next request
                raise BadRequest("missing or wrong API key: send 'Authorization: Bearer <key>'", status=401)
            if app.api_key is None and app.exposed and url.path in CONTROL_ROUTES:
                self.close_connection = True
                raise BadRequest(f"{url.path} is refused: this server listens beyond loopback without an API key, "
                                 "and this route changes the served weights; restart it with --api-key KEY (or "
                                 "$SCALECUA_SERVE_API_KEY) and give the trainer's engine the same key", status=403)
            body = self._read_body() if method == "POST" else None
            route = app.routes.find(method, url.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            status, payload = route(body, query)
        except BadRequest as exc:
            status, payload = exc.status, proto.error_body(str(exc), exc.status, exc.param)
            log.info("request refused", path=url.path, status=status, reason=str(exc))
        except Exception as exc:  # the server stays up; the client learns what failed
            log.exception("request failed", path=url.path)
            status, payload = 500, proto.error_body(f"{type(exc).__name__}: {exc}", 500)
        self._send(status, payload)

    def _read_body(self) -> Any:
        length = self.headers.get("Content-Length")
        if length is None:
            if self.headers.get("Transfer-Encoding"):
                raise BadRequest("chunked request bodies are not supported; send Content-Length", status=411)
            return None
        size = int(length)
        if size > MAX_BODY_BYTES:
            self.close_connection = True
            raise BadRequest(f"request body of {size} bytes exceeds {MAX_BODY_BYTES}", status=413)
        raw = self.rfile.read(size)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"request body is not valid JSON: {exc}") from None

    def _authorized(self, key: str) -> bool:
        header = self.headers.get("Authorization", "")
        return header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), key.encode())

    def _send(self, status: int, payload: Any) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header(proto.INSTANCE_HEADER, self.server_app.instance)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout); nothing to tell it
            self.close_connection = True
            log.info("client went away before the answer", path=self.path, status=status)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("http", client=self.client_address[0], line=format % args)


def build_engine(args: argparse.Namespace) -> tuple[RolloutEngine, PolicyModel, str]:
    """The policy model and rollout engine the command line asks for, through the registries."""
    from core.pluginmanager import load_plugins

    try:
        engine_options: dict[str, Any] = json.loads(args.engine_options) if args.engine_options else {}
    except ValueError as exc:
        raise ConfigError([f"--engine-options is not JSON: {exc}"]) from None
    if args.config:
        from core.config import load_config

        resolved, plugins = load_config(args.config, args.overrides, required=("model",))
        try:
            model = resolved.create("model", plugins, run_dir=None)
        except (OSError, ValueError) as exc:
            raise ConfigError([f"model: {exc}"]) from None
        rollout = resolved.config.rollout
        if rollout is not None and rollout.name == args.engine and not args.engine_options:
            engine_options = dict(rollout.options or {})
        name = args.served_model_name or str(getattr(getattr(model, "options", None), "path", None) or "policy")
    else:
        if args.overrides:
            raise ConfigError([f"KEY=VALUE overrides ({' '.join(args.overrides)}) need --config"])
        plugins = load_plugins()
        try:
            model = plugins.registry("model").create(args.family, {"path": args.model})
        except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise ConfigError([f"--model {args.model}: {exc}"]) from None
        name = args.served_model_name or args.model
    try:
        engine = plugins.registry("rollout_engine").create(args.engine, engine_options, model=model, seed=args.seed)
    except (OSError, ValueError) as exc:
        raise ConfigError([f"--engine {args.engine}: {exc}"]) from None
    return engine, model, name


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m plugins.serving", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="local Hugging Face model directory")
    source.add_argument("--config", "-c", help="YAML config whose model slot (and rollout options) to serve")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides (with --config)")
    parser.add_argument("--family", default="qwen-vl", help="model family for --model (default: qwen-vl)")
    parser.add_argument("--engine", default="hf", help="in-process rollout engine (default: hf)")
    parser.add_argument("--engine-options", help="JSON options of the engine (default: the config's, or none)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: a free one; the URL is printed)")
    parser.add_argument("--api-key", default=os.environ.get("SCALECUA_SERVE_API_KEY"),
                        help="require 'Authorization: Bearer KEY' (default: $SCALECUA_SERVE_API_KEY)")
    parser.add_argument("--served-model-name", help="model id in /v1/models (default: the model path)")
    parser.add_argument("--trust-request-chat-template", action="store_true",
                        help="allow requests to bring their own chat_template (as vLLM's flag)")
    parser.add_argument("--seed", type=int, default=0, help="engine seed for requests without one")
    parser.add_argument("--weight-timeout", type=float, default=600.0, help="weight-transfer rendezvous timeout (s)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from core.runtime import logs

    args = parse_args(argv)
    logs.configure()
    engine, model, name = build_engine(args)
    server = EngineServer(engine, model, served_model_name=name, api_key=args.api_key,
                          trust_request_chat_template=args.trust_request_chat_template,
                          weight_timeout_s=args.weight_timeout)
    url = server.start(args.host, args.port)
    print(f"plugins.serving listening on {url}", flush=True)
    stop = threading.Event()
    _on_signals(stop.set)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


def _on_signals(callback: Callable[[], None]) -> None:
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: callback())


def run() -> int:
    from core.commands.cli import main_guard

    return main_guard(main)


if __name__ == "__main__":
    sys.exit(run())

