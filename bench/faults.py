"""A fault-injection soak: a training run under a seeded schedule of faults, and what it survived.

``python bench/faults.py [--quick] [--mode simulated|desktops|both] [--iterations N] [--seed S]`` prints one
JSON object on stdout (logs go to stderr). Default: both modes, 20 iterations each; ``--quick``: the
simulated mode, 3 iterations.

Each mode runs the same training config twice as child processes (``python -m core.run``): once clean (the
wall-time baseline) and once under faults, then checks the faulted run's own records:

* ``desktops`` — the quickstart on real local desktops (Xvfb + xterm + the interaction probe; confined
  desktops when run as root). An injector thread of this process finds the run's desktop processes in
  ``/proc`` (by the run id in their command lines, and their descendants) and, on a seeded schedule,
  SIGKILLs the X server, the task's application (xterm) or the probe, or SIGSTOPs the probe (frozen until
  the loop's ``env_call_timeout_s`` gives up on it). The trainer is SIGKILLed right after checkpoint K
  and resumed with ``--resume``; before the resume its newest checkpoint is cut short (the ``COMPLETE``
  marker removed, the weights truncated: a write the kill interrupted), so the resume must fall back to
  the previous complete checkpoint.
* ``simulated`` — ``configs/simulated-async.yaml`` (a SIMULATION of desktops and of the policy) with the
  simulated backend's own step failures (``failure_rate``: a step fails like a crashed desktop), plus the
  same trainer kill, checkpoint cut and resume. Fast; what ``--quick`` runs.

Checked, per mode: iterations lost or duplicated in ``metrics.jsonl`` (must be 0); episodes scored
although an environment fault hit them while they ran (an X server or probe killed, a probe frozen: must
be 0; they are retried on a fresh desktop and never scored); episodes scored after their application was
killed (reported, not a violation: an agent may close or lose its application, and the desktop is
intact); processes and desktop directories left behind after the run (must be 0); environment errors the
loop retried; wall-time overhead against the clean run. Not injected here: container kills, judge
sandbox kills (covered by tests/judges/test_hostile.py: a judge that kills itself is contained), a
rollout server restart, a full disk.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ENV_ID = re.compile(r"desk-[0-9a-f]{10}")
#: faults after which the episode's desktop is broken: it must end as an environment error, never scored
BREAKING = {"x_server", "probe", "probe_frozen"}


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


def leftovers(run_id: str) -> tuple[list[str], list[str]]:
    """Processes whose command line names the run, and desktop directories of the run, still present."""
    me = os.getpid()
    procs = [f"{pid} {cmd[:120]}" for pid, (_, _, cmd) in _proc_table().items() if run_id in cmd and pid != me]
    dirs = [str(p) for p in Path("/tmp").glob(f"scalecua-desktops-{run_id}-*")]
    return procs, dirs


class Injector(threading.Thread):
    """Kills or freezes one of the run's desktop processes every ~``interval`` seconds (seeded)."""

    def __init__(self, run_id: str, kinds: list[str], interval: float, seed: int, freeze_s: float) -> None:
        super().__init__(daemon=True, name="fault-injector")
        self.run_id, self.kinds, self.interval, self.freeze_s = run_id, kinds, interval, freeze_s
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval * self.rng.uniform(0.5, 1.5)):
            kind = self.rng.choice(self.kinds)
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


def _run_dir(out: Path, name: str) -> Path:
    dirs = sorted(out.glob(f"{name}-*"))
    return dirs[-1] if dirs else out / "missing"


def run_training(config: str, overrides: list[str], out: Path, name: str, *, injector: Injector | None,
                 kill_after: int | None) -> dict[str, Any]:
    """The run as a child process; with ``kill_after``, SIGKILL it after that checkpoint, cut it, resume."""
    base = [sys.executable, "-m", "core.run", "--config", config, f"run.output_dir={out}", f"run.name={name}",
            *overrides]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    log = (out / f"{name}.log").open("w")
    child = subprocess.Popen(base, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    killed = cut = None
    while child.poll() is None:
        run_dir = _run_dir(out, name)
        if injector is not None and not injector.is_alive() and run_dir.exists():
            injector.run_id = run_dir.name
            injector.start()
        if kill_after is not None and killed is None and (run_dir / "checkpoints" / f"iter_{kill_after:06d}"
                                                           / "COMPLETE").is_file():
            child.send_signal(signal.SIGKILL)
            child.wait()
            killed = kill_after
            cut = cut_newest_checkpoint(run_dir)
            child = subprocess.Popen([*base, "--resume", str(run_dir)], cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT, env=env)
        time.sleep(0.2)
    if injector is not None:
        injector.stop.set()
    return {"returncode": child.returncode, "wall_s": time.perf_counter() - started, "run_dir": _run_dir(out, name),
            "killed_after_checkpoint": killed, "cut_checkpoint": cut}


def cut_newest_checkpoint(run_dir: Path) -> str | None:
    """A checkpoint write interrupted by the kill: no COMPLETE marker, half the weights."""
    complete = sorted(p.parent for p in (run_dir / "checkpoints").glob("iter_*/COMPLETE"))
    if len(complete) < 2:
        return None
    newest = complete[-1]
    (newest / "COMPLETE").unlink()
    for weights in newest.rglob("model.safetensors"):
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return newest.name


def check(run: dict[str, Any], faults: list[Fault], iterations: int) -> dict[str, Any]:
    run_dir: Path = run["run_dir"]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()] \
        if (run_dir / "metrics.jsonl").is_file() else []
    seen = [int(r["iteration"]) for r in rows]
    records = [json.loads(line) for path in sorted((run_dir / "rollouts").glob("iter_*.jsonl"))
               for line in path.read_text().splitlines() if line.strip()]

    def hit(record: dict[str, Any], fault: Fault) -> bool:
        """The fault struck the episode's desktop between its start and its judgement (after it, only the
        release is left and the outcome is fixed)."""
        start = record.get("started_at") or 0.0
        end = record.get("judged_at") or start + (record.get("duration_s") or 0)
        return record.get("env_id") == fault.env_id and start <= fault.at <= end

    scored_broken = [r["trajectory_id"] for r in records for f in faults
                     if f.kind in BREAKING and r["status"] != "env_error" and hit(r, f)]
    scored_app_killed = [r["trajectory_id"] for r in records for f in faults if f.kind == "application" and hit(r, f)]
    log_path = run_dir / "log.jsonl"
    events = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")] \
        if log_path.is_file() else []
    env_errors = sum(1 for e in events if e.get("event") == "environment failed; the episode will be retried")
    ignored = sum(1 for e in events if e.get("event", "").startswith("ignoring incomplete checkpoint"))
    deadline = time.time() + 90
    procs, dirs = leftovers(run_dir.name)
    while (procs or dirs) and time.time() < deadline:  # the SIGKILLed run's desktops notice and exit
        time.sleep(1)
        procs, dirs = leftovers(run_dir.name)
    return {
        "returncode": run["returncode"],
        "iterations_expected": iterations,
        "iterations_lost": len(set(range(iterations)) - set(seen)),
        "iterations_duplicated": len(seen) - len(set(seen)),
        "episodes_recorded": len(records),
        "episodes_scored_despite_environment_fault": len(set(scored_broken)),
        "episodes_scored_after_application_killed": len(set(scored_app_killed)),
        "environment_errors_retried": env_errors,
        "lost_rollouts": sum(int(r.get("rollout/lost", 0)) for r in rows),
        "incomplete_checkpoints_ignored_on_resume": ignored,
        "processes_left": procs,
        "desktop_dirs_left": dirs,
    }


def soak(mode: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    n = args.iterations
    if mode == "desktops":
        config = "quickstart"
        overrides = [f"run.iterations={n}", "run.checkpoint_every=1", "run.keep_checkpoints=4", "run.eval_every=0",
                     "algorithm.batch_size=2", "algorithm.n_rollouts=2", "algorithm.max_turns=4",
                     f"rollout_loop.env_call_timeout_s={args.call_timeout}", "rollout_loop.env_retries=3"]
        faulted_overrides = overrides
        kinds = ["x_server", "application", "probe", "probe_frozen"]
    else:
        config = "simulated-async"
        overrides = [f"run.iterations={n}", "run.checkpoint_every=1", "run.keep_checkpoints=4",
                     "rollout_loop.mode=sync", "environment.options.step_latency_s=[0.01,0.05]",
                     "environment.options.reset_latency_s=[0.01,0.05]", "algorithm.batch_size=2",
                     "algorithm.n_rollouts=2", "algorithm.max_turns=8", "environment.options.max_environments=8",
                     "rollout_loop.concurrency=8", "rollout_loop.env_retries=5"]
        faulted_overrides = [*overrides, f"environment.options.failure_rate={args.failure_rate}",
                             f"environment.options.seed={args.seed}"]
        kinds = []
    print(f"[{mode}] clean run ...", file=sys.stderr, flush=True)
    clean = run_training(config, overrides, out, f"clean-{mode}", injector=None, kill_after=None)
    print(f"[{mode}] faulted run ...", file=sys.stderr, flush=True)
    injector = Injector("", kinds, args.interval, args.seed, args.call_timeout + 10) if kinds else None
    faulted = run_training(config, faulted_overrides, out, f"faults-{mode}", injector=injector,
                           kill_after=max(2, n // 2 + 1))  # two complete checkpoints: the cut has one to fall back to
    faults = injector.faults if injector else []
    result = check(faulted, faults, n)
    injected: dict[str, int] = {}
    for f in faults:
        injected[f.kind] = injected.get(f.kind, 0) + 1
    if mode == "simulated":
        injected["simulated_step_failure"] = result["environment_errors_retried"]
    injected["trainer_sigkill"] = 1 if faulted["killed_after_checkpoint"] is not None else 0
    injected["checkpoint_cut_short"] = 1 if faulted["cut_checkpoint"] else 0
    survived = (result["returncode"] == 0 and result["iterations_lost"] == 0 and result["iterations_duplicated"] == 0
                and result["episodes_scored_despite_environment_fault"] == 0 and not result["processes_left"]
                and not result["desktop_dirs_left"])
    return {"config": config, "overrides": faulted_overrides, "faults_injected": injected, "survived": survived,
            **result, "clean_wall_s": round(clean["wall_s"], 1), "faulted_wall_s": round(faulted["wall_s"], 1),
            "wall_time_overhead": round(faulted["wall_s"] / max(clean["wall_s"], 1e-9), 3),
            "clean_returncode": clean["returncode"], "faults": [asdict(f) for f in faults]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the simulated mode only, 3 iterations (under a minute)")
    p.add_argument("--mode", choices=["simulated", "desktops", "both"], default=None)
    p.add_argument("--iterations", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--interval", type=float, default=6.0, help="mean seconds between desktop faults")
    p.add_argument("--call-timeout", type=float, default=15.0, help="rollout_loop.env_call_timeout_s (frozen probes)")
    p.add_argument("--failure-rate", type=float, default=0.05, help="simulated: chance that a step fails")
    p.add_argument("--out", default=None, help="where the runs go (default: a fresh temporary directory)")
    args = p.parse_args(argv)
    args.mode = args.mode or ("simulated" if args.quick else "both")
    args.iterations = args.iterations or (3 if args.quick else 20)
    if args.iterations < 3:
        p.error("--iterations must be >= 3: the trainer is killed after checkpoint 2 and the newest is cut short")
    return args


def main(argv: list[str] | None = None) -> int:
    import tempfile

    args = parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="scalecua-faults-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    modes = ["simulated", "desktops"] if args.mode == "both" else [args.mode]
    results = {mode: soak(mode, args, out) for mode in modes}
    from core.commands.recipe_report import machine

    print(json.dumps({
        "benchmark": "faults",
        "machine": machine(),
        "settings": {"quick": args.quick, "modes": modes, "iterations": args.iterations, "seed": args.seed,
                     "desktop_fault_interval_s": args.interval, "env_call_timeout_s": args.call_timeout,
                     "simulated_failure_rate": args.failure_rate, "root": os.geteuid() == 0,
                     "cpu_count": os.cpu_count(), "python": platform.python_version(), "out": str(out)},
        "modes": results,
        "survived_all": all(r["survived"] for r in results.values()),
        "wall_s": round(time.perf_counter() - started, 1),
    }, indent=2, default=str))
    return 0 if all(r["survived"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
