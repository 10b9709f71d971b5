"""``python -m core.ablate FILE``: a matrix of plugin swaps, one training run per cell, and a comparison table.

An ablation file::

    base: quickstart.yaml              # relative to this file
    overrides: [run.iterations=20]     # applied to every run
    matrix:                            # slot -> component names (or full {name, options} slots)
      sampler: [frontier, uniform, curriculum, dapo]
      segmenter: [sliding-window, step-wise]
    metrics: [success/rate, reward/mean, groups/informative_share, time/iteration]
    last: 5                            # table cells average the last N iterations
    seeds: [0, 1, 2]                   # optional: every cell once per seed (run.seed); the table gives mean ± sd

``python -m core.ablate FILE [KEY=VALUE ...]``: command-line overrides apply to every cell after the
file's (e.g. ``run.init_from=...`` to start every cell from one checkpoint). ``--recipe RUN`` makes every cell
the RL stage of a recipe run (``python -m core.pipeline`` with the stages before ``rl``): RUN's warm start, its
refine pass rates, its synthesized pool for ``pool:<split>`` task paths, and the base's ``recipe.rl.overrides``.

Ablations swap plugins by name only: a cell replaces a slot's ``name`` and,
when the name changes, drops the base's ``options`` for that slot (they
belong to the other plugin) unless the cell gives its own. Every cell is
validated before any run starts; each run gets its own run directory under
``<run.output_dir>/<ablation name>/``; cells run one after another in child
processes, so a crashed cell does not take the others down (``--jobs N``: N at a time, each child's output in
``<run name>.log``). ``--resume`` (same file and overrides) keeps the
cells an interrupted ablation finished (``cells.jsonl``) and resumes those it was running from their checkpoints.
Besides the table, ``ablation.png`` plots each metric
against the rollouts each cell has spent (the shape of the paper's Figure 6(a): a sampler that draws extra
rollouts, like DAPO's refilling, is compared at equal cost), ``ablation_rollouts.png`` shows where each cell's
rollouts went (the share run on groups of each pass-rate bin: all failed, ..., all succeeded), and
``ablation.json`` keeps those curves and counts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from omegaconf import OmegaConf
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.commands.cli import main_guard
from core.config import SLOT_KINDS, load_config, load_raw
from core.errors import ConfigError
from core.runtime.metrics import PASS_BINS, MetricsLog
from core.runtime.plots import plot_ablation, plot_rollout_bins
from core.runtime.rundir import latest_run_dir
from core.runtime.tasks import POOL_PREFIX, rooted, task_path_lists


#: under the ablation's output folder: one JSON line per finished cell (``--resume`` keeps them)
PROGRESS_FILE = "cells.jsonl"


class AblationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base: str
    name: str | None = None
    overrides: list[str] = Field(default_factory=list)
    matrix: dict[str, list[str | dict[str, Any]]]
    metrics: list[str] = Field(default_factory=lambda: ["success/rate", "reward/mean", "time/iteration"])
    last: int = Field(5, ge=1)
    #: every cell runs once per seed (``run.seed``; the same seeds for every cell); None: once, the base's seed
    seeds: list[int] | None = Field(None, min_length=1)


def load_spec(path: Path) -> AblationSpec:
    try:
        spec = AblationSpec.model_validate(OmegaConf.to_container(OmegaConf.load(path), resolve=True))
    except FileNotFoundError:
        raise ConfigError([f"ablation file {path} does not exist"]) from None
    except ValidationError as exc:
        raise ConfigError([f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]) from None
    bad = [slot for slot in spec.matrix if slot not in SLOT_KINDS and not slot.startswith("synthesis.")]
    if bad:
        raise ConfigError([f"matrix.{slot}: not a plugin slot; slots: {', '.join(SLOT_KINDS)}" for slot in bad])
    return spec


def cell_overrides(base_raw: dict[str, Any], cell: dict[str, str | dict[str, Any]]) -> tuple[str, list[str]]:
    """The label and dotlist overrides of one matrix cell."""
    labels, overrides = [], []
    for slot, choice in cell.items():
        current = base_raw.get(slot) or {}
        if isinstance(choice, dict):
            name, options = choice["name"], choice.get("options")
        else:
            name, options = choice, None
        labels.append(f"{slot}={name}")
        if current.get("options") and (options is not None or current.get("name") != name):
            overrides.append(f"~{slot}.options")
        overrides.append(f"{slot}.name={name}")
        if options:
            overrides.append(f"{slot}.options={json.dumps(options)}")
    return ",".join(labels), overrides


def recipe_overrides(run: Path, base_raw: dict[str, Any]) -> list[str]:
    """``--recipe RUN``: the overrides that make a cell the recipe's RL stage as ``core.pipeline`` runs it from RUN
    (first the base's ``recipe.rl.overrides``, then RUN's warm start, refine pass rates and pool)."""
    state_file = run / "pipeline.json"
    if not state_file.is_file():
        raise ConfigError([f"--recipe {run}: no pipeline.json there; give the run directory of a python -m "
                           "core.pipeline run (its stages before rl completed)"])
    stages = json.loads(state_file.read_text(encoding="utf-8")).get("stages", {})

    def located(value: str | None) -> str | None:
        """A recorded path; one relative to the directory the recipe ran in, rebased onto RUN from here."""
        if value is None or Path(value).exists() or run.name not in Path(value).parts:
            return value
        parts = Path(value).parts
        return str(run.joinpath(*parts[parts.index(run.name) + 1:]))

    def output(stage: str, key: str) -> Any:
        entry = stages.get(stage) or {}
        value = located((entry.get("outputs") or {}).get(key)) if entry.get("status") == "completed" else None
        if value is None or not Path(value).exists():
            raise ConfigError([f"--recipe {run}: the cells need {key} from stage '{stage}', which "
                               + ("has not completed" if entry.get("status") != "completed" else
                                  "did not produce it" if value is None else f"recorded {value!r}, now missing")
                               + f"; complete it: python -m core.pipeline --config ... --resume {run}"])
        return value

    rl = ((base_raw.get("recipe") or {}).get("rl") or {}).get("overrides") or {}
    overrides = [f"{key}={json.dumps(value)}" for key, value in rl.items()]
    overrides.append(f"run.init_from={output('warm_start', 'checkpoint')}")
    if (stages.get("refine") or {}).get("status") == "completed":
        overrides.append(f"tasks.pass_rates={output('refine', 'pass_rates')}")
    for key, paths in task_path_lists(base_raw).items():
        if any(str(p).startswith(POOL_PREFIX) for p in paths):
            overrides.append(f"{key}={json.dumps(rooted(paths, POOL_PREFIX, Path(output('synthesize', 'pool'))))}")
    return overrides


def rollout_bins(run_dir: Path | None) -> dict[str, float]:
    """Rollouts a run spent per group pass-rate bin, over all its iterations (``work/rollouts_at_pass/<bin>``)."""
    records = MetricsLog(run_dir).read() if run_dir else []
    return {b: float(sum(r.get(f"work/rollouts_at_pass/{b}", 0.0) for r in records)) for b in PASS_BINS}


def expand(spec: AblationSpec) -> list[dict[str, Any]]:
    slots = list(spec.matrix)
    return [dict(zip(slots, combo)) for combo in itertools.product(*(spec.matrix[s] for s in slots))]


def summarize_run(run_dir: Path | None, metrics: list[str], last: int) -> dict[str, Any]:
    records = MetricsLog(run_dir).read() if run_dir else []
    tail = records[-last:]
    row: dict[str, Any] = {"iterations": len(records)}
    for key in metrics:
        values = [r[key] for r in tail if isinstance(r.get(key), (int, float))]
        row[key] = statistics.fmean(values) if values else None
    return row


def curves(run_dir: Path | None, metrics: list[str]) -> dict[str, list[list[float]]]:
    """Per metric, ``[rollouts spent so far, value]`` at each iteration that reports it (periodic evaluations
    only report on their iterations). Rollouts count every training episode run (``rollout/episodes_run``,
    including groups a sampler dropped, as DAPO's filter does; ``rollout/episodes`` in older runs)."""
    out: dict[str, list[list[float]]] = {m: [] for m in metrics}
    spent = 0.0
    for record in MetricsLog(run_dir).read() if run_dir else []:
        spent += float(record.get("rollout/episodes_run", record.get("rollout/episodes")) or 0.0)
        for key in metrics:
            value = record.get(key)
            if isinstance(value, (int, float)):
                out[key].append([spent, float(value)])
    return out


def mean_curve(runs: list[list[list[float]]]) -> list[list[float]]:
    """The mean of several runs' ``[rollouts spent, value]`` curves, point by point (the k-th report of each run:
    periodic evaluations land on the same iterations; a run with fewer points contributes to fewer)."""
    out = []
    for k in range(max((len(r) for r in runs), default=0)):
        points = [r[k] for r in runs if len(r) > k]
        out.append([statistics.fmean(p[0] for p in points), statistics.fmean(p[1] for p in points)])
    return out


def aggregate(rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
    """One entry per cell over its seeds: each metric's mean and sd of the runs' summaries, and mean curves."""
    cells = []
    for label in dict.fromkeys(r["cell"] for r in rows):
        runs = [r for r in rows if r["cell"] == label]
        summary: dict[str, Any] = {"iterations": statistics.fmean(r["summary"]["iterations"] for r in runs)}
        spread: dict[str, float | None] = {}
        for m in metrics:
            values = [r["summary"][m] for r in runs if r["summary"][m] is not None]
            summary[m] = statistics.fmean(values) if values else None
            spread[m] = statistics.stdev(values) if len(values) > 1 else None
        ok = sum(r["status"] == "ok" for r in runs)
        bins = [r["rollouts_at_pass"] for r in runs if r.get("rollouts_at_pass")]
        cells.append({"cell": label, "runs": len(runs), "status": "ok" if ok == len(runs) else f"{ok}/{len(runs)} ok",
                      "summary": summary, "sd": spread,
                      "curves": {m: mean_curve([r["curves"][m] for r in runs]) for m in metrics},
                      "rollouts_at_pass": {b: statistics.fmean(x[b] for x in bins) for b in PASS_BINS} if bins
                      else None})
    return cells


def format_table(rows: list[dict[str, Any]], metrics: list[str]) -> str:
    """Rows are :func:`aggregate`'s cells: ``mean`` or ``mean ± sd`` over seeds."""
    def cell(row: dict[str, Any], m: str) -> str:
        value, sd = row["summary"][m], (row.get("sd") or {}).get(m)
        if value is None:
            return "-"
        return f"{value:.4g}" if sd is None else f"{value:.4g} ± {sd:.2g}"

    header = ["cell", "status", "runs", "iters", *metrics]
    body = [[r["cell"], r["status"], str(r.get("runs", 1)), f"{r['summary']['iterations']:.4g}",
             *(cell(r, m) for m in metrics)] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    fmt = lambda cols: " | ".join(c.ljust(w) for c, w in zip(cols, widths))  # noqa: E731
    return "\n".join([fmt(header), "-+-".join("-" * w for w in widths), *(fmt(b) for b in body)])


def _title(label: str, seed: int | None) -> str:
    return label + ("" if seed is None else f" (seed {seed})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.ablate", description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="ablation YAML")
    parser.add_argument("--dry-run", action="store_true", help="validate every cell and print the plan")
    parser.add_argument("--resume", action="store_true", help="keep the cells an interrupted ablation finished "
                        "and continue those it was running from their last checkpoints")
    parser.add_argument("--recipe", type=Path, metavar="RUN", help="every cell is the RL stage of this recipe run "
                        "(python -m core.pipeline): its warm start, refine pass rates and synthesized pool")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="cells run N at a time (default 1); "
                        "their seconds are then measured side by side: compare them only at one --jobs")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="applied to every cell after the file's")
    args = parser.parse_intermixed_args(argv)  # FILE, --dry-run and overrides in any order

    if args.jobs < 1:
        raise ConfigError([f"--jobs {args.jobs}: give 1 or more cells to run at a time"])
    spec = load_spec(args.file)
    spec.overrides = [*spec.overrides, *args.overrides]
    base = (args.file.parent / spec.base).resolve()
    base_raw = load_raw(base, spec.overrides)
    if args.recipe is not None:  # first, so the file's and the command line's overrides still win
        spec.overrides = [*recipe_overrides(args.recipe, base_raw), *spec.overrides]
        base_raw = load_raw(base, spec.overrides)
    name = spec.name or args.file.stem
    out_root = Path(base_raw.get("run", {}).get("output_dir", "runs")) / name
    plan = []
    problems: list[str] = []
    for cell in expand(spec):
        label, overrides = cell_overrides(base_raw, cell)
        for seed in spec.seeds or [None]:
            run_name = label.replace("=", "-").replace(",", "_") + ("" if seed is None else f"_seed{seed}")
            full = [*spec.overrides, *overrides, *([] if seed is None else [f"run.seed={seed}"]),
                    f"run.name={run_name}", f"run.output_dir={out_root}"]
            try:
                load_config(base, full, required=("model", "environment", "sampler", "segmenter", "trainer",
                                                  "rollout", "judge"))
            except ConfigError as exc:
                problems.extend(f"[{label}] {p}" for p in exc.problems)
            plan.append((label, seed, run_name, full))
    if problems:
        raise ConfigError(sorted(set(problems), key=problems.index))
    if args.dry_run:
        print(json.dumps([{"cell": label, "seed": seed, "overrides": full} for label, seed, _, full in plan],
                         indent=2))
        return 0

    out_root.mkdir(parents=True, exist_ok=True)
    progress = out_root / PROGRESS_FILE  # one line per finished cell: what --resume keeps
    finished = {}
    if args.resume and progress.is_file():
        finished = {(r["cell"], r["seed"]): r for r in map(json.loads, progress.read_text().splitlines())
                    if r["status"] == "ok"}
    elif progress.exists():
        progress.unlink()
    todo = [entry for entry in plan if (entry[0], entry[1]) not in finished]
    for label, seed, _, _ in plan:
        if (label, seed) in finished:
            print(f"== {_title(label, seed)}: finished before, kept", file=sys.stderr, flush=True)
    lock = threading.Lock()

    def run_cell(label: str, seed: int | None, run_name: str, full: list[str]) -> dict[str, Any]:
        started = time.monotonic()
        earlier = latest_run_dir(out_root, run_name) if args.resume else None  # cut short: from its checkpoint
        print(f"== {_title(label, seed)}" + (f": resuming {earlier}" if earlier else "")
              + (f" (log: {out_root / run_name}.log)" if args.jobs > 1 else ""), file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "core.run", "--config", str(base), *full,
                   *(["--resume", str(earlier)] if earlier else [])]
        if args.jobs > 1:  # side by side: each child's output in its own file, not interleaved
            with open(out_root / f"{run_name}.log", "a", encoding="utf-8") as log_file:
                code = subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT).returncode
        else:
            code = subprocess.run(command).returncode
        run_dir = latest_run_dir(out_root, run_name)
        row = {
            "cell": label, "seed": seed, "run_dir": str(run_dir) if run_dir else None,
            "status": "ok" if code == 0 else f"exit {code}",
            "seconds": round(time.monotonic() - started, 1),
            "summary": summarize_run(run_dir, spec.metrics, spec.last),
            "curves": curves(run_dir, spec.metrics),
            "rollouts_at_pass": rollout_bins(run_dir),
        }
        with lock, progress.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        if args.jobs > 1:
            print(f"== {_title(label, seed)}: {row['status']} after {row['seconds']} s", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = dict(zip([(e[0], e[1]) for e in todo], pool.map(lambda e: run_cell(*e), todo)))
    rows = [finished.get((label, seed)) or done[label, seed] for label, seed, _, _ in plan]
    cells = aggregate(rows, spec.metrics)
    (out_root / "ablation.json").write_text(json.dumps({"spec": spec.model_dump(), "cells": cells, "rows": rows},
                                                       indent=2) + "\n")
    table = format_table(cells, spec.metrics)
    (out_root / "ablation.md").write_text(table + "\n")
    plot_ablation({c["cell"]: c["curves"] for c in cells}, out_root / "ablation.png",
                  runs={c["cell"]: [r["curves"] for r in rows if r["cell"] == c["cell"]] for c in cells}
                  if spec.seeds and len(spec.seeds) > 1 else None)
    plot_rollout_bins({c["cell"]: c["rollouts_at_pass"] for c in cells if c["rollouts_at_pass"]},
                      out_root / "ablation_rollouts.png")
    print(table)
    print(f"\nwritten: {out_root / 'ablation.json'}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main_guard(main))
