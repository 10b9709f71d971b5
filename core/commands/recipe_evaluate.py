"""The recipe's evaluate stage: each evaluation set from each checkpoint, the floors, the before/after tables.

``before_after.json`` is ``{"sets": {name: {"before", "after", "control", "before_greedy", ..., "floors"}}}``
with the first set's ``before`` and ``after`` also at the top (the headline); ``before_after.md`` holds the
tables (:func:`core.commands.recipe_report.before_after_report`) and links each set's episode pages.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping

from core.commands.eval import EvalRun, evaluate_runs
from core.commands.recipe_report import before_after_report, episode_pages
from core.config import ResolvedConfig
from core.config.stages import EvaluateStage
from core.pluginmanager import Plugins
from core.runtime import rundir


def evaluate_sets(where: Path, resolved: ResolvedConfig, plugins: Plugins, spec: EvaluateStage,
                  checkpoints: Mapping[str, str | None], *, reused_before: Callable[[], dict[str, Any] | None],
                  train_tasks: Callable[[], list[Any]]) -> dict[str, Any]:
    """Each set of ``spec.sets`` (default: the RL pool, ``"pool"``) from ``checkpoints`` (``before``, and
    ``after`` / ``control`` where set), sampled (``spec.passes``) and greedy (one pass), and the set's floors.
    One checkpoint's runs, every set sampled and greedy, share one set of desktops and run at once
    (:func:`core.commands.eval.evaluate_runs`).
    ``reused_before`` gives the refinement's result when it already *is* the pool's "before" evaluation;
    ``train_tasks`` the training pool (the frequent-oracle floor)."""
    targets: list[str | None] = list(spec.sets) if spec.sets else [None]
    bases = {target: where if target is None else where / target for target in targets}
    sets: dict[str, dict[str, Any]] = {target or "pool": {} for target in targets}
    if None in targets and (reused := reused_before()) is not None:
        sets["pool"]["before"] = reused
    for label, ckpt in checkpoints.items():
        if label != "before" and not ckpt:
            continue
        runs = [(target, label + ("_greedy" if greedy else ""), greedy)
                for greedy in ((False, True) if spec.greedy else (False,)) for target in targets]
        runs = [r for r in runs if r[1] not in sets[r[0] or "pool"]]
        if not runs:
            continue
        plans = [EvalRun(target, 1 if greedy else spec.passes, greedy, _fresh(bases[target] / key, resolved, plugins))
                 for target, key, greedy in runs]
        done = asyncio.run(evaluate_runs(resolved, plugins, ckpt=Path(ckpt) if ckpt else None, runs=plans))
        for (target, key, _), plan, result in zip(runs, plans, done):
            sets[target or "pool"][key] = result
            rundir.write_json_atomic(plan.run_dir / "eval.json", result)
    pages: dict[str, str | None] = {}
    for target in targets:
        name, results = target or "pool", sets[target or "pool"]
        if spec.floors:
            from core.commands.floors import measure_floors

            run_dir = _fresh(bases[target] / "floors", resolved, plugins)
            results["floors"] = asyncio.run(measure_floors(resolved, plugins, run_dir, eval_set=target,
                                                           train_tasks=train_tasks()))
        pages[name] = episode_pages(where, name, bases[target], results)
    headline = sets[targets[0] or "pool"]
    everything = {"before": headline.get("before"), "after": headline.get("after"), "sets": sets}
    rundir.write_json_atomic(where / "before_after.json", everything)
    table = before_after_report(everything)
    links = "".join(f"\n- {name}: {Path(page).relative_to(where)}" for name, page in pages.items() if page)
    (where / "before_after.md").write_text(
        table + (f"\n\nEpisodes, before and after side by side:{links}" if links else "") + "\n", encoding="utf-8")
    print(table)
    return {"before_after": str(where / "before_after.json"), "table": str(where / "before_after.md"),
            "episodes": pages}


def _fresh(run_dir: Path, resolved: ResolvedConfig, plugins: Plugins) -> Path:
    """An evaluation's run directory, emptied: evaluations are not checkpointed, a resumed stage redoes them."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    rundir.prepare_at(run_dir, resolved, plugins)
    return run_dir
