"""HTTP plumbing of the probe: stdlib ``ThreadingHTTPServer``, routing, auth, errors.

Why the standard library: the probe also runs inside containers and VMs next
to arbitrary desktops, so its dependencies stay at Python + pydantic + Pillow
+ mss. A thread per connection is plenty for one desktop's traffic.

Every failure becomes a JSON answer ``{"status": "error", "error": ..., "message": ...}`` (both keys carry
the reason: OSWorld's clients read ``error`` from some endpoints and its server writes ``message`` on others)
with a 4xx (the request was wrong) or 5xx (the desktop failed) status, or an endpoint's own OSWorld-shaped
body; a handler bug never takes the server down.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import threading
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import structlog

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 512 << 20
MAX_SERVED_BYTES = 512 << 20  # files the probe reads back (/file, /read) or downloads (/setup/download_file)
IDLE_CONNECTION_TIMEOUT_S = 300  # a silent client cannot hold a handler thread forever


class HTTPError(Exception):
    """Raised by handlers: becomes a JSON error answer with ``status``; ``body`` replaces the default error body
    where OSWorld's server answers that endpoint's failures in a shape of its own."""

    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.body = body


def error_body(reason: str) -> dict[str, Any]:
    return {"status": "error", "error": reason, "message": reason}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Any
    body: bytes

    def json(self) -> dict[str, Any]:
        if not self.body:
            return {}
        try:
            value = json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HTTPError(400, f"the request body is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise HTTPError(400, f"the request body must be a JSON object, got {type(value).__name__}")
        return value

    def form(self) -> dict[str, str]:
        """URL-encoded form fields (or a JSON object, which clients send too)."""
        content_type = self.headers.get("Content-Type", "")
        if content_type.startswith("application/json"):
            return {k: v for k, v in self.json().items() if isinstance(v, str)}
        if content_type.startswith("multipart/form-data"):
            return {k: v.decode("utf-8", "replace") for k, v in self.multipart().items()}
        try:
            fields = parse_qs(self.body.decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            raise HTTPError(400, "form fields must be UTF-8") from None
        return {k: v[0] for k, v in fields.items()}

    def multipart(self) -> dict[str, bytes]:
        """``multipart/form-data`` parts by field name."""
        content_type = self.headers.get("Content-Type", "")
        if not content_type.startswith("multipart/form-data"):
            raise HTTPError(400, f"expected multipart/form-data, got {content_type or 'no Content-Type'}")
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + self.body
        )
        if not message.is_multipart():
            raise HTTPError(400, "malformed multipart body")
        parts: dict[str, bytes] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if name:
                parts[str(name)] = part.get_payload(decode=True) or b""
        return parts

    def field(self, data: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        """``data[name]`` checked against ``kind``; a missing required field is a 400."""
        if name not in data or data[name] is None:
            if default is ...:
                raise HTTPError(400, f"missing required field {name!r}")
            return default
        value = data[name]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            expected = " or ".join(k.__name__ for k in _as_tuple(kind))
            raise HTTPError(400, f"field {name!r} must be {expected}, got {type(value).__name__}")
        return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


@dataclass
class Response:
    body: bytes = b""
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def json_response(value: Any, status: int = 200) -> Response:
    return Response(json.dumps(value).encode("utf-8"), status)


def text_response(text: str, status: int = 200) -> Response:
    return Response(text.encode("utf-8"), status, "text/plain; charset=utf-8")


Handler = Callable[[Any, Request], Response]


class ProbeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], routes: dict[tuple[str, str], Handler], state: Any, token: str | None):
        self.routes = routes
        self.state = state
        self.token = token
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _ProbeRequestHandler)


class _ProbeRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client, not one per request
    # headers and body go out in two writes; with Nagle on, the body waits for the client's delayed ACK (~40 ms)
    disable_nagle_algorithm = True
    timeout = IDLE_CONNECTION_TIMEOUT_S
    server: ProbeHTTPServer
    server_version = "scalecua-probe"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (signature from http.server)
        log.debug("probe request", message=format % args)

    def _dispatch(self, method: str) -> None:
        try:
            response = self._handle(method)
        except HTTPError as exc:
            response = json_response(exc.body if exc.body is not None else error_body(exc.reason), exc.status)
        except Exception as exc:  # a handler bug must not take the server down
            log.exception("probe handler failed", path=self.path)
            response = json_response(error_body(f"internal error: {exc!r}"), 500)
        self._send(response)

    def _handle(self, method: str) -> Response:
        url = urlsplit(self.path)
        self._check_token()
        body = self._read_body()
        routes = self.server.routes
        handler = routes.get((method, url.path))
        if handler is None:
            allowed = sorted(m for m, p in routes if p == url.path)
            if allowed:
                raise HTTPError(405, f"{url.path} takes {', '.join(allowed)}, not {method}")
            raise HTTPError(404, f"unknown endpoint {url.path}; see GET / for the list")
        request = Request(method, url.path, parse_qs(url.query), self.headers, body)
        return handler(self.server.state, request)

    def _check_token(self) -> None:
        token = self.server.token
        if token is None:
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            self._drain_body()
            raise HTTPError(401, "missing or wrong token: send 'Authorization: Bearer <token>'")

    def _content_length(self) -> int:
        raw = self.headers.get("Content-Length")
        if raw is None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                raise HTTPError(411, "chunked bodies are not supported: send Content-Length")
            return 0
        try:
            length = int(raw)
        except ValueError:
            raise HTTPError(400, f"bad Content-Length {raw!r}") from None
        if length < 0:
            raise HTTPError(400, f"bad Content-Length {raw!r}")
        return length

    def _read_body(self) -> bytes:
        length = self._content_length()
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # do not read a huge body just to discard it
            raise HTTPError(413, f"request body of {length} bytes exceeds {MAX_BODY_BYTES} bytes")
        body = self.rfile.read(length) if length else b""
        if len(body) != length:
            self.close_connection = True
            raise HTTPError(400, f"request body ended after {len(body)} of {length} bytes")
        return body

    def _drain_body(self) -> None:
        try:
            length = self._content_length()
        except HTTPError:
            length = 0
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)
        elif length:
            self.close_connection = True

    def _send(self, response: Response) -> None:
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for key, value in response.headers.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; nothing to tell it


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_in_thread(server: ProbeHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="probe-http", daemon=True)
    thread.start()
    return thread
