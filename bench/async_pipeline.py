"""Synchronous vs asynchronous rollout-training pipeline at equal conditions and equal work, side by side.

``python bench/async_pipeline.py [--quick] [--desktops] [--iterations N] [--seeds 0 1 2] [--slots S]`` prints
one JSON object on stdout (logs go to stderr).

(a) ``configs/simulated-async.yaml``: SIMULATED desktops with OSWorld-like step and reset latency (1-3 s)
and a SIMULATED policy (a seeded done/wait coin per turn: episodes of 1 to 50 turns, about 14 on average,
so a synchronous step waits for its slowest episode), with the real tiny Qwen3-VL tokenizer, segments and
torch trainer (a real optimizer step on the episodes' tokens). Environments dominate as in the paper.

**Equal slots** (the headline): every mode gets the same ``S`` environment slots (``max_environments`` and
``rollout_loop.concurrency``), and the batch fills them (``batch_size x n_rollouts = S``), so synchronous
training leaves no slot idle by construction; what async gains is overlap (training while episodes run) and
not waiting for a batch's slowest episode. **Fixed batch** (the figure this bench used to print): the config's
32 slots for a batch of 16 episodes, so sync leaves half the pool idle; reported beside it for comparison.

Modes: ``sync``; ``async_k1`` and ``async_k2`` (``max_staleness`` 1, 2, ``stale_groups: wait``, the default:
nothing is thrown away); ``async_k1_drop`` (``stale_groups: drop``). Each mode runs ``python -m core.run``
once per seed. Work is counted from the runs' own metrics (:func:`core.runtime.metrics.work_metrics`):
trained tokens (``tokens/total``) and groups per hour of loop time (process start-up excluded), environment
seconds spent on groups never trained (rejected, dropped, or left running or unused at the end), the mean
episode length trained vs run (async favours short episodes), staleness. Bounds printed beside the measured
ratio, from the sync runs' phase times (rollout R, training + weight sync T per iteration): pure overlap
``(R + T) / max(R, T)``, and straggler-free ``(R + T) / max(u R, T)`` where ``u`` is the share of slot-time
sync's rollout phase actually used (the rest waits for the slowest episode).
Target (issue 36): async k=1 >= 1.5x sync's trained tokens per hour with equal slots (mean of 3 seeds), and
at most 2 % of environment time on never-trained groups with ``stale_groups: wait``.

(b) ``--desktops``: real local desktops with the quickstart's settings (``configs/quickstart.yaml``, the tiny
model generating in-process), sync vs async k=1 at the quickstart's own slots and batch.

(c) ``--learning-parity`` (alone: the throughput parts are skipped): does async learn as well? The main job's
whole recipe (``configs/quickstart.yaml``: warm start, refine, RL, evaluate; :mod:`bench.learning` runs it)
once per seed with RL in sync and once in async k=1 (``stale_groups: wait``), the same seed, so the same warm
start and the same trained groups (every iteration trains ``batch_size`` groups in both modes); the final
checkpoints' success on the pool (``core.eval``, the same episodes and passes) side by side, and async's trained
groups and tokens per hour of RL loop time over sync's (the main job's own throughput, from its warm start).
Target (issue 36): async within 3 points of sync (mean over the seeds). About 26 minutes per seed on 2 cores;
with ``--quick`` the learning bench's smoke settings (2 tasks, 1 iteration: a check of the path, not a measurement).
Beside it, in seconds, the SIMULATED learner of ``bench/samplers.py`` (3000 tasks, 200 iterations, 5 seeds,
every learner setting, frontier and uniform) on the synchronous schedule and on async k=1's (the sampler sees
outcomes one batch late, rollouts come from the learner one update behind): final mean pass rate at equal
trained groups. It has no gradient, so it measures what the lag costs the sampler, not off-policy bias; the
recipe runs measure that. ``--simulated-learner-only`` runs just this part.

``--quick``: latencies x 0.1, 8 slots, one seed, sync and async k=1 only, 3 iterations (about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
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
         "async_k1": ["rollout_loop.mode=async", "rollout_loop.max_staleness=1", "rollout_loop.stale_groups=wait"],
         "async_k1_drop": ["rollout_loop.mode=async", "rollout_loop.max_staleness=1",
                           "rollout_loop.stale_groups=drop"],
         "async_k2": ["rollout_loop.mode=async", "rollout_loop.max_staleness=2", "rollout_loop.stale_groups=wait"]}
QUICK_MODES = ("sync", "async_k1")
PARITY_MODES = ("sync", "async_k1")  # (c): the learning comparison
TARGET_TOKENS_RATIO = 1.5
TARGET_UNTRAINED_SHARE = 0.02
TARGET_PARITY_POINTS = 0.03
QUICK_SCALE = 0.1  # --quick: every latency x 0.1
N_ROLLOUTS = 4
SIMULATED_LEARNER_SAMPLERS = ("frontier", "uniform")  # (c): the main job's sampler and the baseline


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "load_average_1m_at_start": round(os.getloadavg()[0], 2)}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_mode(config: Path, overrides: list[str], out: Path) -> dict[str, Any]:
    """One ``core.run``; what it trained, what it cost and how long its loop took."""
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

    def total(key: str) -> float:
        return float(sum(r.get(key, 0.0) for r in rows))

    env_s = total("work/env_seconds") + total("work/env_seconds_left_at_end")
    wasted_s = total("work/env_seconds_untrained") + total("work/env_seconds_left_at_end")
    result: dict[str, Any] = {
        "iterations": len(rows),
        "loop_s": round(loop_s, 2),
        "process_wall_s": round(wall, 2),
        "iterations_per_hour": round(3600 * len(rows) / loop_s, 2),
        "trained_tokens_per_hour": round(3600 * total("tokens/total") / loop_s, 1),
        "trained_groups_per_hour": round(3600 * total("work/groups_trained") / loop_s, 2),
        "trained_episodes": int(total("rollout/episodes")),
        "env_steps": int(total("work/env_steps")),
        "env_seconds": round(env_s, 1),
        "untrained_env_share": round(wasted_s / env_s, 4) if env_s else 0.0,
        "turns_mean_trained": round(statistics.fmean(r["work/turns_mean_trained"] for r in rows), 2),
        "turns_mean_run": round(statistics.fmean(r["work/turns_mean_run"] for r in rows), 2),
        "rollout_s_mean": round(total("time/rollout") / len(rows), 2),
        "train_s_mean": round((total("time/train") + total("time/weight_sync")) / len(rows), 2),
        "success": round(statistics.fmean(r.get("success/rate", 0.0) for r in rows), 3),
    }
    if "async/staleness_mean" in rows[0]:
        staleness: dict[str, float] = {}
        for r in rows:
            for key, value in r.items():
                suffix = key[len("async/staleness_"):]
                if key.startswith("async/staleness_") and suffix.isdigit():
                    staleness[suffix] = staleness.get(suffix, 0) + value
        result.update({
            "trainer_idle_share": round(statistics.fmean(r["async/trainer_idle_share"] for r in rows), 3),
            "rollout_idle_share": round(statistics.fmean(r["async/rollout_idle_share"] for r in rows), 3),
            "staleness_histogram": staleness,
            "dropped_stale": total("async/dropped_stale"),
            "due_extra": total("async/due_extra"),
            "groups_left_at_end": total("async/groups_left_at_end"),
        })
    else:  # sync: the trainer idles through the rollout phase, the slots through training and the stragglers
        result.update({
            "trainer_idle_share": round(total("time/rollout") / loop_s, 3),
            "rollout_idle_share": round((total("time/train") + total("time/weight_sync")) / loop_s, 3),
        })
    return result


def bounds(sync: dict[str, Any], slots: int) -> dict[str, float]:
    """What async could gain at most over this sync run: pure overlap, and overlap without stragglers."""
    r, t = sync["rollout_s_mean"], sync["train_s_mean"]
    used = sync["env_seconds"] / (slots * r * sync["iterations"]) if r else 1.0
    return {"pure_overlap": round((r + t) / max(r, t), 3),
            "straggler_free": round((r + t) / max(min(used, 1.0) * r, t), 3),
            "sync_slot_use_in_rollout": round(min(used, 1.0), 3)}


def seed_overrides(config: Path, seed: int) -> list[str]:
    """The run's seed, and the simulated desktops' own (real desktops take none)."""
    return [f"run.seed={seed}"] + ([f"environment.options.seed={seed}"] if config == SIMULATED else [])


def compare(name: str, config: Path, overrides: list[str], work: Path, modes: tuple[str, ...], seeds: list[int],
            slots: int) -> dict[str, Any]:
    per_seed: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for seed in seeds:
        for mode in modes:
            log(f"{name}: seed {seed}: {mode} ...")
            extra = seed_overrides(config, seed) + MODES[mode]
            per_seed[mode].append(run_mode(config, [*overrides, *extra], work / name / f"{mode}-{seed}"))
            r = per_seed[mode][-1]
            log(f"{name}: seed {seed}: {mode}: {r['trained_tokens_per_hour']} trained tokens/hour, "
                f"{r['iterations_per_hour']} iterations/hour, untrained env share {r['untrained_env_share']}")
    out: dict[str, Any] = {"seeds": seeds, "modes": {}, "bounds_per_seed": [bounds(s, slots) for s in per_seed["sync"]]}
    for mode, runs in per_seed.items():
        ratios = [run["trained_tokens_per_hour"] / base["trained_tokens_per_hour"]
                  for run, base in zip(runs, per_seed["sync"])]
        iteration_ratios = [run["iterations_per_hour"] / base["iterations_per_hour"]
                            for run, base in zip(runs, per_seed["sync"])]
        out["modes"][mode] = {
            "trained_tokens_per_hour_vs_sync": {"mean": round(statistics.fmean(ratios), 3),
                                                "sd": round(statistics.stdev(ratios), 3) if len(ratios) > 1 else 0.0,
                                                "per_seed": [round(x, 3) for x in ratios]},
            "iterations_per_hour_vs_sync": {"mean": round(statistics.fmean(iteration_ratios), 3),
                                            "per_seed": [round(x, 3) for x in iteration_ratios]},
            "untrained_env_share": {"mean": round(statistics.fmean(r["untrained_env_share"] for r in runs), 4),
                                    "max": max(r["untrained_env_share"] for r in runs)},
            "runs": runs,
        }
    return out


def learning_bench() -> Any:
    """``bench/learning.py`` (it runs a recipe once per seed), imported from this checkout."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import learning

    return learning


def samplers_bench() -> Any:
    """``bench/samplers.py`` (the simulated learner), imported from this checkout."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import samplers

    return samplers


def simulated_learner_parity(quick: bool) -> dict[str, Any]:
    """``bench/samplers.py``'s simulated learner on the synchronous schedule and on async k=1's (batch ``b``
    selected with batches up to ``b - 2`` observed, rolled out by the learner one update behind, trained on the
    current one): final mean true pass rate at equal trained groups, per learner setting and sampler."""
    sim = samplers_bench()
    settings = sim.Settings(iterations=60, seeds=2) if quick else sim.Settings()
    learners = {"base": {}} if quick else sim.LEARNERS
    rows: dict[str, Any] = {}
    for label, changes in learners.items():
        model = sim.LearnerModel(**{**({"tasks": 800} if quick else {}), **changes})
        for name in SIMULATED_LEARNER_SAMPLERS:
            final: dict[str, list[float]] = {mode: [] for mode in PARITY_MODES}
            trained: dict[str, list[int]] = {mode: [] for mode in PARITY_MODES}
            for seed in range(settings.seeds):
                for mode, staleness in zip(PARITY_MODES, (0, 1)):
                    run = sim.run_one(name, {}, model, settings, seed, staleness=staleness)
                    final[mode].append(run["final_mean_pass_rate"])
                    trained[mode].append(run["groups_trained"])
            if trained["sync"] != trained["async_k1"]:
                raise RuntimeError(f"simulated learner {label}/{name}: unequal trained groups {trained}")
            diffs = [a - b for a, b in zip(final["async_k1"], final["sync"])]
            rows[f"{label}/{name}"] = {
                **{mode: round(statistics.fmean(final[mode]), 4) for mode in PARITY_MODES},
                "async_minus_sync": {"mean": round(statistics.fmean(diffs), 4),
                                     "per_seed": [round(d, 4) for d in diffs],
                                     "sd": round(statistics.stdev(diffs), 4) if len(diffs) > 1 else 0.0},
                "trained_groups": trained["sync"][0]}
    worst = max(abs(row["async_minus_sync"]["mean"]) for row in rows.values())
    return {"settings": {"learner_tasks": 800 if quick else sim.LearnerModel().tasks,
                         "iterations": settings.iterations, "batch_size": settings.batch_size,
                         "n_rollouts": settings.n_rollouts, "seeds": settings.seeds,
                         "samplers": list(SIMULATED_LEARNER_SAMPLERS)},
            "learners": rows,
            "models": "the lag only (stale pass rates for the sampler, stale successes deciding which groups are "
                      "informative); the simulated learner has no gradient, so off-policy bias is not in it",
            "target": {"within": TARGET_PARITY_POINTS, "worst_mean": worst, "met": worst <= TARGET_PARITY_POINTS}}


def per_hour_ratios(sync: dict[str, Any], async_k1: dict[str, Any]) -> dict[str, float | None]:
    """Async k=1's trained groups and tokens per second of RL loop time, over sync's."""
    def per_second(run: dict[str, Any]) -> tuple[float, float] | None:
        seconds = run["rl_work"]["loop_seconds"]
        return (run["trained_groups"] / seconds, run["rl_work"]["trained_tokens"] / seconds) if seconds > 0 else None

    a, s = per_second(async_k1), per_second(sync)
    if a is None or s is None or not all(s):
        return {"groups": None, "tokens": None}
    return {"groups": round(a[0] / s[0], 3), "tokens": round(a[1] / s[1], 3)}


def learning_parity(seeds: list[int], overrides: list[str]) -> dict[str, Any]:
    """The main job's recipe per seed, RL in sync and in async k=1: final success side by side."""
    run_seed = learning_bench().run_seed
    per_seed = []
    for seed in seeds:
        row: dict[str, Any] = {"seed": seed}
        for mode in PARITY_MODES:
            log(f"learning parity: seed {seed}: {mode} (the whole recipe) ...")
            run = run_seed(str(QUICKSTART), seed, [*overrides, *MODES[mode]])
            if "error" in run:
                raise SystemExit(f"learning parity: seed {seed}, {mode}: {run['error']}")
            row[mode] = {key: run[key] for key in ("warm_start", "after_rl", "gain", "trained_groups", "rl_work",
                                                   "lowest_training_success_vs_warm_start", "stage_seconds",
                                                   "training_success_per_iteration")}
        row["async_minus_sync"] = round(row["async_k1"]["after_rl"]["success"] - row["sync"]["after_rl"]["success"], 4)
        row["async_vs_sync_per_hour"] = per_hour_ratios(row["sync"], row["async_k1"])
        log(f"learning parity: seed {seed}: sync {row['sync']['after_rl']['success']}, async k=1 "
            f"{row['async_k1']['after_rl']['success']} after RL")
        per_seed.append(row)
    diffs = [r["async_minus_sync"] for r in per_seed]
    mean = statistics.fmean(diffs)
    return {"per_seed": per_seed,
            "async_minus_sync": {"mean": round(mean, 4), "per_seed": diffs,
                                 "sd": round(statistics.stdev(diffs), 4) if len(diffs) > 1 else 0.0},
            "target": {"within": TARGET_PARITY_POINTS, "met": abs(mean) <= TARGET_PARITY_POINTS}}


def simulated_overrides(quick: bool, iterations: int, scale: float, slots: int | None) -> list[str]:
    """The simulated config's overrides; ``slots``: equal slots with sync's batch filling them (None: the
    config's own fixed batch)."""
    out = [f"run.iterations={iterations}", f"run.checkpoint_every={iterations}",
           f"environment.options.step_latency_s=[{scale * 1.0:g},{scale * 3.0:g}]",
           f"environment.options.reset_latency_s=[{scale * 1.0:g},{scale * 3.0:g}]"]
    if quick:
        out.append("algorithm.max_turns=20")
    if slots is not None:
        out += [f"environment.options.max_environments={slots}", f"rollout_loop.concurrency={slots}",
                f"algorithm.n_rollouts={N_ROLLOUTS}", f"algorithm.batch_size={slots // N_ROLLOUTS}"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="latencies x 0.1, 8 slots, one seed, sync and async k=1")
    parser.add_argument("--desktops", action="store_true", help="also (b): real local desktops, quickstart settings")
    parser.add_argument("--iterations", type=int, default=None, help="iterations per run (default 3 quick, 6)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 0 quick, 0 1 2)")
    parser.add_argument("--slots", type=int, default=None, help="environment slots, a multiple of 4 (default 8 "
                                                                "quick, 16)")
    parser.add_argument("--latency-scale", type=float, default=None,
                        help="multiply the simulated desktops' latencies (default 0.1 quick, 1)")
    parser.add_argument("--no-fixed-batch", action="store_true", help="skip the fixed-batch comparison")
    parser.add_argument("--learning-parity", action="store_true",
                        help="only (c): the main job's recipe per seed with RL in sync and in async k=1")
    parser.add_argument("--simulated-learner-only", action="store_true",
                        help="with --learning-parity: only the simulated learner's parity (seconds), no recipe runs")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="(c) only: overrides of the recipe")
    args = parser.parse_args()
    if args.overrides and not args.learning_parity:
        parser.error("KEY=VALUE overrides apply to --learning-parity only")
    if args.simulated_learner_only and not args.learning_parity:
        parser.error("--simulated-learner-only goes with --learning-parity")
    if args.learning_parity:
        seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
        overrides = [*(learning_bench().QUICK if args.quick else []), *args.overrides]
        report: dict[str, Any] = {"bench": "async_pipeline", "machine": machine(), "settings": {"quick": args.quick},
                                  "simulated_learner_parity": simulated_learner_parity(args.quick)}
        if not args.simulated_learner_only:
            report["settings"].update({"seeds": seeds, "config": str(QUICKSTART.relative_to(ROOT)),
                                       "overrides": overrides, "modes": {m: MODES[m] for m in PARITY_MODES}})
            report["learning_parity"] = learning_parity(seeds, overrides)
        print(json.dumps(report))
        return 0
    iterations = args.iterations or (3 if args.quick else 6)
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    slots = args.slots or (8 if args.quick else 16)
    if slots % N_ROLLOUTS:
        parser.error(f"--slots must be a multiple of n_rollouts ({N_ROLLOUTS}), got {slots}")
    modes = QUICK_MODES if args.quick else tuple(MODES)
    scale = args.latency_scale if args.latency_scale is not None else (QUICK_SCALE if args.quick else 1.0)
    equal = simulated_overrides(args.quick, iterations, scale, slots)
    with tempfile.TemporaryDirectory(prefix="bench-async-") as tmp:
        work = Path(tmp)
        report: dict[str, Any] = {
            "bench": "async_pipeline",
            "machine": machine(),
            "settings": {"quick": args.quick, "iterations_per_run": iterations, "seeds": seeds, "slots": slots,
                         "latency_scale": scale, "modes": {m: MODES[m] for m in modes},
                         "equal_slots": {"config": str(SIMULATED.relative_to(ROOT)), "overrides": equal}},
            "equal_slots": compare("equal_slots", SIMULATED, equal, work, modes, seeds, slots),
        }
        if not args.quick and not args.no_fixed_batch:
            fixed = simulated_overrides(False, iterations, scale, None)
            report["settings"]["fixed_batch"] = {"config": str(SIMULATED.relative_to(ROOT)), "overrides": fixed,
                                                 "note": "32 slots, a batch of 4 tasks x 4 rollouts: sync uses half"}
            report["fixed_batch"] = compare("fixed_batch", SIMULATED, fixed, work, ("sync", "async_k1"), seeds[:1], 32)
        headline = report["equal_slots"]["modes"]["async_k1"]
        report["target"] = {
            "async_k1_trained_tokens_vs_sync": {"target": TARGET_TOKENS_RATIO,
                                                "measured": headline["trained_tokens_per_hour_vs_sync"]["mean"],
                                                "met": headline["trained_tokens_per_hour_vs_sync"]["mean"]
                                                >= TARGET_TOKENS_RATIO},
            "untrained_env_share_wait": {"target": TARGET_UNTRAINED_SHARE,
                                         "measured": headline["untrained_env_share"]["max"],
                                         "met": headline["untrained_env_share"]["max"] <= TARGET_UNTRAINED_SHARE},
        }
        if args.desktops:
            desk = [f"run.iterations={iterations}", f"run.checkpoint_every={iterations}", "run.eval_every=0"]
            report["settings"]["desktops"] = {"config": str(QUICKSTART.relative_to(ROOT)), "overrides": desk}
            report["desktops"] = compare("desktops", QUICKSTART, desk, work, ("sync", "async_k1"), seeds[:1], 8)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
