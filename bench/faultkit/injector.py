"""What ``bench/faults.py`` aims at and how it strikes: the run's desktop processes and judge supervisors found in
``/proc``, and the injector thread that kills or freezes them on a seeded schedule."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ENV_ID = re.compile(r"desk-[0-9a-f]{10}")
#: faults after which the episode's desktop is broken: it must end as an environment error, never scored
BREAKING = {"x_server", "probe", "probe_frozen", "container_kill", "container_pause"}
#: the label every container of a ScaleCUA pool carries (environments.containers.engine.LABEL_POOL)
POOL_LABEL = "scalecua.pool"


@dataclass
class Fault:
    kind: str
    at: float  # wall clock
    env_id: str | None
    pid: int | None


def _proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, comm, cmdline) of every process we can read."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        table[int(entry.name)] = (ppid, comm, cmdline)
    return table


def desktop_processes(run_id: str) -> dict[str, list[tuple[int, str]]]:
    """The run's desktop processes by kind: (pid, env id)."""
    table = _proc_table()
    supervisors = {pid: ENV_ID.search(cmd) for pid, (_, _, cmd) in table.items()
                   if "environments.display" in cmd and run_id in cmd}
    out: dict[str, list[tuple[int, str]]] = {"x_server": [], "application": [], "probe": []}
    for pid, (_, comm, cmd) in table.items():
        if "environments.probe" in cmd and run_id in cmd and (m := ENV_ID.search(cmd)):
            out["probe"].append((pid, m.group(0)))
            continue
        ancestor, seen = table[pid][0], 0
        while ancestor in table and ancestor not in supervisors and seen < 8:
            ancestor, seen = table[ancestor][0], seen + 1
        if ancestor in supervisors and supervisors[ancestor]:
            env_id = supervisors[ancestor].group(0)
            if comm == "Xvfb":
                out["x_server"].append((pid, env_id))
            elif comm == "xterm":
                out["application"].append((pid, env_id))
    return out


def pool_containers(*, running: bool = True) -> list[tuple[str, str]]:
    """(id, name) of the containers ScaleCUA pools labelled (running ones, or all): the bench runs alone, so they
    are the run's; a container desktop's env id is its name."""
    command = ["podman", "ps", "--filter", f"label={POOL_LABEL}", "--format", "{{.ID}} {{.Names}}"]
    done = subprocess.run(command + ([] if running else ["--all"]), capture_output=True, text=True)
    return [tuple(line.split(None, 1)) for line in done.stdout.splitlines() if " " in line]  # type: ignore[misc]


def _podman(*args: str) -> bool:
    return subprocess.run(["podman", *args], capture_output=True).returncode == 0


def leftovers(run_id: str) -> tuple[list[str], list[str]]:
    """Processes whose command line names the run, and desktop directories of the run, still present."""
    me = os.getpid()
    procs = [f"{pid} {cmd[:120]}" for pid, (_, _, cmd) in _proc_table().items() if run_id in cmd and pid != me]
    dirs = [str(p) for p in Path("/tmp").glob(f"scalecua-desktops-{run_id}-*")]
    return procs, dirs


def judge_supervisors(root: int) -> list[int]:
    """The judge sandbox's supervisors (``sandbox_runner.py``) among the descendants of process ``root``."""
    table = _proc_table()
    out = []
    for pid, (_, _, cmd) in table.items():
        if "sandbox_runner.py" not in cmd:
            continue
        ancestor, seen = table[pid][0], 0
        while ancestor in table and ancestor != root and seen < 6:
            ancestor, seen = table[ancestor][0], seen + 1
        if ancestor == root:
            out.append(pid)
    return out


class Injector(threading.Thread):
    """Kills or freezes one of the run's desktop processes every ~``interval`` seconds (seeded); ``judge_worker``
    waits (up to ``JUDGE_WAIT_S``) for a judge sandbox supervisor of the training process and SIGKILLs it."""

    JUDGE_WAIT_S = 20.0

    def __init__(self, run_id: str, kinds: list[str], interval: float, seed: int, freeze_s: float) -> None:
        super().__init__(daemon=True, name="fault-injector")
        self.run_id, self.kinds, self.interval, self.freeze_s = run_id, kinds, interval, freeze_s
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        self.stop = threading.Event()
        self.root_pid: int | None = None  # the training process (judge supervisors are its descendants)

    def _judge(self) -> None:
        deadline = time.monotonic() + self.JUDGE_WAIT_S
        while not self.stop.is_set() and time.monotonic() < deadline and self.root_pid is not None:
            for pid in judge_supervisors(self.root_pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                self.faults.append(Fault("judge_worker", time.time(), None, pid))
                print(f"fault: judge_worker pid {pid}", file=sys.stderr, flush=True)
                return
            time.sleep(0.01)

    def _container(self, kind: str) -> None:
        """``podman kill`` a running desktop container, or ``podman pause`` it (unpaused after ``freeze_s``, long
        after the loop's call timeout gave up on it, if it still exists)."""
        victims = pool_containers()
        if not victims:
            return
        container, name = self.rng.choice(sorted(victims))
        if not _podman("kill" if kind == "container_kill" else "pause", container):
            return  # removed meanwhile
        self.faults.append(Fault(kind, time.time(), name, None))
        print(f"fault: {kind} {name}", file=sys.stderr, flush=True)
        if kind == "container_pause":
            threading.Timer(self.freeze_s, _podman, ("unpause", container)).start()

    def run(self) -> None:
        while not self.stop.wait(self.interval * self.rng.uniform(0.5, 1.5)):
            kind = self.rng.choice(self.kinds)
            if kind == "judge_worker":
                self._judge()
                continue
            if kind.startswith("container_"):
                self._container(kind)
                continue
            victims = desktop_processes(self.run_id)["probe" if kind == "probe_frozen" else kind]
            if not victims:
                continue
            pid, env_id = self.rng.choice(sorted(victims))
            try:
                os.kill(pid, signal.SIGSTOP if kind == "probe_frozen" else signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.faults.append(Fault(kind, time.time(), env_id, pid))
            print(f"fault: {kind} {env_id} pid {pid}", file=sys.stderr, flush=True)
            if kind == "probe_frozen":
                threading.Timer(self.freeze_s, _resume, (pid,)).start()  # long after the call timed out


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass  # the desktop was discarded and closed meanwhile, as it should be


class ScheduledStrikes(threading.Thread):
    """Strikes (:meth:`strike`) at seeded moments once the run in ``out / run_id`` has recorded an iteration, and
    none in its last two iterations (every strike meets requests or episodes that come after it)."""

    def __init__(self, name: str, interval_s: float, seed: str, out: Path, iterations: int) -> None:
        super().__init__(name=name, daemon=True)
        self.interval_s, self.rng = interval_s, random.Random(seed)
        self.out, self.iterations = out, iterations
        self.stop = threading.Event()
        self.faults: list[Fault] = []
        self.root_pid: int | None = None  # set by bench/faults.run_training
        self.run_id = ""

    def recorded(self) -> int:
        """Iterations the run has recorded."""
        path = self.out / self.run_id / "metrics.jsonl"
        return len(path.read_text().splitlines()) if path.is_file() else 0

    def strike(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        while self.recorded() < 1:
            if self.stop.wait(0.2):
                return
        delay = self.rng.uniform(0, self.interval_s)
        while not self.stop.wait(delay):
            delay = self.rng.expovariate(1.0 / self.interval_s)
            if self.recorded() < self.iterations - 2:  # the thread lives until stopped
                self.strike()
