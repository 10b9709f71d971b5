"""Does the agent learn, on every run? The main job's recipe, run fresh once per seed, reported as one JSON object.

``python bench/learning.py [--seeds 0 1 2] [--quick] [--config FILE] [KEY=VALUE ...]`` runs ``python -m
core.pipeline`` on the config (default ``configs/quickstart.yaml``) once per seed, each in a fresh temporary
output directory with ``run.seed`` and ``model.options.seed`` set to the seed (the model's random weights, the
warm start's batches, the episodes and the sampler all change with it), and prints one JSON object on stdout
(the recipe's own logs go to stderr):

* ``per_seed``: warm-start and post-RL success (``core.eval``: mean and std over passes, the same tasks and
  seeds before and after), the gain, the lowest training-batch success of any RL iteration relative to the
  warm start's success (a collapse shows here), the KL stops, wall time per stage; with evaluation sets
  (``recipe.evaluate.sets``, e.g. ``configs/families-rl.yaml``) each set's numbers too: sampled, greedy,
  pass@k, the floors and the per-family table, and the segments per episode and batch-versus-pool sizes of RL;
* ``mean`` and ``spread`` (sd, min, max) of the gain over the seeds, and the gains one by one (the headline:
  the first evaluation set, else the pool), and each set's mean gain;
* ``targets``: the learning issue's, each with whether every run met it; ``machine`` and ``settings``.

``--quick`` (a smoke run of the whole path, not a learning measurement: 2 tasks, 2 warm-start epochs,
1 RL iteration, 1 evaluation pass, one seed) finishes in about a minute on 2 cores. Nothing is cached
between runs: every number comes from this invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
#: the learning issue's targets on the evaluation split (absolute success, 0..1)
TARGETS = {"mean_gain": 0.10, "every_seed_gain": 0.05, "lowest_training_success_vs_warm_start": -0.10}
#: and on a sample of the training split (an evaluation set named ``train``), when the config has one
TRAIN_TARGET = 0.15
QUICK = ["tasks.include=[os-count-lines,os-make-executable]", "run.iterations=1", "run.checkpoint_every=1",
         "warm_start.epochs=2", "algorithm.batch_size=2", "algorithm.n_rollouts=2", "algorithm.max_turns=4",
         "recipe.refine.rollouts=1", "recipe.evaluate.passes=1", "environment.options.settle_s=0.0"]


def run_seed(config: str, seed: int, overrides: Sequence[str]) -> dict[str, Any]:
    """One fresh recipe run; its report's numbers, or ``error``."""
    with tempfile.TemporaryDirectory(prefix=f"scalecua-learning-s{seed}-") as out:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "core.pipeline", "--config", config, f"run.output_dir={out}",
                               f"run.seed={seed}", f"model.options.seed={seed}", *overrides],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wall = round(time.perf_counter() - started, 1)
        if proc.returncode != 0:
            return {"seed": seed, "error": f"core.pipeline exited {proc.returncode}", "wall_s": wall}
        summaries = list(Path(out).glob("*/report/summary.json"))
        if len(summaries) != 1:
            return {"seed": seed, "error": f"expected one report/summary.json, found {len(summaries)}"}
        summary = json.loads(summaries[0].read_text(encoding="utf-8"))
        metrics = [json.loads(line) for line in next(Path(out).glob("*/rl/metrics.jsonl")).read_text().splitlines()
                   if line.strip()]
    return seed_result(seed, summary, metrics, wall)


def seed_result(seed: int, summary: dict[str, Any], metrics: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    before, after = summary.get("warm_start_success") or {}, summary.get("post_rl_success") or {}
    batch = [r.get("success/rate", 0.0) for r in metrics]
    lowest = min(batch) - before["success"] if batch and "success" in before else None
    per_episode = [r["segments/per_episode"] for r in metrics if "segments/per_episode" in r]
    return {
        "seed": seed, "wall_s": wall, "stage_seconds": summary.get("stage_seconds"),
        "warm_start": before, "after_rl": after, "gain": summary.get("rl_gain"),
        "eval_sets": summary.get("eval_sets"),
        "segments_per_episode": {"mean": round(statistics.fmean(per_episode), 3),
                                 "max_iteration_mean": max(per_episode)} if per_episode else None,
        "batch_vs_pool": {"batch_tasks_max": max((r.get("groups/kept", 0) for r in metrics), default=None),
                          "pool_tasks": max((r.get("sampler/selectable_tasks", 0) for r in metrics), default=None)},
        "trained_groups": int(sum(r.get("work/groups_trained", 0) for r in metrics)),
        # the RL loop's work and time (iterations only: no model load, evaluation or checkpoint pruning)
        "rl_work": {"trained_tokens": int(sum(r.get("tokens/total", 0) for r in metrics)),
                    "loop_seconds": round(sum(r.get("time/iteration", 0.0) for r in metrics), 1)},
        "lowest_training_success_vs_warm_start": None if lowest is None else round(lowest, 4),
        "training_success_per_iteration": [round(v, 4) for v in batch],
        "kl_stops": sum(1 for r in metrics if r.get("train/actor/kl_stopped")),
        "largest_approx_kl": max((r.get("train/actor/approx_kl_max", r.get("train/actor/approx_kl", 0.0))
                                  for r in metrics), default=None),
    }


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    gains = [r["gain"] for r in runs if r.get("gain") is not None]
    lows = [r["lowest_training_success_vs_warm_start"] for r in runs
            if r.get("lowest_training_success_vs_warm_start") is not None]
    if not gains:
        return {"mean": None, "spread": None, "targets": None}
    mean = statistics.fmean(gains)
    mean_of = lambda key: round(statistics.fmean(r[key]["success"] for r in runs if r.get(key)), 4)  # noqa: E731
    sets = {name: _set_means([r["eval_sets"][name] for r in runs if (r.get("eval_sets") or {}).get(name)])
            for name in dict.fromkeys(n for r in runs for n in (r.get("eval_sets") or {}))}
    train = sets.get("train", {}).get("gain")
    # the headline set: the test split (summaries list sets by name, so the first is not the test split)
    headline = sets.get("test") or next(iter(sets.values()), {})
    control = headline.get("sft_only_control")
    return {
        "mean": {"warm_start": mean_of("warm_start"), "after_rl": mean_of("after_rl"), "gain": round(mean, 4)},
        "sets": sets,
        "spread": {"gain_sd": round(statistics.stdev(gains), 4) if len(gains) > 1 else 0.0,
                   "gain_min": min(gains), "gain_max": max(gains), "gains": gains},
        "targets": {
            "mean_gain": {"target": TARGETS["mean_gain"], "measured": round(mean, 4),
                          "met": mean >= TARGETS["mean_gain"]},
            "every_seed_gain": {"target": TARGETS["every_seed_gain"], "measured": min(gains),
                                "met": min(gains) >= TARGETS["every_seed_gain"] and len(gains) == len(runs)},
            "lowest_training_success_vs_warm_start": {
                "target": TARGETS["lowest_training_success_vs_warm_start"],
                "measured": min(lows) if lows else None,
                "met": bool(lows) and min(lows) >= TARGETS["lowest_training_success_vs_warm_start"]},
            **({"train_sample_mean_gain": {"target": TRAIN_TARGET, "measured": train, "met": train >= TRAIN_TARGET}}
               if train is not None else {}),
            **({"rl_ahead_of_sft_only_control": {"sft_only_control": control, "after_rl": headline["after_rl"],
                                                 "met": headline["after_rl"] > control}}
               if control is not None and headline.get("after_rl") is not None else {}),
        },
    }


def _set_means(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One evaluation set over the seeds: mean success before/after (sampled and greedy), gain, floors."""
    mean = lambda values: round(statistics.fmean(values), 4) if values else None  # noqa: E731
    pick = lambda *path: [_dig(r, path) for r in rows if _dig(r, path) is not None]  # noqa: E731
    return {"seeds": len(rows), "warm_start": mean(pick("warm_start", "success")),
            "after_rl": mean(pick("after_rl", "success")), "gain": mean(pick("gain")),
            "gains": pick("gain"), "sft_only_control": mean(pick("sft_only_control", "success")),
            "greedy": {"warm_start": mean(pick("greedy", "warm_start", "success")),
                       "after_rl": mean(pick("greedy", "after_rl", "success"))},
            "floors": {name: mean(pick("floors", name)) for name in (rows[0].get("floors") or {})} if rows else {}}


def _dig(row: Any, path: Sequence[str]) -> Any:
    for key in path:
        row = row.get(key) if isinstance(row, dict) else None
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~1 minute smoke run (not a learning measurement)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="one fresh run per seed (default 0 1 2)")
    parser.add_argument("--config", default=str(ROOT / "configs" / "quickstart.yaml"))
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_args()
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    overrides = [*(QUICK if args.quick else []), *args.overrides]
    started = time.perf_counter()
    runs = []
    for seed in seeds:
        print(f"[learning] seed {seed}: fresh run of {args.config}", file=sys.stderr, flush=True)
        runs.append(run_seed(args.config, seed, overrides))
    from core.commands.recipe_report import machine

    result = {"benchmark": "learning", "quick": args.quick, "config": args.config, "seeds": seeds,
              "settings": overrides, "machine": machine(), "wall_s": round(time.perf_counter() - started, 1),
              **aggregate(runs), "per_seed": runs}
    print(json.dumps(result, indent=2))
    return 1 if any("error" in r for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
