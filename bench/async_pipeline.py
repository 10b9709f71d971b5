"""Synchronous vs asynchronous rollout-training pipeline, side by side in one run.

``python bench/async_pipeline.py [--quick] [--desktops] [--iterations N]`` prints one JSON object on stdout
(logs go to stderr).

(a) ``configs/simulated-async.yaml``: SIMULATED desktops with OSWorld-like step and reset latency (1-3 s)
and a SIMULATED policy (a seeded done/wait coin per turn: episodes of 1 to 50 turns, about 14 on average,
so a synchronous step waits for its slowest episode), with the real tiny Qwen3-VL tokenizer, segments and
torch trainer (a real optimizer step on the episodes' tokens). Environments dominate as in the paper, and
the pool holds two batches of episodes (the paper: 600 environments for 256 episodes a batch), the same
pool in every mode: a synchronous step can use one batch's worth of it.
``--quick`` scales every latency by 0.1 and the batch and episodes down (to fit about a minute).

(b) ``--desktops``: real local desktops with the quickstart's settings (``configs/quickstart.yaml``, the tiny
model generating in-process), a few iterations per mode.

Each configuration runs ``python -m core.run`` once per mode: ``sync``, ``async`` with ``max_staleness``
1 and 2, same seed. Reported per mode: trained iterations per hour (from the loop's own per-iteration wall
times, process start-up excluded), the ratio against sync, the trainer's and the rollouts' idle shares, the
staleness distribution of trained groups, groups dropped for staleness, and the success rate.
Target (issue 17): async k=1 >= 1.6x sync iterations per hour on (a), above 1x on (b).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = ROOT / "configs" / "simulated-async.yaml"
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
MODES = {"sync": ["rollout_loop.mode=sync"],
         "async_k1": ["rollout_loop.mode=async", "rollout_loop.max_staleness=1"],
         "async_k2": ["rollout_loop.mode=async", "rollout_loop.max_staleness=2"]}
TARGET_SIMULATED = 1.6
QUICK_SCALE = 0.1  # --quick: every latency x 0.1


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_mode(config: Path, overrides: list[str], out: Path) -> dict[str, Any]:
    out.mkdir(parents=True)
    cmd = [sys.executable, "-m", "core.run", "--config", str(config), f"run.output_dir={out}", *overrides]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"core.run failed ({' '.join(overrides)}):\n{done.stderr[-3000:]}")
    run_dir = next(p for p in out.iterdir() if (p / "metrics.jsonl").exists())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    loop_s = sum(r["time/iteration"] for r in rows)
    result: dict[str, Any] = {
        "iterations": len(rows),
        "loop_s": round(loop_s, 2),
        "process_wall_s": round(wall, 2),
        "iterations_per_hour": round(3600 * len(rows) / loop_s, 2),
        "train_s_mean": round(sum(r.get("time/train", 0.0) for r in rows) / len(rows), 2),
        "success": round(sum(r.get("success/rate", 0.0) for r in rows) / len(rows), 3),
    }
    if "async/staleness_mean" in rows[0]:
        staleness: dict[str, float] = {}
        for r in rows:
            for key, value in r.items():
                if key.startswith("async/staleness_") and key[len("async/staleness_"):].isdigit():
                    staleness[key[len("async/staleness_"):]] = staleness.get(key[len("async/staleness_"):], 0) + value
        result.update({
            "trainer_idle_share": round(sum(r["async/trainer_idle_share"] for r in rows) / len(rows), 3),
            "rollout_idle_share": round(sum(r["async/rollout_idle_share"] for r in rows) / len(rows), 3),
            "staleness_histogram": staleness,
            "dropped_stale": sum(r["async/dropped_stale"] for r in rows),
        })
    else:  # sync: the trainer idles through the rollout phase, the rollouts through training
        result.update({
            "trainer_idle_share": round(sum(r["time/rollout"] for r in rows) / loop_s, 3),
            "rollout_idle_share": round(sum(r.get("time/train", 0) + r.get("time/weight_sync", 0)
                                            for r in rows) / loop_s, 3),
        })
    return result


def compare(name: str, config: Path, overrides: list[str], work: Path) -> dict[str, Any]:
    modes = {}
    for mode, extra in MODES.items():
        log(f"{name}: {mode} ...")
        modes[mode] = run_mode(config, [*overrides, *extra], work / name / mode)
        log(f"{name}: {mode}: {modes[mode]['iterations_per_hour']} iterations/hour")
    base = modes["sync"]["iterations_per_hour"]
    return {"modes": modes, "speedup_vs_sync": {m: round(r["iterations_per_hour"] / base, 3) for m, r in modes.items()}}


def simulated_overrides(quick: bool, iterations: int, scale: float) -> list[str]:
    latency = [f"environment.options.step_latency_s=[{scale * 1.0:g},{scale * 3.0:g}]",
               f"environment.options.reset_latency_s=[{scale * 1.0:g},{scale * 3.0:g}]"]
    if not quick:
        return [f"run.iterations={iterations}", f"run.checkpoint_every={iterations}", *latency]
    return [f"run.iterations={iterations}", f"run.checkpoint_every={iterations}", *latency,
            "algorithm.batch_size=2", "algorithm.n_rollouts=2", "rollout_loop.concurrency=8",
            "environment.options.max_environments=8", "algorithm.max_turns=20"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="latencies x 0.1, small batch, short episodes")
    parser.add_argument("--desktops", action="store_true", help="also (b): real local desktops, quickstart settings")
    parser.add_argument("--iterations", type=int, default=None, help="iterations per mode (default 3 quick, 6)")
    parser.add_argument("--latency-scale", type=float, default=None,
                        help="multiply the simulated desktops' latencies (default 0.1 quick, 1)")
    args = parser.parse_args()
    iterations = args.iterations or (3 if args.quick else 6)
    scale = args.latency_scale if args.latency_scale is not None else (QUICK_SCALE if args.quick else 1.0)
    overrides = simulated_overrides(args.quick, iterations, scale)
    with tempfile.TemporaryDirectory(prefix="bench-async-") as tmp:
        work = Path(tmp)
        report: dict[str, Any] = {
            "bench": "async_pipeline",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                        "load_average_1m_at_start": round(os.getloadavg()[0], 2)},
            "settings": {"quick": args.quick, "iterations_per_mode": iterations, "latency_scale": scale,
                         "simulated": {"config": str(SIMULATED.relative_to(ROOT)), "overrides": overrides}},
            "simulated": compare("simulated", SIMULATED, overrides, work),
        }
        report["target"] = {"async_k1_vs_sync_simulated": TARGET_SIMULATED,
                            "met": report["simulated"]["speedup_vs_sync"]["async_k1"] >= TARGET_SIMULATED}
        if args.desktops:
            desk = [f"run.iterations={iterations}", f"run.checkpoint_every={iterations}", "run.eval_every=0"]
            report["settings"]["desktops"] = {"config": str(QUICKSTART.relative_to(ROOT)), "overrides": desk}
            report["desktops"] = compare("desktops", QUICKSTART, desk, work)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
