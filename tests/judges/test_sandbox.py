"""The sandbox executor: scores, artifacts, local-desktop getters, limits, concurrency, logging, refusal."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from core.types import JudgementStatus
from plugins.judges.options import SandboxOptions
from plugins.judges.results import judgement_from_call
from plugins.judges.sandbox import RUNNER, SandboxExecutor, SandboxUnavailable, detect_isolation

from .conftest import DesktopHandle, leftover_processes, make_executor, run


TOLERANT = "def close(result, expected, tolerance=0.0):\n    return 1.0 if abs(result - expected) <= tolerance else 0.0\n"


@pytest.fixture(scope="module")
def sandbox() -> SandboxExecutor:
    return make_executor()


def test_namespaces_are_available_here():
    support = detect_isolation(sys.executable)
    assert support.namespaces, support.reason
    assert any(p.endswith("site-packages") for p in support.site_paths)


def test_an_isolation_probe_killed_from_outside_is_run_again(tmp_path):
    """A probe SIGKILLed by the OOM killer or an operator says nothing about the host: it is run again, and only a
    probe killed every time is reported, as killed (not as a host that cannot confine judges)."""
    marker = tmp_path / "killed-once"
    killed_once = tmp_path / "python-killed-once"
    killed_once.write_text(f'#!/bin/sh\n[ -e {marker} ] || {{ touch {marker}; kill -9 $$; }}\n'
                           f'exec {sys.executable} "$@"\n')
    always = tmp_path / "python-always-killed"
    always.write_text("#!/bin/sh\nkill -9 $$\n")
    for script in (killed_once, always):
        script.chmod(0o755)
    support = detect_isolation(str(killed_once))
    assert marker.exists() and support.namespaces, support.reason
    failed = detect_isolation(str(always))
    assert not failed.namespaces and "killed by signal 9" in failed.reason


def test_metric_scores_and_options(sandbox, host_guard):
    assert run(sandbox.run_metric(TOLERANT, "close", 1.0, 1.05, {"tolerance": 0.1})).value == 1.0
    call = run(sandbox.run_metric(TOLERANT, "close", 1.0, 1.5, {"tolerance": 0.1}))
    assert (call.status, call.value, call.error) == ("ok", 0.0, None)
    numpy_metric = "import numpy as np\n\ndef mean_close(result, expected):\n    return float(np.allclose(result, expected))\n"
    assert run(sandbox.run_metric(numpy_metric, "mean_close", [1, 2], [1, 2.0000001], {})).value == 1.0


def test_metric_reads_artifact_files_only_from_the_artifact_roots(host_guard, tmp_path):
    artifact = tmp_path / "result.json"
    artifact.write_text(json.dumps({"cells": ["A1", "B2"]}))
    code = "import json\n\ndef cells(result, expected):\n    return float(json.load(open(result))['cells'] == expected)\n"
    executor = make_executor(artifact_roots=[str(tmp_path)])
    assert run(executor.run_metric(code, "cells", str(artifact), ["A1", "B2"], {})).value == 1.0
    assert executor.sandbox.artifact_files({"a": [str(artifact), "/etc/passwd", "relative.txt"]}) == [str(artifact)]
    # By default only evaluation caches (<tmp>/scalecua-judge-*) hold artifacts.
    default = make_executor()
    call = run(default.run_metric(code, "cells", str(artifact), ["A1", "B2"], {}))
    assert call.status == "crashed" and call.error.startswith("FileNotFoundError")
    with tempfile.TemporaryDirectory(prefix="scalecua-judge-") as cache:
        fetched = Path(cache) / "sub" / "result.json"
        fetched.parent.mkdir()
        fetched.write_text(artifact.read_text())
        assert run(default.run_metric(code, "cells", str(fetched), ["A1", "B2"], {})).value == 1.0


def make_home(root: Path) -> Path:
    home = root / "desktop-home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "report.txt").write_text("quarterly numbers")
    private = home / "private"
    private.mkdir()
    (private / "notes.txt").write_text("not for judges")
    private.chmod(0o700)
    home.chmod(0o755)
    return home


GETTER = '''\
import os


def get_report(config):
    state = {"cwd": os.getcwd(), "home": os.environ["HOME"], "text": open(config["path"]).read()}
    for probe in ("private/notes.txt", "/etc/passwd"):
        try:
            open(probe).read()
            state[probe] = "readable"
        except OSError as exc:
            state[probe] = type(exc).__name__
    try:
        open("Documents/new.txt", "w").write("x")
        state["write"] = "written"
    except OSError as exc:
        state["write"] = exc.strerror
    return state
'''


def test_local_desktop_getter_reads_the_home_read_only(host_guard, tmp_path):
    home = make_home(tmp_path)
    env = DesktopHandle("local-0", isolated=False, home_dir=home)
    call = run(make_executor(validate_code=False).run_getter(GETTER, "get_report", env, {"path": "Documents/report.txt"}))
    assert call.status == "ok", call.error
    state = call.value
    assert state["text"] == "quarterly numbers"
    assert state["cwd"] == state["home"] == str(home.resolve())
    assert state["write"] == "Read-only file system"
    assert state["/etc/passwd"] == "FileNotFoundError"  # nothing else of the host is there
    # As root the judge runs under a throwaway uid: a 0700 directory of the home stays closed.
    assert state["private/notes.txt"] == ("PermissionError" if os.geteuid() == 0 else "readable")
    assert not (home / "Documents" / "new.txt").exists()


def test_getters_for_isolated_environments_need_the_in_environment_executor(sandbox, host_guard):
    env = DesktopHandle("docker-3", isolated=True, home_dir=None)
    call = run(sandbox.run_getter("def g(config):\n    return 1\n", "g", env, {}))
    assert call.status == "crashed" and "use judge.name: in-environment" in call.error


def test_bad_calls_are_reported_not_raised(sandbox, host_guard):
    call = run(sandbox.run_metric(TOLERANT, "close", b"bytes", 1.0, {}))
    assert call.status == "crashed" and "not JSON-serializable" in call.error
    call = run(sandbox.run_metric(TOLERANT, "close; import os", 1, 1, {}))
    assert call.status == "rejected" and "not a Python identifier" in call.error
    call = run(sandbox.run_metric(TOLERANT, "close", 1, 1, {"bad key": 1}))
    assert call.status == "crashed" and "identifier keys" in call.error
    call = run(sandbox.run_metric(TOLERANT, "missing", 1, 1, {}))
    assert call.status == "rejected" and "'missing' is not defined" in call.error


def test_failures_score_zero_and_are_logged_with_the_task_id(sandbox, host_guard):
    with capture_logs() as logs:
        call = run(sandbox.run_metric("def m(result, expected):\n    return 2.0\n", "m", 1, 1, {}, task_id="task-42"))
    assert call.status == "invalid_score"
    judgement = judgement_from_call(call)
    assert (judgement.score, judgement.status) == (0.0, JudgementStatus.INVALID_SCORE)
    failures = [entry for entry in logs if entry["event"].startswith("judge call failed")]
    assert failures and failures[0]["task_id"] == "task-42" and failures[0]["status"] == "invalid_score"
    assert judgement_from_call(run(sandbox.run_metric(TOLERANT, "close", 1, 1, {}))).score == 1.0


def test_cpu_limit_is_a_resource_limit(host_guard):
    executor = make_executor(validate_code=False, wall_timeout_s=120, cpu_time_s=1)  # the wall clock only bounds a hang
    code = "def burn(result, expected):\n    n = 0\n    while True:\n        n += 1\n"
    call = run(executor.run_metric(code, "burn", 1, 1, {}))
    assert call.status == "resource_limit" and "CPU-time limit" in call.error, call.error


def test_concurrency_is_bounded_and_calls_overlap(host_guard):
    sleeper = "import time\n\ndef slow(result, expected):\n    time.sleep(0.3)\n    return 1.0\n"
    executor = make_executor(max_concurrency=2)
    # Count the calls whose confined process is running: wrap the per-call supervisor coroutine (it runs the
    # real runner process, inside the executor's concurrency semaphore) and record every start and end.
    supervise, in_flight, peak, events = executor.sandbox._supervise, 0, 0, []

    async def counted(payload: bytes) -> dict:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        events.append(("start", in_flight))
        try:
            return await supervise(payload)
        finally:
            in_flight -= 1
            events.append(("end", in_flight))

    executor.sandbox._supervise = counted

    async def four() -> list:
        return await asyncio.gather(*(executor.run_metric(sleeper, "slow", 1, 1, {}) for _ in range(4)))

    calls = run(four())
    assert [c.status for c in calls] == ["ok"] * 4
    assert [kind for kind, _ in events].count("start") == 4 and in_flight == 0
    assert peak == 2, f"at most 2 calls may run at once and 2 should have overlapped; events: {events}"
    # the first two calls overlapped: the second started before the first ended
    assert events[:2] == [("start", 1), ("start", 2)], events


def test_cancelling_a_call_leaves_nothing_behind(host_guard):
    executor = make_executor(validate_code=False, wall_timeout_s=30)
    code = "import os\n\ndef stuck(result, expected):\n    os.fork()\n    while True:\n        pass\n"
    before = {entry.split(" ", 1)[0] for entry in leftover_processes()}

    async def cancel_once_running() -> None:
        task = asyncio.ensure_future(executor.run_metric(code, "stuck", 1, 1, {}))
        deadline = time.monotonic() + 20  # bounds a hang only; the call itself would time out after 30 s
        # running: the judge and the child it forked both spin (state R) among this process's descendants
        while len([e for e in leftover_processes() if e.split(" ", 1)[0] not in before and ", R" in e]) < 2:
            assert not task.done(), f"the call ended before it was cancelled: {task.result()}"
            assert time.monotonic() < deadline, f"the judge never started spinning: {leftover_processes()}"
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(cancel_once_running())


def test_refuses_to_start_without_isolation_unless_allowed(tmp_path):
    fake = tmp_path / "python-without-namespaces"
    fake.write_text("#!/bin/sh\necho '{\"status\": \"sandbox_error\", \"error\": \"unshare: Operation not permitted\"}'\n")
    fake.chmod(0o755)
    with pytest.raises(SandboxUnavailable) as info:
        SandboxExecutor(SandboxOptions(python=str(fake)))
    assert "unshare: Operation not permitted" in str(info.value) and "allow_unisolated" in str(info.value)
    executor = SandboxExecutor(SandboxOptions(python=str(fake), allow_unisolated=True))
    assert executor.sandbox.isolation == "none"


def run_unconfined(code: str, **limits: Any) -> dict:
    """One call of the runner in isolation mode ``none`` (the unsafe fallback), straight through its protocol."""
    with tempfile.TemporaryDirectory(prefix="scalecua-unconfined-") as workdir:
        os.chmod(workdir, 0o711)  # the throwaway uid must reach its scratch directory
        request = {"kind": "metric", "code": code, "function": "m", "args": [1, 1], "isolation": "none",
                   "workdir": workdir, "cwd": workdir, "limits": {"wall_timeout_s": 3, **limits}}
        done = subprocess.run([sys.executable, "-I", "-S", str(RUNNER)], input=json.dumps(request).encode(),
                              capture_output=True, timeout=60)
    return json.loads(done.stdout.decode().splitlines()[-1])


def test_unisolated_mode_still_limits_and_cleans_up(host_guard):
    assert run_unconfined("def m(r, e):\n    return 0.5\n")["value"] == 0.5
    assert run_unconfined("def m(r, e):\n    while True:\n        pass\n")["status"] == "timeout"
    if os.geteuid() == 0:  # a throwaway uid: RLIMIT_NPROC applies, root's files are closed, strays are swept
        orphan = "import os, time\n\ndef m(r, e):\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\n    return 1.0\n"
        assert run_unconfined(orphan)["status"] == "ok"  # host_guard checks the setsid'd child was killed
        bomb = run_unconfined("import os\n\ndef m(r, e):\n    while True:\n        os.fork()\n")
        assert bomb["status"] == "resource_limit", bomb
        shadow = run_unconfined("def m(r, e):\n    return len(open('/etc/shadow').read())\n")
        assert shadow["status"] == "crashed" and shadow["error"].startswith("PermissionError")


def test_a_task_id_bound_by_the_caller_is_kept_in_the_log(sandbox, host_guard):
    import structlog

    structlog.contextvars.bind_contextvars(task_id="bound-7")
    try:
        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
            run(sandbox.run_metric("def m(result, expected):\n    return -1\n", "m", 1, 1, {}))
    finally:
        structlog.contextvars.unbind_contextvars("task_id")
    assert [e["task_id"] for e in logs if e["event"].startswith("judge call failed")] == ["bound-7"]


def _supervisors() -> list[int]:
    """This process's sandbox supervisors (``python -I -S sandbox_runner.py`` children)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == os.getpid() and str(RUNNER).encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_a_supervisor_killed_from_outside_is_no_verdict_and_the_episode_is_retried(host_guard):
    """The OOM killer or an operator SIGKILLs the supervisor mid-judgement: that is an infrastructure failure
    (EnvironmentFailure: the episode loop retries the episode and never scores it), not the judge's crash."""
    import signal

    from core.errors import EnvironmentFailure
    from plugins.judges.sandbox import JudgeWorkerLost

    endless = "def metric(result, expected):\n    while True:\n        pass\n"
    executor = make_executor(wall_timeout_s=120.0, cpu_time_s=120)

    async def judge_and_kill() -> Exception | None:
        call = asyncio.ensure_future(executor.run_metric(endless, "metric", 1, 1, {}))
        while not _supervisors():  # the event: the supervisor exists
            await asyncio.sleep(0.05)
        for pid in _supervisors():
            os.kill(pid, signal.SIGKILL)
        try:
            await call
        except Exception as exc:
            return exc
        return None

    error = run(judge_and_kill())
    assert isinstance(error, JudgeWorkerLost) and isinstance(error, EnvironmentFailure), error
    assert "killed by signal 9" in str(error) and "retried" in str(error)
    # a judge that crashes on its own is still the judge's verdict: crashed, scored 0
    crashing = "def metric(result, expected):\n    raise ValueError('no')\n"
    assert run(executor.run_metric(crashing, "metric", 1, 1, {})).status == "crashed"
