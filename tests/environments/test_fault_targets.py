"""What bench/faults.py's injector (bench/faultkit/injector.py) aims at exists where it looks: a real local desktop's X server, probe and
task application are found in /proc by the run id, and killing the X server under a live episode is an
environment failure at the next call (so the loop retries the episode instead of scoring it)."""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from pathlib import Path

import pytest

from core.errors import EnvironmentFailure
from core.types import Action, ActionType, Task
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions
from tests.bench_modules import load_bench

pytestmark = pytest.mark.desktop

def _bench():
    return load_bench("faultkit/injector.py")


def test_the_injector_finds_each_kind_and_a_killed_x_server_fails_the_next_call() -> None:
    faults = _bench()
    run_dir = Path(tempfile.mkdtemp(prefix="faulttarget-"))
    task = Task.model_validate({"id": "t", "instruction": "x", "evaluator": {"func": "infeasible"},
                                "config": [{"type": "launch", "parameters": {"command": ["xterm", "-T", "agent"]}}]})

    async def body() -> tuple[dict, str, BaseException | None]:
        backend = LocalDesktopBackend(LocalDesktopOptions(max_environments=1, settle_s=0.1), run_dir=run_dir)
        env = await backend.acquire()
        error: BaseException | None = None
        try:
            await env.reset(task)
            found = {}
            for _ in range(100):  # the launched xterm shows up in /proc a moment after reset returns
                found = faults.desktop_processes(run_dir.name)
                if found["application"]:
                    break
                await asyncio.sleep(0.1)
            (x_pid, _), = [v for v in found["x_server"] if v[1] == env.env_id]
            os.kill(x_pid, signal.SIGKILL)
            try:
                for _ in range(20):
                    await env.step(Action(type=ActionType.WAIT, duration=0.1))
            except EnvironmentFailure as exc:
                error = exc
            return found, env.env_id, error
        finally:
            await backend.release(env, discard=True)
            await backend.close()

    found, env_id, error = asyncio.run(body())
    for kind in ("x_server", "probe", "application"):
        assert [e for _, e in found[kind]] == [env_id], (kind, found)
    assert isinstance(error, EnvironmentFailure), "a dead X server must surface as an environment failure"
    procs, dirs = faults.leftovers(run_dir.name)
    assert not dirs
