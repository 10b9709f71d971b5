"""``bench/faults.py --mode serving``: the rollout server (``python -m plugins.serving``) SIGKILLed and restarted
on the same port, on a seeded schedule, while a run generates through it (the ``openai-compatible`` engine).

A restarted server holds the weights it loaded at start. The run must notice every restart (the answering
process changed), refuse what the restarted server generated before the weights came back, push the trainer's
weights again and re-issue the requests in flight: no iteration lost or repeated, no rollout lost.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.faultkit.injector import Fault, ScheduledStrikes

#: the log events of core.runtime (the engine noticed; the loop pushed again) that the check counts
NOTICED = "the rollout server restarted"
RESTORED = "rollout server restarted: the trainer's weights were pushed again"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServingProcess:
    """``python -m plugins.serving`` serving the config's model on a fixed loopback port, restartable."""

    def __init__(self, repo: Path, config: str, out: Path, port: int) -> None:
        self.repo, self.config, self.out, self.port = repo, config, out, port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.out / f"serving-{self.starts:02d}.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "plugins.serving", "--config", self.config, "--port", str(self.port),
             "--served-model-name", "policy"],
            cwd=self.repo, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"plugins.serving exited with {self.process.returncode}; see {self.out}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"plugins.serving did not answer at {self.url} within {timeout_s:.0f} s")

    def kill(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None
        pid = self.process.pid
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        return pid

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class ServingInjector(ScheduledStrikes):
    """Kills the server and starts it again at each strike (a restart after the run's last push could not be
    noticed by anyone: no request follows it)."""

    def __init__(self, server: ServingProcess, interval_s: float, seed: int, out: Path, iterations: int) -> None:
        super().__init__("serving-injector", interval_s, f"serving:{seed}", out, iterations)
        self.server = server

    def strike(self) -> None:
        pid = self.server.kill()
        self.faults.append(Fault("serving_restart", time.time(), None, pid))
        print(f"fault: serving_restart pid {pid}", file=sys.stderr, flush=True)
        self.server.start()
        self.server.wait_ready()
        self._until_noticed(len(self.faults))  # the next restart kills a server the run has met

    def _until_noticed(self, count: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.stop.is_set():
            if len(noticed(self.out / self.run_id)) >= count:
                return
            self.stop.wait(0.2)


def _events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "log.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line still being written
    return out


def noticed(run_dir: Path) -> set[str]:
    """The restarted server processes the run noticed (from its log)."""
    return {str(e.get("instance")) for e in _events(run_dir) if e.get("event") == NOTICED}


def check_serving(run_dir: Path, faults: list[Fault]) -> dict[str, Any]:
    """What the run noticed of the restarts, from its log and metrics."""
    events = _events(run_dir)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()] \
        if (run_dir / "metrics.jsonl").is_file() else []
    return {
        "server_restarts": len(faults),
        "server_restarts_noticed": len(noticed(run_dir)),
        "weight_restores_logged": sum(1 for e in events if e.get("event") == RESTORED),
        "weight_restores_in_metrics": int(sum(r.get("rollout/weight_restores", 0) for r in rows)),
        "generations_refused": sum(1 for e in events if e.get("event") == "the rollout server lost the weights; "
                                                                          "pushing them again"),
    }
