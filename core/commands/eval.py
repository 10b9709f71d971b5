"""``python -m core.eval --config FILE [--checkpoint DIR] [--passes 4] [KEY=VALUE ...]``.

Runs every evaluation task ``passes`` times (the set ``--set`` names in
``tasks.eval_sets``; else ``tasks.eval_paths``; else ``tasks.paths``) and prints per-domain success rates with the standard
deviation over passes, plus pass@k (k = 1, 2, 4, 8; the unbiased estimator,
null where k exceeds the passes) in the layout of the paper's Table 2. Writes
the same numbers as JSON (``--out``, default ``<run_dir>/eval.json``).

Domains are the tasks' ``snapshot`` (OSWorld) unless ``extra.eval_groups``
maps group names to lists of domains (e.g. the paper's Office = calc, writer,
impress).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import structlog

from core.runtime import checkpoint, logs, rundir
from core.commands.cli import config_parser, main_guard
from core.config import load_config
from core.errors import CheckpointError
from core.runtime.components import build_components
from core.weight_sync import sync_weights
from core.runtime.metrics import write_rollouts
from core.runtime.rollouts import collect_groups
from core.runtime.shots import ScreenshotPolicy
from core.types import RolloutGroup, Task

log = structlog.get_logger(__name__)
REQUIRED_SLOTS = ("model", "environment", "segmenter", "rollout", "judge")
PASS_AT = (1, 2, 4, 8)


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k from n samples with c successes (Chen et al., 2021); None when k > n."""
    if k > n:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def domain_of(task: Task, groups: Mapping[str, Sequence[str]]) -> str:
    for name, members in groups.items():
        if task.domain in members:
            return name
    return task.domain or "unknown"


def summarize(results: Sequence[RolloutGroup], tasks: Mapping[str, Task], passes: int,
              groups: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Per-domain mean +- std of the per-pass success rate, and pass@k, plus the overall row."""
    by_domain: dict[str, list[list[bool]]] = {}
    for group in results:
        outcomes = [t.success for t in group.trajectories]
        by_domain.setdefault(domain_of(tasks[group.task_id], groups), []).append(outcomes)
    by_domain["Overall"] = [o for rows in list(by_domain.values()) for o in rows]

    table: dict[str, Any] = {}
    for domain, rows in by_domain.items():
        per_pass = [
            100.0 * statistics.fmean(row[p] for row in rows if p < len(row))
            for p in range(passes)
            if any(p < len(row) for row in rows)
        ]
        table[domain] = {
            "tasks": len(rows),
            "success": statistics.fmean(per_pass) if per_pass else 0.0,
            "std": statistics.pstdev(per_pass) if len(per_pass) > 1 else 0.0,
            "pass_at": {
                str(k): (None if any(pass_at_k(len(r), sum(r), k) is None for r in rows)
                         else 100.0 * statistics.fmean(pass_at_k(len(r), sum(r), k) for r in rows))
                for k in PASS_AT
            },
        }
    return table


def by_family(results: Sequence[RolloutGroup], tasks: Mapping[str, Task]) -> dict[str, Any]:
    """Success (%) per task family (``metadata.family``, :mod:`plugins.synthesis.families`); {} without families."""
    rows: dict[str, list[float]] = {}
    for group in results:
        family = tasks[group.task_id].metadata.get("family")
        if family is not None and group.trajectories:
            rows.setdefault(str(family), []).append(statistics.fmean(t.success for t in group.trajectories))
    return {f: {"tasks": len(r), "success": round(100.0 * statistics.fmean(r), 2)} for f, r in sorted(rows.items())}


def format_table(table: Mapping[str, Any], title: str) -> str:
    domains = [d for d in table if d != "Overall"] + ["Overall"]
    width = max(10, *(len(d) for d in domains)) + 2
    lines = [title, "".join(f"{'':<12}") + "".join(f"{d:>{width}}" for d in domains)]
    lines.append(f"{'success %':<12}" + "".join(
        f"{table[d]['success']:>{width - 6}.1f}±{table[d]['std']:<5.1f}" for d in domains))
    for k in PASS_AT:
        cells = [table[d]["pass_at"][str(k)] for d in domains]
        lines.append(f"{f'pass@{k} %':<12}" + "".join(
            f"{'-':>{width}}" if c is None else f"{c:>{width}.1f}" for c in cells))
    lines.append(f"{'tasks':<12}" + "".join(f"{table[d]['tasks']:>{width}}" for d in domains))
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class EvalRun:
    """One evaluation of a checkpoint: its set (a ``tasks.eval_sets`` name; None: the only set
    ``tasks.eval_paths`` names, else the training pool), passes, decoding and the run directory it writes."""

    eval_set: str | None
    passes: int
    greedy: bool
    run_dir: Path


async def evaluate(resolved: Any, plugins: Any, run_dir: Path, *, ckpt: Path | None, passes: int,
                   eval_set: str | None = None, greedy: bool = False) -> dict[str, Any]:
    """Roll ``ckpt`` out ``passes`` times on every task of ``eval_set`` (a ``tasks.eval_sets`` name; None: the
    only set ``tasks.eval_paths`` names, else the training pool); ``greedy``: decode the most likely token."""
    [result] = await evaluate_runs(resolved, plugins, ckpt=ckpt, runs=[EvalRun(eval_set, passes, greedy, run_dir)])
    return result


async def evaluate_runs(resolved: Any, plugins: Any, *, ckpt: Path | None,
                        runs: Sequence[EvalRun]) -> list[dict[str, Any]]:
    """Every run of ``runs`` from one checkpoint, on one set of live components (one model and weight load, one
    pool of desktops), all at once under ``rollout_loop.concurrency``. Each run keeps the episode seeds it has
    alone, so its numbers are those of a separate ``core.eval``; only the waiting between runs is gone."""
    cfg = resolved.config
    named = [r.eval_set if r.eval_set is not None or not cfg.tasks.eval_paths else "eval" for r in runs]
    c = build_components(resolved, plugins, runs[0].run_dir, train=False, eval_sets=list(dict.fromkeys(named)))
    try:
        if ckpt is not None:
            trainer = resolved.create("trainer", plugins, model=c.model, algorithm=cfg.algorithm, seed=cfg.run.seed)
            try:
                if not (ckpt / checkpoint.COMPLETE_MARKER).is_file():
                    raise CheckpointError(f"{ckpt} is not a complete checkpoint directory (no COMPLETE marker)")
                trainer.load(ckpt / "trainer")
                sync_weights(trainer, c.engine, checkpoint.iteration_of(ckpt) or 0)
            finally:
                trainer.close()
        greedy = dataclasses.replace(c.deps, settings=dataclasses.replace(c.deps.settings, greedy=True))
        limit = asyncio.Semaphore(cfg.rollout_loop.concurrency)
        collected = await asyncio.gather(*(
            collect_groups(c.set_ids[name], c.tasks, greedy if run.greedy else c.deps, n=run.passes,
                           concurrency=cfg.rollout_loop.concurrency, retries=cfg.rollout_loop.env_retries,
                           iteration=0, seed=cfg.run.seed, tag="eval" if i == 0 else f"eval{i}-", limit=limit)
            for i, (run, name) in enumerate(zip(runs, named))))
    finally:
        await c.close()
    groups = cfg.extra.get("eval_groups", {}) or {}
    out = []
    for run, name, (results, stats) in zip(runs, named, collected):
        write_rollouts(run.run_dir, 0, results, tag="eval", screenshots=ScreenshotPolicy.of(cfg.run))
        tasks = {tid: c.tasks[tid] for tid in c.set_ids[name]}
        out.append({"checkpoint": str(ckpt) if ckpt else None, "eval_set": name, "passes": run.passes,
                    "seed": cfg.run.seed, "greedy": run.greedy, "env_errors": stats.env_errors,
                    "lost_rollouts": stats.lost_rollouts, "domains": summarize(results, tasks, run.passes, groups),
                    "families": by_family(results, tasks),
                    "pass_rates": {g.task_id: sum(g.successes) / len(g.trajectories) for g in results}})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = config_parser("python -m core.eval", "per-domain success rates and pass@k")
    parser.add_argument("--checkpoint", type=Path, default=None, help="a checkpoint directory (iter_NNNNNN), or a run directory: its newest complete one")
    parser.add_argument("--passes", type=int, default=4, help="independent rollouts per task (default 4)")
    parser.add_argument("--out", type=Path, default=None, help="JSON output (default <run_dir>/eval.json)")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding (default: sampled at the "
                        "algorithm's temperature)")
    parser.add_argument("--set", dest="eval_set", default=None,
                        help="the evaluation set of tasks.eval_sets to run (default: tasks.eval_paths, else the pool)")
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be >= 1")
    logs.configure()
    if args.checkpoint is not None:
        args.checkpoint = checkpoint.resolve_checkpoint(args.checkpoint, what="--checkpoint")
    resolved, plugins = load_config(args.config, [*args.overrides, f"run.name={_name(args)}"],
                                    required=REQUIRED_SLOTS)
    run_dir = rundir.prepare(resolved, plugins, command="core.eval")
    logs.configure(resolved.config.run.log_level, run_dir / "log.jsonl")
    result = asyncio.run(evaluate(resolved, plugins, run_dir, ckpt=args.checkpoint, passes=args.passes,
                                  eval_set=args.eval_set, greedy=args.greedy))
    out = args.out or run_dir / "eval.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    title = f"Success rates (%), {args.passes} passes" + (f", checkpoint {args.checkpoint}" if args.checkpoint else "")
    print(format_table(result["domains"], title))
    print(f"\nwritten: {out}")
    return 0


def _name(args: Any) -> str:
    return "eval-" + (args.checkpoint.name if args.checkpoint else Path(args.config).stem)


if __name__ == "__main__":
    sys.exit(main_guard(main))
