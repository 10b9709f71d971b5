"""The samplers on a pool many times the batch, on real desktops, beside the simulated learner's prediction.

``python bench/sampler_ablation.py [--quick] [--recipe RUN] [--out DIR] [--resume]`` prints one JSON object on
stdout (the runs' own logs go to stderr) and leaves the ablation's ``ablation.json``, ``ablation.png`` (each
metric against the rollouts spent: the shape of the paper's Figure 6(a)) and ``ablation_rollouts.png`` (where
each sampler's rollouts went, by the group's pass rate) under ``DIR/samplers/``.

1. **Pool and warm start** (skipped with ``--recipe RUN``): ``python -m core.pipeline`` on
   ``configs/families-rl.yaml`` with the stages before RL: VeriGen builds the family pool (36 train variants
   per family: 504, long families included; 112 test variants; 12 desktops), the warm start imitates the train
   demonstrations (4 epochs), refine rolls each train task out twice (the samplers' initial pass rates).
2. **The ablation**: ``python -m core.ablate configs/ablations/samplers.yaml --recipe RUN``: frontier, uniform,
   curriculum and DAPO, each on seeds 0, 1, 2, batches of 8 groups of 4, every cell stopped at the same budget
   of 384 rollouts run (DAPO's refills count), the test split evaluated every 6 iterations and at the end;
   ``--jobs`` cells side by side (default 3; the episodes are seeded: side by side, a cell gave the same
   numbers as alone).
3. **The prediction**: ``bench/samplers.py``'s simulated learner (a SIMULATION: no model, no desktop) on a pool
   with this pool's measured starting pass rates (refine's, smoothed as ``(k + 0.5) / (n + 1)`` for ``k`` of
   ``n`` rollouts solved), the same batch, group size and rollout budget and seeds; its mean final pass rate per
   sampler and the order it predicts, printed beside the measured order. The simulation predicts the training
   pool's pass rate; the ablation measures the test split, so the two orders agree only where what RL learns on
   the train pool transfers.

Reported: the warm start's test-split success (``core.eval``, each seed's episode seeds, the cells' passes), and
per sampler: test-split success at the budget (mean, sd and each seed), training-batch success, informative
share (of the trained groups; DAPO's is 1 by construction) and informative rollout share (of every rollout run,
dropped groups included: the comparable one), updates, rollouts per pass-rate bin, and wall time; the whole
bench's wall time; the measured and predicted orders; ``machine`` and ``settings``. ``--quick`` runs the same
path on a pool of 3 families (2 train variants each), frontier and DAPO, one seed and a budget of 8 rollouts:
the wiring, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from omegaconf import OmegaConf  # noqa: E402

from core.runtime import logs  # noqa: E402
from core.runtime.rundir import latest_run_dir  # noqa: E402

ROOT = _HERE.parent
RECIPE = ROOT / "configs" / "families-rl.yaml"
SPEC = ROOT / "configs" / "ablations" / "samplers.yaml"
#: the stages before RL, on the large pool (the YAML's header gives the same command)
PREPARE = ["recipe.stages=[synthesize,warm_start,refine]", "warm_start.epochs=4", "recipe.refine.rollouts=2",
           "recipe.synthesize.overrides={synthesis.proposer.options.train: 36, synthesis.proposer.options.validation:"
           " 1, synthesis.proposer.options.test: 8, synthesis.proposer.options.heldout: 1,"
           " synthesis.pipeline.options.workers: 12, synthesis.pipeline.options.environments: 12,"
           " environment.options.max_environments: 12}",
           "recipe.refine.overrides={rollout_loop.concurrency: 16, environment.options.max_environments: 16,"
           " rollout.options.max_batch_size: 16}"]
QUICK_PREPARE = ["recipe.stages=[synthesize,warm_start,refine]", "warm_start.epochs=1", "recipe.refine.rollouts=1",
                 "recipe.synthesize.overrides={synthesis.proposer.options.families: [symlink, count-lines, copy-ext],"
                 " synthesis.proposer.options.train: 2, synthesis.proposer.options.validation: 0,"
                 " synthesis.proposer.options.test: 1, synthesis.proposer.options.heldout: 1}",
                 "tasks.eval_sets.train.sample=2", "environment.options.settle_s=0.0"]
QUICK_CELLS = ["run.rollout_budget=8", "algorithm.batch_size=2", "algorithm.n_rollouts=2", "algorithm.max_turns=2",
               "run.eval_every=1", "run.checkpoint_every=1", "environment.options.settle_s=0.0"]
#: the simulated learner's stand-ins for the ablation's cells (label -> registered name, options)
SIMULATED = {"frontier": ("frontier", {"initial_pass_rollouts": 2}), "uniform": ("uniform", {}),
             "curriculum": ("curriculum", {"initial_pass_rollouts": 2, "mode": "sliding"}), "dapo": ("dapo", {})}


def run(cmd: list[str]) -> int:
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, cwd=ROOT, stdout=sys.stderr, stderr=sys.stderr,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode


def prepare(out: Path, quick: bool) -> Path:
    """The recipe's stages before RL on the family pool: its run directory."""
    code = run([sys.executable, "-m", "core.pipeline", "--config", str(RECIPE), f"run.output_dir={out}",
                "run.name=sampler-pool", *(QUICK_PREPARE if quick else PREPARE)])
    found = latest_run_dir(out, "sampler-pool")
    if code != 0 or found is None:
        raise SystemExit(f"the pool's recipe stages failed (exit {code}); its log is above")
    return found


def spec_file(out: Path, quick: bool) -> Path:
    """The ablation file: the shipped one, or for ``--quick`` a copy with one seed and two samplers, frontier (from
    the refine pass rates) and DAPO (refills counted against the budget), its base made absolute."""
    if not quick:
        return SPEC
    spec = OmegaConf.to_container(OmegaConf.load(SPEC))
    spec.update(base=str(RECIPE), seeds=[0], last=1, matrix={"sampler": ["frontier", "dapo"]})
    path = out / "samplers.yaml"
    path.write_text(OmegaConf.to_yaml(spec))
    return path


def warm_start_test(out: Path, seeds: list[int], overrides: list[str], jobs: int) -> dict[str, Any]:
    """The cells' common start on the test split: ``core.eval`` of the warm start under the cells' overrides
    (``--recipe``'s included: pool, checkpoint), each seed's episode seeds and the cells' evaluation passes (a
    periodic evaluation uses the same ``core.eval`` seeds); ``jobs`` seeds at a time, each one's log in
    ``warm_start_eval/seed<N>.log``."""
    def last(key: str, default: str) -> str:
        return next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith(f"{key}=")), default)

    init, passes = last("run.init_from", ""), last("run.eval_passes", "1")
    logs_dir = out / "warm_start_eval"
    logs_dir.mkdir(parents=True, exist_ok=True)
    todo = [s for s in seeds if not (out / f"warm_start_test_seed{s}.json").is_file()]
    for start in range(0, len(todo), jobs):
        children = []
        for seed in todo[start:start + jobs]:
            cmd = [sys.executable, "-m", "core.eval", "--config", str(RECIPE), "--checkpoint", init, "--set", "test",
                   "--passes", passes, "--out", str(out / f"warm_start_test_seed{seed}.json"), *overrides,
                   f"run.seed={seed}", f"run.output_dir={logs_dir}"]
            print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
            with open(logs_dir / f"seed{seed}.log", "w", encoding="utf-8") as log_file:
                children.append(subprocess.Popen(cmd, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT))
        for seed, child in zip(todo[start:start + jobs], children):
            if child.wait() != 0:
                raise SystemExit(f"core.eval of the warm start exited {child.returncode}: {logs_dir}/seed{seed}.log")
    per_seed = [json.loads((out / f"warm_start_test_seed{s}.json").read_text(encoding="utf-8"))
                ["domains"]["Overall"]["success"] / 100.0 for s in seeds]
    return {"test_success": round(statistics.fmean(per_seed), 4), "per_seed": [round(v, 4) for v in per_seed]}


def smoothed(rate: float, n: int) -> float:
    """``(k + 0.5) / (n + 1)`` for the ``k = rate * n`` of ``n`` rollouts solved: never exactly 0 or 1."""
    return (round(rate * n) + 0.5) / (n + 1)


def predict(rates: list[float], n_measured: int, *, batch: int, n: int, budget: int, seeds: list[int]
            ) -> dict[str, Any]:
    """The simulated learner on this pool's measured starting pass rates, each sampler stopped at the budget of
    training rollouts (DAPO's refills count; the initial pass, given to every real cell by refine, does not)."""
    from bench import samplers as sim

    model = sim.LearnerModel(tasks=len(rates), pass_rates=tuple(smoothed(r, n_measured) for r in rates))
    settings = sim.Settings(iterations=math.ceil(budget / (batch * n)) * 4, batch_size=batch, n_rollouts=n,
                            seeds=len(seeds), target=2.0)
    out: dict[str, Any] = {}
    for label, (name, options) in SIMULATED.items():
        finals, starts = [], []
        for seed in seeds:
            result = sim.run_one(name, options, model, settings, seed)
            spent = [r - result["initial_pass_rollouts"] for r in result["rollouts_curve"]]
            within = max(i for i, r in enumerate(spent) if r <= budget)
            finals.append(round(result["curve"][within], 4))
            starts.append(result["initial_mean_pass_rate"])
        out[label] = {"final_mean_pass_rate": round(statistics.fmean(finals), 4), "per_seed": finals,
                      "initial_mean_pass_rate": round(statistics.fmean(starts), 4)}
    return out


def order(values: dict[str, float | None]) -> str:
    """Labels from the highest value to the lowest, ties (equal to 4 decimals) joined by ``=``, missing last:
    ``"frontier > uniform = dapo"``."""
    key = {k: -math.inf if v is None else round(v, 4) for k, v in values.items()}
    ranked = sorted(values, key=lambda k: key[k], reverse=True)
    return "".join(k if i == 0 else (" = " if key[k] == key[ranked[i - 1]] else " > ") + k
                   for i, k in enumerate(ranked))


def measured(ablation: dict[str, Any]) -> dict[str, Any]:
    """Per sampler: the ablation's cells, with each seed's run beside the mean."""
    out = {}
    for cell in ablation["cells"]:
        label = cell["cell"].removeprefix("sampler=")
        rows = [r for r in ablation["rows"] if r["cell"] == cell["cell"]]
        bins = cell.get("rollouts_at_pass") or {}
        total = sum(bins.values()) or 1.0
        out[label] = {
            "status": cell["status"],
            "test_success": cell["summary"].get("eval/success"), "test_success_sd": cell["sd"].get("eval/success"),
            "test_success_per_seed": [r["summary"].get("eval/success") for r in rows],
            "training_batch_success": cell["summary"].get("success/rate"),
            "informative_share": cell["summary"].get("groups/informative_share"),  # of trained groups
            # of every rollout run (DAPO's dropped groups too): those on groups neither all failed nor all solved
            "informative_rollout_share": round(1.0 - (bins.get("0", 0.0) + bins.get("1", 0.0)) / total, 3)
            if bins else None,
            "segments_per_episode": cell["summary"].get("segments/per_episode"),
            "updates_per_seed": [r["summary"]["iterations"] for r in rows],
            "rollouts_at_pass_share": {b: round(v / total, 3) for b, v in bins.items()},
            "seconds_per_seed": [r["seconds"] for r in rows],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the wiring on a tiny pool: one seed, 8 rollouts")
    parser.add_argument("--recipe", type=Path, help="reuse this recipe run's pool, warm start and pass rates")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted ablation in --out (with "
                        "--recipe): its finished cells are kept")
    parser.add_argument("--out", type=Path, default=None,
                        help="where runs go (default: runs/sampler-ablation-<time>; with --quick a folder in /tmp)")
    parser.add_argument("--jobs", type=int, default=3, help="cells (and warm-start evaluations) run side by side "
                        "(core.ablate --jobs; default 3: this 2-core machine's desktops and generation leave CPU idle)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more")
    if args.resume and (args.recipe is None or args.out is None):
        parser.error("--resume continues the ablation in --out from the pool of --recipe: give both")
    logs.configure("warning")
    from core.commands.recipe_report import machine

    started = time.perf_counter()
    if args.out is None:  # the measurement's runs stay beside the project's; the wiring's go to /tmp
        args.out = Path(tempfile.mkdtemp(prefix="scalecua-sampler-ablation-quick-")) if args.quick else \
            ROOT / "runs" / f"sampler-ablation-{time.strftime('%Y%m%d-%H%M%S')}"
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    recipe = args.recipe.resolve() if args.recipe else prepare(out, args.quick)
    prepared = round(time.perf_counter() - started, 1)
    spec = spec_file(out, args.quick)
    code = run([sys.executable, "-m", "core.ablate", str(spec), "--recipe", str(recipe), f"run.output_dir={out}",
                "--jobs", str(args.jobs), *(QUICK_CELLS if args.quick else []), *(["--resume"] if args.resume else [])])
    result_file = out / spec.stem / "ablation.json"
    if not result_file.is_file():
        raise SystemExit(f"core.ablate exited {code} without {result_file}")
    ablation = json.loads(result_file.read_text(encoding="utf-8"))
    cells = measured(ablation)
    raw = OmegaConf.to_container(OmegaConf.load(Path(ablation["rows"][0]["run_dir"]) / "config.yaml"))
    rates = json.loads((recipe / "refine" / "pass_rates.json").read_text(encoding="utf-8"))
    refine = OmegaConf.to_container(OmegaConf.load(recipe / "config.yaml")).get("recipe", {}).get("refine", {})
    algorithm = raw["algorithm"]
    prediction = predict(list(rates.values()), int(refine.get("rollouts", 4)), batch=algorithm["batch_size"],
                         n=algorithm["n_rollouts"], budget=raw["run"]["rollout_budget"],
                         seeds=ablation["spec"]["seeds"] or [0])
    ablated = round(time.perf_counter() - started - prepared, 1)
    warm = warm_start_test(out, ablation["spec"]["seeds"] or [0], ablation["spec"]["overrides"], args.jobs)
    measured_order = order({k: v["test_success"] for k, v in cells.items()})
    predicted_order = order({k: v["final_mean_pass_rate"] for k, v in prediction.items()})
    best_baseline = max(((v["test_success"] or 0.0) for k, v in cells.items() if k != "frontier"), default=0.0)
    frontier = cells.get("frontier", {})
    print(json.dumps({
        "bench": "sampler_ablation", "machine": machine(),
        "settings": {"recipe": str(recipe), "spec": str(spec), "quick": args.quick,
                     "pool_train_tasks": len(rates), "batch_size": algorithm["batch_size"],
                     "n_rollouts": algorithm["n_rollouts"], "rollout_budget": raw["run"]["rollout_budget"],
                     "seeds": ablation["spec"]["seeds"], "eval_set": raw["run"].get("eval_set"),
                     "refine_rollouts": refine.get("rollouts"), "jobs": args.jobs},
        "warm_start": warm, "samplers": cells,
        "measured_order": measured_order,
        "predicted": prediction, "predicted_order": predicted_order,
        "orders_agree": measured_order == predicted_order,
        "target": {"frontier_minus_best_baseline": None if frontier.get("test_success") is None else
                   round(frontier["test_success"] - best_baseline, 4), "needed": 0.03,
                   "frontier_highest_informative_rollout_share": bool(cells) and max(
                       cells, key=lambda k: cells[k]["informative_rollout_share"] or 0.0) == "frontier"},
        "wall_s": {"prepare": prepared if not args.recipe else 0.0, "ablation": ablated,
                   "total": round(time.perf_counter() - started, 1)},
        "outputs": {"ablation": str(result_file), "figures": [str(out / spec.stem / "ablation.png"),
                                                               str(out / spec.stem / "ablation_rollouts.png")]},
    }, indent=2))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
