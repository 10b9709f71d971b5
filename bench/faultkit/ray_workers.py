"""``bench/faults.py --mode ray``: a Ray environment worker (an actor holding a pool of desktops) SIGKILLed while
the run (``python -m plugins.ray.run``) drives episodes on it. Ray restarts the actor (``max_restarts``) with an
empty pool; the episodes it held end as environment faults and are retried on fresh desktops."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

from bench.faultkit.injector import Fault

#: the process title Ray gives an actor's worker process (``ray::<class>`` or ``ray::<class>.<method>``)
TITLE = "ray::EnvironmentWorker"


def env_worker_pids() -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith(TITLE):
            pids.append(int(entry.name))
    return sorted(pids)


class RayWorkerInjector(threading.Thread):
    """Kills one of the run's environment workers at seeded moments once the run has recorded an iteration,
    and stops two iterations before the end (every kill meets episodes that come after it)."""

    def __init__(self, interval_s: float, seed: int, out: Path, iterations: int) -> None:
        super().__init__(name="ray-injector", daemon=True)
        self.interval_s, self.rng = interval_s, random.Random(f"ray:{seed}")
        self.out, self.iterations = out, iterations
        self.stop = threading.Event()
        self.faults: list[Fault] = []
        self.root_pid: int | None = None
        self.run_id = ""

    def _recorded(self) -> int:
        path = self.out / self.run_id / "metrics.jsonl"
        return len(path.read_text().splitlines()) if path.is_file() else 0

    def run(self) -> None:
        while self._recorded() < 1:
            if self.stop.wait(0.2):
                return
        delay = self.rng.uniform(0, self.interval_s)
        while not self.stop.wait(delay):
            delay = self.rng.expovariate(1.0 / self.interval_s)
            pids = env_worker_pids()
            if self._recorded() >= self.iterations - 2 or not pids:
                continue
            pid = self.rng.choice(pids)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.faults.append(Fault("ray_env_worker", time.time(), None, pid))
            print(f"fault: ray_env_worker pid {pid}", file=sys.stderr, flush=True)
