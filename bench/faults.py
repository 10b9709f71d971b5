"""A fault-injection soak: a training run under a seeded schedule of faults, and what it survived.

``python bench/faults.py [--quick] [--mode simulated|desktops|containers|disk|serving|ray|all] [--iterations N]
[--seed S]`` prints one JSON object on stdout (logs go to stderr). Default: all six modes, 30 iterations
each; ``--quick``: the simulated mode, 3 iterations.

The simulated, desktops and containers modes run the same training config twice as child processes (``python -m
core.run``): once clean (the wall-time baseline) and once under faults, then check the faulted run's records:

* ``desktops`` — the quickstart on real local desktops (Xvfb + xterm + the interaction probe; confined
  desktops when run as root), its 12 bundled os tasks plus four task-family variants whose judges are generated
  code (so their episodes are judged in the sandbox). An injector thread of this process finds the run's
  desktop processes in ``/proc`` (by the run id in their command lines, and their descendants) and, on a
  seeded schedule, SIGKILLs the X server, the task's application (xterm) or the probe, SIGSTOPs the probe
  (frozen until the loop's ``env_call_timeout_s`` gives up on it), or SIGKILLs a judge sandbox's supervisor
  while it judges (``judge_worker``: the episode must be retried, never scored). The trainer is SIGKILLed
  right after checkpoint K and resumed with ``--resume``; before the resume its newest checkpoint is cut short
  (the ``COMPLETE`` marker removed, the weights truncated: a write the kill interrupted), so the resume must
  fall back to the previous complete checkpoint.
* ``containers`` — the same soak on ``container-desktop`` (the minimal image, podman behind its Docker API
  socket): the injector kills a running desktop container (``podman kill``) or freezes it (``podman pause``; unpaused
  after the call timeout gave up on it, if it still exists).
* ``simulated`` — ``configs/simulated-async.yaml`` (a SIMULATION of desktops and of the policy) with the
  simulated backend's own step failures (``failure_rate``: a step fails like a crashed desktop), plus the
  same trainer kill, checkpoint cut and resume. Fast; what ``--quick`` runs.
* ``serving`` — the simulated desktops with a real policy behind a real rollout server: the tiny Qwen3-VL
  served by ``python -m plugins.serving`` on a loopback port, the run generating through the
  ``openai-compatible`` engine. The server is SIGKILLed and started again on the same port at seeded moments
  (``bench/faultkit/serving.py``); it comes back with its initial weights, so the run must notice each restart,
  refuse the restarted server's answers, push the trainer's weights again and re-issue the requests. No
  trainer kill in this mode (the other modes have it).
* ``ray`` — the simulated config under ``python -m plugins.ray.run`` on a local Ray instance with two environment
  workers; a worker's process is SIGKILLed at seeded moments (``bench/faultkit/ray_workers.py``). Ray restarts
  it with an empty pool; the episodes it held must end as environment faults and be retried. Skipped (and
  reported so) where Ray is not installed.
* ``disk`` — the simulated config with its run directory on a 96 MiB tmpfs in a private mount namespace,
  filled up at seeded moments (all of it, or all but 512 KiB) and freed again (``bench/faultkit/disk.py``): every
  fill must stop the run with the one-line full-disk error (exit 1, no traceback, no hang), and ``--resume``
  continue from the newest complete checkpoint.

Checked, per mode: iterations lost or duplicated in ``metrics.jsonl`` (must be 0); episodes scored
although an environment fault hit them while they acted (an X server, probe or container killed, a probe
or container frozen, between the episode's start and its last environment call: must be 0; they are retried
on a fresh desktop and never scored) and episodes scored "crashed" because their judge
was killed (must be 0); episodes scored after their application was killed (reported, not a violation: an
agent may close or lose its application, and the desktop is intact); processes, desktop directories and
temporary files left behind after the run (must be 0); environment errors the loop retried; wall-time
overhead against the clean run; containers mode: containers left (must be 0); serving mode: restarts
noticed (must equal those injected), weight pushes made again, rollouts lost (must be 0); ray mode: rollouts
lost and Ray workers left (must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path.insert(0, str(REPO))

from bench.faultkit import disk as _disk  # noqa: E402
from bench.faultkit.injector import BREAKING, Fault, Injector, leftovers, pool_containers  # noqa: E402
from bench.faultkit.ray_workers import RayWorkerInjector, env_worker_pids  # noqa: E402
from bench.faultkit.serving import ServingInjector, ServingProcess, check_serving, free_port  # noqa: E402


def _run_dir(out: Path, name: str) -> Path:
    dirs = sorted(out.glob(f"{name}-*"))
    return dirs[-1] if dirs else out / "missing"


def run_training(config: str, overrides: list[str], out: Path, name: str, *, injector: Any,
                 kill_after: int | None, module: str = "core.run") -> dict[str, Any]:
    """The run as a child process; with ``kill_after``, SIGKILL it after that checkpoint, cut it, resume."""
    base = [sys.executable, "-m", module, "--config", config, f"run.output_dir={out}", f"run.name={name}",
            *overrides]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    log = (out / f"{name}.log").open("w")
    child = subprocess.Popen(base, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    if injector is not None:
        injector.root_pid = child.pid
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
            if injector is not None:
                injector.root_pid = child.pid
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
        """The fault struck the episode's desktop between its start and its last action (its last environment
        call). After that the desktop's state is what the judge scores: a judge that reads it through the dead
        or frozen desktop fails the episode as an environment error itself, and one that reads the files
        directly is not affected by a dead X server or probe."""
        start = record.get("started_at") or 0.0
        end = record.get("acted_at") or record.get("judged_at") or start + (record.get("duration_s") or 0)
        return record.get("env_id") == fault.env_id and start <= fault.at <= end

    scored_broken = [r["trajectory_id"] for r in records for f in faults
                     if f.kind in BREAKING and r["status"] != "env_error" and hit(r, f)]
    scored_app_killed = [r["trajectory_id"] for r in records for f in faults if f.kind == "application" and hit(r, f)]
    log_path = run_dir / "log.jsonl"
    events = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")] \
        if log_path.is_file() else []
    retried = [e for e in events if e.get("event") == "environment failed; the episode will be retried"]
    env_errors = len(retried)
    judge_retries = sum(1 for e in retried if "judge sandbox's supervisor was killed" in str(e.get("error", "")))
    judged_crashed = [r["trajectory_id"] for r in records if (r.get("judgement") or {}).get("status") != "ok"
                      and "supervisor" in str((r.get("judgement") or {}).get("error", ""))]
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
        "judge_kills_retried": judge_retries,
        "episodes_scored_crashed_by_a_killed_judge": len(judged_crashed),
        "lost_rollouts": sum(int(r.get("rollout/lost", 0)) for r in rows),
        "incomplete_checkpoints_ignored_on_resume": ignored,
        "processes_left": procs,
        "desktop_dirs_left": dirs,
    }


#: families whose variants the desktops soak adds to the bundled os tasks: their judges are generated code, so
#: every episode of theirs is judged in the sandbox (whose supervisor the judge_worker fault kills)
FAMILIES = ("count-lines", "chmod", "symlink", "sort-unique")


def write_family_tasks(folder: Path) -> Path:
    from plugins.synthesis.families import CATALOG

    folder.mkdir(parents=True, exist_ok=True)
    for name in FAMILIES:
        task = CATALOG.get(name).variant("train", 0, 0).task()
        (folder / f"{task.id}.json").write_text(json.dumps(task.to_json(), indent=1))
    return folder


SIMULATED_OVERRIDES = ["run.checkpoint_every=1", "run.keep_checkpoints=4", "rollout_loop.mode=sync",
                       "environment.options.step_latency_s=[0.01,0.05]", "environment.options.reset_latency_s=[0.01,0.05]",
                       "algorithm.batch_size=2", "algorithm.n_rollouts=2", "algorithm.max_turns=8",
                       "environment.options.max_environments=8", "rollout_loop.concurrency=8",
                       "rollout_loop.env_retries=5"]


def disk_soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--mode disk``: this script again, in a private mount namespace, with ``--disk-inner`` (see bench/faultkit/disk.py)."""
    import shutil

    if shutil.which("unshare") is None:
        return {"skipped": "needs unshare (util-linux) for a private tmpfs", "survived": True, "faults_injected": {}}
    namespace = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    inner = [*namespace, sys.executable, str(Path(__file__).resolve()), "--disk-inner", "--iterations",
             str(args.iterations), "--seed", str(args.seed), "--disk-fills", str(args.disk_fills),
             "--out", str(out / "disk-mode")]
    print("[disk] faulted run on a private tmpfs ...", file=sys.stderr, flush=True)
    proc = subprocess.run(inner, cwd=REPO, stdout=subprocess.PIPE, text=True)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        return {"survived": False, "faults_injected": {}, "error": f"the disk soak exited {proc.returncode}"}
    return json.loads(proc.stdout)


def disk_inner(args: argparse.Namespace) -> int:
    """Inside the namespace: mount the tmpfs, soak, check, print the mode's JSON."""
    out = Path(args.out)
    disk = out / "disk"
    disk.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.disk_mib}m", "tmpfs", str(disk)], check=True)
    overrides = [f"run.iterations={args.iterations}", *SIMULATED_OVERRIDES]
    base = [sys.executable, "-m", "core.run", "--config", "simulated-async", f"run.output_dir={disk}", "run.name=disk",
            *overrides]
    soaked = _disk.soak(base, lambda: _run_dir(disk, "disk"), disk, fills=args.disk_fills, seed=args.seed,
                        timeout_s=args.disk_timeout)
    result = check({"returncode": soaked["returncode"], "run_dir": soaked["run_dir"]}, [], args.iterations)
    ends = _disk.verdicts(soaked["faults"])
    temporary = [str(p.relative_to(disk)) for p in disk.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".tmp")]
    survived = (result["returncode"] == 0 and result["iterations_lost"] == 0 and result["iterations_duplicated"] == 0
                and not result["processes_left"] and not temporary
                and ends["clear_stop"] + ends["finished_anyway"] == len(soaked["faults"]))
    print(json.dumps({"config": "simulated-async", "overrides": overrides, "disk_mib": args.disk_mib,
                      "faults_injected": {"full_disk": len(soaked["faults"])}, "full_disk_ends": ends,
                      "survived": survived, **result, "temporary_files_left": temporary,
                      "faulted_wall_s": round(soaked["wall_s"], 1), "faults": soaked["faults"],
                      "last_stderr": soaked["last_stderr"] if not survived else ""}, default=str))
    return 0 if survived else 1


def containers_soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--mode containers``: the minimal desktop image (built, or taken from the cache) behind a podman service of
    this process; the desktops soak on ``container-desktop`` with containers killed and paused."""
    import shutil

    if shutil.which("podman") is None:
        return {"skipped": "needs podman (apt-get install podman runc)", "survived": True, "faults_injected": {}}
    from environments.containers import build
    from environments.containers.podman_service import PodmanService

    print("[containers] the minimal image ...", file=sys.stderr, flush=True)
    image = build.build_image("minimal", runtime="runc").image
    with PodmanService(out / "podman.sock", runtime="runc") as service:
        options = {"hosts": f"[{service.url}]", "image": image, "runtime": "runc", "ulimits.nofile": 1024,
                   "ulimits.nproc": 1024, "max_environments": 4, "warm": 1, "health_interval_s": 1.0}
        container = ["environment.name=container-desktop", "judge.name=in-environment",
                     *(f"environment.options.{key}={value}" for key, value in options.items())]
        result = soak("containers", args, out, extra=container)
    left = pool_containers(running=False)
    result["containers_left"] = [name for _, name in left]
    result["survived"] = result["survived"] and not left
    return result


def serving_soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--mode serving``: the simulated config generating through a served policy that restarts."""
    import yaml

    n = args.iterations
    server = ServingProcess(REPO, "simulated-async", out, free_port())
    served = yaml.safe_load((REPO / "configs" / "simulated-async.yaml").read_text())
    served["rollout"] = {"name": "openai-compatible", "options": {"base_url": server.url, "served_model": "policy"}}
    config = str(out / "served-simulated.yaml")
    Path(config).write_text(yaml.safe_dump(served))
    # desktop-like latency: episodes last seconds, so restarts land while requests are in flight
    overrides = [f"run.iterations={n}", *SIMULATED_OVERRIDES, "algorithm.max_new_tokens=16",
                 "environment.options.step_latency_s=[0.2,0.6]", "environment.options.reset_latency_s=[0.2,0.6]",
                 "algorithm.max_parse_failures=8"]
    server.start()
    try:
        server.wait_ready()
        print("[serving] clean run ...", file=sys.stderr, flush=True)
        clean = run_training(config, overrides, out, "clean-serving", injector=None, kill_after=None)
        print("[serving] faulted run ...", file=sys.stderr, flush=True)
        injector = ServingInjector(server, args.serving_interval, args.seed, out, n)
        faulted = run_training(config, overrides, out, "faults-serving", injector=injector, kill_after=None)
        if injector.is_alive():
            injector.join(300)
    finally:
        server.stop()
    result = {**check(faulted, [], n), **check_serving(faulted["run_dir"], injector.faults)}
    survived = (result["returncode"] == 0 and result["iterations_lost"] == 0 and result["iterations_duplicated"] == 0
                and result["lost_rollouts"] == 0 and not result["processes_left"]
                and result["server_restarts_noticed"] == result["server_restarts"])
    return {"config": config, "overrides": overrides, "faults_injected": {"serving_restart": len(injector.faults)},
            "survived": survived, **result, "clean_wall_s": round(clean["wall_s"], 1),
            "faulted_wall_s": round(faulted["wall_s"], 1),
            "wall_time_overhead": round(faulted["wall_s"] / max(clean["wall_s"], 1e-9), 3),
            "clean_returncode": clean["returncode"], "faults": [asdict(f) for f in injector.faults]}


def ray_soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--mode ray``: the simulated config on a local Ray instance, environment workers SIGKILLed mid-run."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return {"skipped": "Ray is not installed (pip install 'scalecua[ray]')", "survived": True}
    n = args.iterations
    overrides = [f"run.iterations={n}", *SIMULATED_OVERRIDES, "extra.ray.num_cpus=2", "extra.ray.env_workers=2",
                 "extra.ray.cpus_per_env_worker=0.25", "extra.ray.cpus_per_rollout_worker=0.25",
                 "extra.ray.cpus_per_trainer_worker=0.5", "extra.ray.env_worker_max_restarts=-1",
                 "environment.options.step_latency_s=[0.05,0.2]",
                 "environment.options.reset_latency_s=[0.05,0.2]"]
    print("[ray] clean run ...", file=sys.stderr, flush=True)
    clean = run_training("simulated-async", overrides, out, "clean-ray", injector=None, kill_after=None,
                         module="plugins.ray.run")
    print("[ray] faulted run ...", file=sys.stderr, flush=True)
    injector = RayWorkerInjector(args.ray_interval, args.seed, out, n)
    faulted = run_training("simulated-async", overrides, out, "faults-ray", injector=injector, kill_after=None,
                           module="plugins.ray.run")
    result = check(faulted, [], n)
    deadline = time.time() + 60
    while env_worker_pids() and time.time() < deadline:  # the run's Ray instance shuts down with it
        time.sleep(0.5)
    result["ray_workers_left"] = env_worker_pids()
    survived = (result["returncode"] == 0 and result["iterations_lost"] == 0 and result["iterations_duplicated"] == 0
                and result["lost_rollouts"] == 0 and not result["ray_workers_left"])
    return {"config": "simulated-async", "overrides": overrides, "survived": survived,
            "faults_injected": {"ray_env_worker": len(injector.faults)}, **result,
            "clean_wall_s": round(clean["wall_s"], 1), "faulted_wall_s": round(faulted["wall_s"], 1),
            "wall_time_overhead": round(faulted["wall_s"] / max(clean["wall_s"], 1e-9), 3),
            "clean_returncode": clean["returncode"], "faults": [asdict(f) for f in injector.faults]}


def soak(mode: str, args: argparse.Namespace, out: Path, extra: list[str] | None = None) -> dict[str, Any]:
    if mode == "ray":
        return ray_soak(args, out)
    if mode == "disk":
        return disk_soak(args, out)
    if mode == "serving":
        return serving_soak(args, out)
    if mode == "containers" and extra is None:
        return containers_soak(args, out)
    n = args.iterations
    if mode in ("desktops", "containers"):
        config = "quickstart"
        family_tasks = write_family_tasks(out / "family-tasks")
        overrides = [f"run.iterations={n}", "run.checkpoint_every=1", "run.keep_checkpoints=4", "run.eval_every=0",
                     "algorithm.batch_size=2", "algorithm.n_rollouts=2", "algorithm.max_turns=4",
                     f"tasks.paths=[package:environments.tasks/osworld,{family_tasks}]",
                     f"rollout_loop.env_call_timeout_s={args.call_timeout}", "rollout_loop.env_retries=3",
                     *(extra or [])]
        faulted_overrides = overrides
        kinds = (["container_kill", "container_pause"] if mode == "containers"
                 else ["x_server", "application", "probe", "probe_frozen", "judge_worker"])
    else:
        config = "simulated-async"
        overrides = [f"run.iterations={n}", *SIMULATED_OVERRIDES]
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
                and not result["desktop_dirs_left"] and result["episodes_scored_crashed_by_a_killed_judge"] == 0)
    return {"config": config, "overrides": faulted_overrides, "faults_injected": injected, "survived": survived,
            **result, "clean_wall_s": round(clean["wall_s"], 1), "faulted_wall_s": round(faulted["wall_s"], 1),
            "wall_time_overhead": round(faulted["wall_s"] / max(clean["wall_s"], 1e-9), 3),
            "clean_returncode": clean["returncode"], "faults": [asdict(f) for f in faults]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the simulated mode only, 3 iterations (under a minute)")
    p.add_argument("--mode", choices=["simulated", "desktops", "containers", "disk", "serving", "ray", "all"],
                   default=None, help="default: all (simulated, desktops, containers, disk, serving and ray); "
                                      "--quick: simulated")
    p.add_argument("--iterations", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--interval", type=float, default=3.0, help="mean seconds between desktop faults")
    p.add_argument("--call-timeout", type=float, default=15.0, help="rollout_loop.env_call_timeout_s (frozen probes)")
    p.add_argument("--serving-interval", type=float, default=3.0,
                   help="serving: mean seconds between rollout-server restarts (each waits for the last to serve)")
    p.add_argument("--ray-interval", type=float, default=3.0,
                   help="ray: mean seconds between environment-worker kills")
    p.add_argument("--failure-rate", type=float, default=0.1, help="simulated: chance that a step fails")
    p.add_argument("--out", default=None, help="where the runs go (default: a fresh temporary directory)")
    p.add_argument("--disk-fills", type=int, default=None, help="disk: times the disk fills up (default iterations/2)")
    p.add_argument("--disk-mib", type=int, default=96, help="disk: the tmpfs's size")
    p.add_argument("--disk-timeout", type=float, default=300.0, help="disk: seconds a run may take to stop once full")
    p.add_argument("--disk-inner", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.mode = args.mode or ("simulated" if args.quick else "all")
    args.iterations = args.iterations or (3 if args.quick else 30)
    args.disk_fills = args.disk_fills if args.disk_fills is not None else max(1, args.iterations // 2)
    if args.iterations < 3:
        p.error("--iterations must be >= 3: the trainer is killed after checkpoint 2 and the newest is cut short")
    return args


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from core.runtime import logs

    args = parse_args(argv)
    logs.configure("info")  # to stderr: stdout carries the one JSON object
    if args.disk_inner:
        return disk_inner(args)
    out = Path(args.out or tempfile.mkdtemp(prefix="scalecua-faults-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    modes = (["simulated", "desktops", "containers", "disk", "serving", "ray"] if args.mode == "all"
             else [args.mode])
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
