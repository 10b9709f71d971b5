"""EnvironmentClient error typing and protocol details, against the real probe and closed ports."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading

import pytest

from core.errors import EnvironmentFailure
from core.types import Action, ActionType
from environments.client import EnvironmentClient, ProbeConnectionError, ProbeError, ProbeUnavailableError
from tests.environments.desktop_fixtures import DesktopSession, desktop  # noqa: F401 (fixture)

pytestmark = pytest.mark.desktop


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_probe_is_an_environment_failure() -> None:
    async def body() -> None:
        async with EnvironmentClient(f"http://127.0.0.1:{closed_port()}") as client:
            await client.screenshot()

    with pytest.raises(ProbeConnectionError) as info:
        asyncio.run(body())
    assert isinstance(info.value, EnvironmentFailure) and info.value.status_code is None
    assert "cannot reach" in str(info.value)


def test_a_silent_server_times_out_as_an_environment_failure() -> None:
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        async def body() -> None:
            async with EnvironmentClient(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5) as client:
                await client.platform()

        # it gave up at its own 0.5 s deadline (the error says which), not at some other, longer limit
        with pytest.raises(ProbeConnectionError, match=r"timed out after 0\.5 s"):
            asyncio.run(body())


def test_a_probe_whose_desktop_is_gone_is_an_environment_failure() -> None:
    """A real HTTP server on loopback answering as the probe does once its X server died (503)."""
    class Gone(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b'{"status": "error", "reason": "the display cannot be captured: AssertionError()"}'
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gone)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def body() -> None:
        async with EnvironmentClient(f"http://127.0.0.1:{server.server_address[1]}") as client:
            await client.screenshot()

    try:
        with pytest.raises(ProbeUnavailableError, match="cannot be captured") as info:
            asyncio.run(body())
    finally:
        server.shutdown()
    assert isinstance(info.value, EnvironmentFailure) and info.value.status_code == 503


def test_refusals_carry_status_and_reason(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> None:
        await client.act(Action(type=ActionType.KEY, keys=["Hyper_Q"]))

    with pytest.raises(ProbeError) as info:
        desktop.run(body)
    assert info.value.status_code == 400 and not isinstance(info.value, EnvironmentFailure)
    assert info.value.endpoint == "/action" and "key failed" in info.value.reason


def test_a_wrong_token_fails_fast_even_while_waiting_for_readiness(desktop: DesktopSession) -> None:
    sent: list[str] = []

    async def body() -> None:
        async with EnvironmentClient(desktop.url, token="wrong") as client:
            async def record(request) -> None:  # every request the client puts on the wire
                sent.append(request.url.path)

            client._http.event_hooks["request"].append(record)
            await client.wait_ready(30)

    with pytest.raises(ProbeError) as info:
        asyncio.run(body())
    # the 401 itself, not "not ready within 30 s", after a single request: no retry while waiting
    assert info.value.status_code == 401 and not isinstance(info.value, ProbeConnectionError)
    assert sent == ["/screenshot"]


def test_wait_ready_gives_up_at_its_deadline() -> None:
    async def body() -> None:
        async with EnvironmentClient(f"http://127.0.0.1:{closed_port()}") as client:
            await client.wait_ready(0.5)

    with pytest.raises(ProbeConnectionError, match=r"not ready within 0\.5 s \(last error: .*cannot reach"):
        asyncio.run(body())


def test_concurrent_requests_share_one_client(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> list:
        return await asyncio.gather(*(client.screenshot() for _ in range(6)), client.execute(["echo", "x"]),
                                    client.screen_size())

    *shots, executed, size = desktop.run(body)
    assert all(s.startswith(b"\x89PNG") for s in shots)
    assert executed["output"] == "x\n" and size == (1280, 800)


def test_execute_with_verification(desktop: DesktopSession) -> None:
    async def body(client: EnvironmentClient) -> tuple[dict, dict]:
        passed = await client.execute_with_verification(
            "sleep 0.3; touch ~/flag", shell=True, verification={"command_success": "test -f ~/flag"},
            max_wait_time=5, check_interval=0.2)
        failed = await client.execute_with_verification(
            "true", verification={"window_exists": "no-such-window-zz"}, max_wait_time=0.5, check_interval=0.1)
        return passed, failed

    passed, failed = desktop.run(body)
    assert passed["status"] == "success" and passed["verification"] == "passed"
    assert failed["status"] == "verification_failed" and failed["verification"] == "failed"
