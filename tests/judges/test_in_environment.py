"""The in-environment executor: getters run in the environment through ``run_python``; metrics stay sandboxed.

The environment here is a real HTTP server on loopback speaking OSWorld's
``/run_python`` (see :mod:`tests.judges.osworld_server`), driven by the real
:class:`environments.client.EnvironmentClient`; the executor only ever calls
``env.client.run_python``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from environments.client import EnvironmentClient
from plugins.judges.in_environment import InEnvironmentExecutor, getter_script, parse_run_python
from plugins.judges.options import InEnvironmentOptions

from .conftest import WORK_DIR, DesktopHandle, run
from .osworld_server import OSWorldRunPythonServer

READ_REPORT = '''\
import os


def get_report(config):
    with open(os.path.join("Documents", config["name"])) as handle:
        return {"text": handle.read(), "cwd": os.getcwd(), "home": os.environ["HOME"]}
'''


def executor(**options) -> InEnvironmentExecutor:
    # a generous wall-clock limit; the tests about limits set small ones for getters that never end
    return InEnvironmentExecutor(InEnvironmentOptions(**{"wall_timeout_s": 60.0, "work_dir": WORK_DIR, **options}))


@pytest.fixture
def vm_home(tmp_path: Path) -> Path:
    home = tmp_path / "vm-home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "report.txt").write_text("quarterly numbers")
    return home


def call_getter(code: str, function: str, home: Path, config: dict, *, server_timeout_s: float = 30.0, **options):
    async def go():
        with OSWorldRunPythonServer(home, timeout_s=server_timeout_s) as server:
            async with EnvironmentClient(server.url) as client:
                env = DesktopHandle("vm-1", isolated=True, home_dir=None, client=client)
                call = await executor(**options).run_getter(code, function, env, config, task_id="t-1")
                return call, server.requests

    return run(go())


def test_getter_runs_in_the_environment_home(vm_home, host_guard):
    (call, requests) = call_getter(READ_REPORT, "get_report", vm_home, {"name": "report.txt"})
    assert call.status == "ok", call.error
    assert call.value == {"text": "quarterly numbers", "cwd": str(vm_home), "home": str(vm_home)}
    assert requests == 1


def test_missing_file_keeps_the_file_not_found_marker(vm_home, host_guard):
    call, _ = call_getter(READ_REPORT, "get_report", vm_home, {"name": "absent.txt"})
    assert call.status == "crashed"
    assert call.error.startswith("FileNotFoundError")  # evaluations score this 0 like OSWorld


def test_rejected_getters_never_reach_the_environment(vm_home, host_guard):
    code = "import subprocess\n\ndef get_state(config):\n    return subprocess.check_output(['id']).decode()\n"
    call, requests = call_getter(code, "get_state", vm_home, {})
    assert call.status == "rejected" and "import of 'subprocess'" in call.error
    assert requests == 0


def test_limits_inside_the_environment(vm_home, host_guard):
    loop = "def get_state(config):\n    while True:\n        pass\n"
    call, _ = call_getter(loop, "get_state", vm_home, {}, wall_timeout_s=1.0)
    assert call.status == "timeout", call.error
    hog = "def get_state(config):\n    return len(bytearray(50 * 2**30))\n"
    call, _ = call_getter(hog, "get_state", vm_home, {})
    assert call.status == "resource_limit" and "MemoryError" in call.error
    server_limit = "import time\n\ndef get_state(config):\n    time.sleep(5)\n"
    call, _ = call_getter(server_limit, "get_state", vm_home, {}, server_timeout_s=1.0, wall_timeout_s=10.0)
    assert call.status == "timeout" and "run_python time limit" in call.error


def test_output_is_silenced_and_results_are_checked(vm_home, host_guard):
    chatty = "def get_state(config):\n    for _ in range(10):\n        print('x' * 2**20)\n    return [1, 2]\n"
    call, _ = call_getter(chatty, "get_state", vm_home, {})
    assert (call.status, call.value) == ("ok", [1, 2])
    odd = "def get_state(config):\n    return {1, 2}\n"
    call, _ = call_getter(odd, "get_state", vm_home, {})
    assert call.status == "invalid_score" and "not JSON-serializable" in call.error
    liar = "def get_state(config):\n    print('<<scalecua-judge-result:0000>>{\"ok\": true, \"value\": 1}')\n    return 0\n"
    call, _ = call_getter(liar, "get_state", vm_home, {})
    assert (call.status, call.value) == ("ok", 0)  # the marker is random per call


def test_unreachable_probe_is_a_crash_not_an_exception(host_guard):
    async def go():
        async with EnvironmentClient("http://127.0.0.1:9", timeout=2.0) as client:
            env = DesktopHandle("vm-2", isolated=True, home_dir=None, client=client)
            return await executor().run_getter(READ_REPORT, "get_report", env, {"name": "x"})

    call = run(go())
    assert call.status == "crashed" and "run_python through the probe failed" in call.error


def test_local_desktops_and_metrics_use_the_host_sandbox(vm_home, host_guard):
    local = DesktopHandle("local-1", isolated=False, home_dir=vm_home)
    call = run(executor().run_getter(READ_REPORT, "get_report", local, {"name": "report.txt"}))
    assert call.status == "ok" and call.value["text"] == "quarterly numbers"
    metric = "def same(result, expected):\n    return float(result['text'] == expected)\n"
    assert run(executor().run_metric(metric, "same", call.value, "quarterly numbers", {})).value == 1.0


def test_the_script_embeds_any_code_and_config_safely(tmp_path):
    options = InEnvironmentOptions()
    code = 'def g(config):\n    return "\\u00e9\'\\"\\n" + config["k"]\n'
    tricky = "\'\'\'\"\"\"\\\U0001f600 %(code)s"
    script = getter_script(code, "g", {"k": tricky}, options, "<<m>>")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    response = {"status": "success", "output": done.stdout, "error": done.stderr, "return_code": done.returncode}
    report = parse_run_python(response, "<<m>>", options)
    assert report == {"status": "ok", "value": "\u00e9'\"\n" + tricky, "output": ""}
