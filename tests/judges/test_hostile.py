"""The hostile corpus: each metric is contained, gets the right status, and leaves the host as it was.

Every metric runs THROUGH THE SANDBOX with the rule validator switched off
(``validate_code: false``), to prove the sandbox itself contains it; the last
tests show the validator would have refused the dangerous ones anyway.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from plugins.judges.validator import EntryPoint, validate_judge_code

from .conftest import make_executor, run

INFINITE_LOOP = "def metric(result, expected):\n    while True:\n        pass\n"
FORK_BOMB = "import os\n\ndef metric(result, expected):\n    while True:\n        os.fork()\n"
ALLOCATE_50GB = "def metric(result, expected):\n    block = bytearray(50 * 2**30)\n    return 1.0\n"
WRITE_10GB = (
    "def metric(result, expected):\n"
    "    with open('big.bin', 'wb') as out:\n"
    "        for _ in range(10 * 1024):\n"
    "            out.write(b'x' * 2**20)\n"
    "    return 1.0\n"
)
PRINT_100MB = "def metric(result, expected):\n    for _ in range(100):\n        print('x' * 2**20)\n    return 1.0\n"
RAISES = "def metric(result, expected):\n    raise ValueError('the judge is broken')\n"


def read_secrets(paths: list[str]) -> str:
    """Reads every path into the score; when nothing can be read the score is 0."""
    return (
        "def metric(result, expected):\n"
        f"    stolen = ''.join(open(p).read() for p in {paths!r})\n"
        "    return min(1.0, len(stolen) / 10.0)\n"
    )


def test_infinite_loop_times_out(host_guard):
    executor = make_executor(validate_code=False, wall_timeout_s=3.0)  # CPU limit 60 s: the wall clock goes first
    call = run(executor.run_metric(INFINITE_LOOP, "metric", 1, 1, {}))
    assert call.status == "timeout", call.error
    assert "wall-clock" in call.error


def test_fork_bomb_hits_the_process_limit(executor, host_guard):
    call = run(executor.run_metric(FORK_BOMB, "metric", 1, 1, {}))
    assert call.status == "resource_limit", call.error
    assert "Resource temporarily unavailable" in call.error


def test_allocating_50_gb_hits_the_memory_limit(executor, host_guard):
    call = run(executor.run_metric(ALLOCATE_50GB, "metric", 1, 1, {}))
    assert call.status == "resource_limit", call.error
    assert "MemoryError" in call.error


def test_writing_a_10_gb_file_hits_the_file_size_limit(executor, host_guard):
    call = run(executor.run_metric(WRITE_10GB, "metric", 1, 1, {}))
    assert call.status == "resource_limit", call.error
    assert "File too large" in call.error


def test_reading_ssh_keys_and_shadow_into_the_score(executor, host_guard, tmp_path):
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    key = ssh / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- secret")
    key.chmod(0o600)
    targets = [str(key), "/etc/shadow", os.path.expanduser("~/.ssh/id_rsa")]
    readable = [p for p in targets if os.access(p, os.R_OK)]
    assert readable, "the test needs at least one secret this process can read"
    code = read_secrets(readable)
    namespace: dict = {}
    exec(code, namespace)  # control: unconfined, the same code does steal the secrets
    assert namespace["metric"](None, None) > 0
    call = run(executor.run_metric(code, "metric", 1, 1, {}))
    assert call.status == "crashed", call.error
    assert call.error.startswith("FileNotFoundError")  # nothing of the host's files is even visible
    # A judge that swallows the errors still learns nothing: score 0.
    quiet = (
        "def metric(result, expected):\n"
        "    found = 0\n"
        f"    for path in {readable!r}:\n"
        "        try:\n"
        "            found += len(open(path).read())\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 1.0 if found else 0.0\n"
    )
    call = run(executor.run_metric(quiet, "metric", 1, 1, {}))
    assert (call.status, call.value) == ("ok", 0.0)


def test_socket_to_loopback_is_refused(executor, host_guard):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    port = server.getsockname()[1]
    code = (
        "import socket\n\n"
        "def metric(result, expected):\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'exfiltrated')\n"
        "    return 1.0\n"
    )
    try:
        call = run(executor.run_metric(code, "metric", 1, 1, {}))
        accept()
    finally:
        server.close()
    assert call.status == "crashed", call.error
    assert "Network is unreachable" in call.error
    assert accepted == []


def test_deleting_files_outside_scratch_changes_nothing(executor, host_guard, tmp_path):
    canary = tmp_path / "canary.txt"
    canary.write_text("still here")
    library = Path(os.__file__)  # part of the read-only Python installation the sandbox sees
    code = (
        "import os\n\n"
        "def metric(result, expected):\n"
        "    removed = 0\n"
        f"    for path in [result, {str(canary)!r}, {str(library)!r}]:\n"
        "        try:\n"
        "            os.remove(path)\n"
        "            removed += 1\n"
        "        except OSError as exc:\n"
        "            print(path, exc)\n"
        "    return float(removed)\n"
    )
    # The canary is passed as the artifact, so it is bound read-only inside: deletion fails with EROFS.
    executor = make_executor(validate_code=False, artifact_roots=[str(tmp_path)])
    call = run(executor.run_metric(code, "metric", str(canary), None, {}))
    assert (call.status, call.value) == ("ok", 0.0), call.error
    assert canary.read_text() == "still here"
    assert library.exists()
    strict = code.replace("        except OSError as exc:\n            print(path, exc)\n", "        finally:\n            pass\n")
    call = run(executor.run_metric(strict, "metric", str(canary), None, {}))
    assert call.status == "crashed" and "Read-only file system" in call.error
    assert canary.read_text() == "still here"


def test_killing_the_parent_and_the_host_process_fails(executor, host_guard):
    code = (
        "import os, signal\n\n"
        "def metric(result, expected):\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n"
        "    os.killpg(0, signal.SIGKILL)\n"
        f"    os.kill({os.getpid()}, signal.SIGKILL)\n"
        "    return 1.0\n"
    )
    call = run(executor.run_metric(code, "metric", 1, 1, {}))
    # The supervisor and this process survive: neither is even visible from the sandbox's pid namespace.
    assert call.status == "crashed", call.error
    assert "ProcessLookupError" in call.error


@pytest.mark.parametrize(
    ("body", "needle"),
    [("float('nan')", "nan"), ("1e9", "outside [0, 1]"), ("'1.0'", "not a float"), ("True", "not a float"),
     ("object()", "not JSON-serializable")],
)
def test_bad_scores_are_invalid(executor, host_guard, body, needle):
    call = run(executor.run_metric(f"def metric(result, expected):\n    return {body}\n", "metric", 1, 1, {}))
    assert call.status == "invalid_score", call.error
    assert needle in call.error
    assert call.value is None


def test_raising_is_a_crash_with_the_judges_traceback(executor, host_guard):
    call = run(executor.run_metric(RAISES, "metric", 1, 1, {}))
    assert call.status == "crashed"
    assert call.error.startswith("ValueError: the judge is broken")
    assert 'File "<judge>", line 2, in metric' in call.error
    assert "sandbox_runner" not in call.error and "sandbox_confine" not in call.error


def test_printing_100_mb_is_stopped(executor, host_guard):
    call = run(executor.run_metric(PRINT_100MB, "metric", 1, 1, {}))
    assert call.status == "resource_limit", call.error
    assert "printed more than" in call.error


def test_a_slow_judge_does_not_block_the_others(host_guard):
    # the slow judge sleeps (no CPU limit involved) until its 10 s wall-clock limit: the fast one, started
    # at the same time, must be done while the slow one still runs (an order of events, not a speed)
    executor = make_executor(validate_code=False, wall_timeout_s=10.0)
    sleeper = "import time\n\ndef metric(result, expected):\n    time.sleep(3600)\n"

    async def both():
        import asyncio

        slow = asyncio.ensure_future(executor.run_metric(sleeper, "metric", 1, 1, {}))
        await asyncio.sleep(0)  # the slow call goes first: it holds its concurrency slot before the fast one asks
        fast = await executor.run_metric("def metric(result, expected):\n    return 1.0\n", "metric", 1, 1, {})
        slow_was_running = not slow.done()
        return await slow, fast, slow_was_running

    slow, fast, slow_was_running = run(both())
    assert slow.status == "timeout" and fast.status == "ok"
    assert slow_was_running, "the fast judge only finished after the slow one"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (FORK_BOMB, "'os.fork' is not allowed"),
        (WRITE_10GB, "open() for writing is not allowed"),
        ("import socket\n\ndef metric(result, expected):\n    socket.socket()\n", "import of 'socket'"),
        ("import os\n\ndef metric(result, expected):\n    os.remove('/x')\n", "'os.remove' is not allowed"),
        ("import os\n\ndef metric(result, expected):\n    os.kill(os.getppid(), 9)\n", "'os.kill' is not allowed"),
        ("import subprocess\n\ndef metric(result, expected):\n    subprocess.run(['rm', '-rf', '/'])\n",
         "import of 'subprocess'"),
    ],
)
def test_the_validator_rejects_the_dangerous_ones_before_they_run(code, reason, host_guard):
    report = validate_judge_code(code, [EntryPoint("metric", "metric")])
    assert not report.ok and any(reason in r for r in report.reasons), report.reasons
    call = run(make_executor().run_metric(code, "metric", 1, 1, {}))
    assert call.status == "rejected" and reason in call.error
    assert call.duration_s == 0.0  # nothing ran
