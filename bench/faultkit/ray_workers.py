"""``bench/faults.py --mode ray``: a Ray environment worker (an actor holding a pool of desktops) SIGKILLed while
the run (``python -m plugins.ray.run``) drives episodes on it. Ray restarts the actor (``max_restarts``) with an
empty pool; the episodes it held end as environment faults and are retried on fresh desktops."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from bench.faultkit.injector import Fault, ScheduledStrikes

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


class RayWorkerInjector(ScheduledStrikes):
    """Kills one of the run's environment workers at each strike."""

    def __init__(self, interval_s: float, seed: int, out: Path, iterations: int) -> None:
        super().__init__("ray-injector", interval_s, f"ray:{seed}", out, iterations)

    def strike(self) -> None:
        pids = env_worker_pids()
        if not pids:
            return
        pid = self.rng.choice(pids)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.faults.append(Fault("ray_env_worker", time.time(), None, pid))
        print(f"fault: ray_env_worker pid {pid}", file=sys.stderr, flush=True)
