"""Benchmark of the samplers against a simulated learner, plus selection time at scale.

``python bench/samplers.py [--quick] [--out DIR]`` prints one JSON object on stdout (logs go to stderr) and
writes ``DIR/samplers.png`` (default ``bench/out/``).

The simulated learner (one model for every sampler; nothing in it depends on which sampler runs):

* ``tasks`` tasks with latent difficulty ``d_i ~ Normal(0, difficulty_sd)`` (logits); the learner has a
  global skill ``theta`` (starts at ``theta0``) and a per-task mastery ``u_i`` (starts at 0). The true
  success probability of task i is ``p_i = sigmoid(theta + u_i - d_i)``.
* Each selected task gets ``n`` rollouts, each a Bernoulli(p_i) success, all drawn from the learner as it is
  at the start of the iteration.
* The learner trains on the groups the sampler accepts. A group with non-zero within-group advantage (its
  successes are not all equal) moves ``u_i`` up by ``task_gain``, ``theta`` up by ``global_gain`` (the
  transfer one GRPO step brings to every task) and its cluster's skill ``v_c`` up by ``cluster_gain``
  (transfer between similar tasks: the pool is split at random into ``clusters``, e.g. applications; then
  ``p_i = sigmoid(theta + u_i + v_c(i) - d_i)``); a group whose successes are all equal has zero advantage
  and changes nothing. With ``forgetting`` > 0 every task not trained in an iteration loses that share of
  its mastery ``u_i``.
* Baselines get only what a user has. Task metadata carries a VeriGen-style label
  (``estimated_difficulty``: easy / medium / hard, the terciles of ``d_i + Normal(0, estimate_noise_sd)``;
  with the defaults it correlates about 0.6 with the truth) for ``curriculum/label``; ``curriculum/initial_pass``
  ranks by ``1 - `` the initial pass rate instead (on tasks without labels). Both schedule modes (sliding,
  expanding) run, each spanning the run (``schedule_iterations = iterations``).
* Every variant runs under several learner settings (``LEARNERS``: the base learner, transfer between
  similar tasks, forgetting, both, and slower per-task learning), side by side.
* The training loop is driven exactly as ``core.runtime.loop`` drives it: select, roll out, ``accept`` each group,
  ``top_up`` until the batch is full or the sampler stops, ``observe`` every group rolled out. ``run_one``'s
  ``staleness`` k replays the asynchronous loop's order instead (batches selected and rolled out k updates
  ahead of training); ``bench/async_pipeline.py --learning-parity`` compares the two schedules with it.

Reported per learner setting and sampler (mean over seeds, per-seed values alongside): share of rolled-out groups with non-zero
advantage, mean true pass rate over all tasks after the last iteration, iterations (and rollouts) until the
mean true pass rate first reaches ``target``, and rollouts spent (training plus any initial pass sweep).
``vs_uniform`` holds ratios against the uniform sampler. ``selection_ms`` times ``select(it, 32)`` on pools of
10^4, 10^5 and 10^6 real ``Task`` objects (10^6 skipped with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

# Run as a script, this file's folder comes first on sys.path and its name would shadow the `samplers`
# package: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from core.runtime import logs  # noqa: E402
from core.registry import Registry  # noqa: E402
from core.types import Evaluator, Task  # noqa: E402
from samplers.plugin import scalecua_register_samplers  # noqa: E402


@dataclass(frozen=True)
class LearnerModel:
    """Parameters of the simulated learner, the same for every sampler.

    Chosen by looking at the uniform sampler alone: a pool where a sizeable share of tasks is far too hard or
    already solved (difficulty_sd 3 logits around a learner at -1), and learning that lifts uniform sampling
    from about 0.40 to 0.65 mean pass rate in 200 iterations. ``Settings.target`` (0.55) is about where
    uniform sampling stands half way through the run.
    """

    tasks: int = 3000
    difficulty_sd: float = 3.0
    theta0: float = -1.0
    task_gain: float = 0.4
    global_gain: float = 0.0005
    clusters: int = 1
    cluster_gain: float = 0.0
    forgetting: float = 0.0
    estimate_noise_sd: float = 3.0
    pass_rates: tuple[float, ...] = ()  # a measured pool: each task's starting pass rate (``tasks`` of them)


#: learner settings every sampler runs under (label -> changes to LearnerModel)
LEARNERS: dict[str, dict[str, Any]] = {
    "base": {},
    "transfer": {"clusters": 10, "cluster_gain": 0.01},
    "forgetting": {"forgetting": 0.01},
    "transfer+forgetting": {"clusters": 10, "cluster_gain": 0.01, "forgetting": 0.01},
    "slow_task_learning": {"task_gain": 0.1},
}


@dataclass(frozen=True)
class Settings:
    iterations: int = 200
    batch_size: int = 32
    n_rollouts: int = 8
    seeds: int = 5
    target: float = 0.55


#: (label, registered name, options); every sampler keeps the paper's defaults
VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    ("uniform", "uniform", {}),
    ("dapo", "dapo", {}),
    # schedule_iterations is set to the run length below; label: metadata difficulty labels,
    # initial_pass: 1 - the measured pass rate (the tasks carry no labels then)
    ("curriculum/label/sliding", "curriculum", {"mode": "sliding"}),
    ("curriculum/label/expanding", "curriculum", {"mode": "expanding"}),
    ("curriculum/initial_pass/sliding", "curriculum", {"mode": "sliding", "initial_pass_rollouts": 8}),
    ("curriculum/initial_pass/expanding", "curriculum", {"mode": "expanding", "initial_pass_rollouts": 8}),
    ("frontier", "frontier", {}),
    ("frontier/unseen_outside_pool", "frontier", {"unseen_in_pool": False}),
    ("frontier+initial_pass", "frontier", {"initial_pass_rollouts": 8}),
]
LABELS = ("easy", "medium", "hard")


def sampler_registry() -> Registry:
    registry: Registry = Registry("sampler")
    scalecua_register_samplers(registry)
    return registry


class Learner:
    def __init__(self, model: LearnerModel, seed: int) -> None:
        rng = np.random.default_rng([seed, 0])  # the pool depends on the seed only, not on the sampler
        self.model = model
        self.difficulty = rng.normal(0.0, model.difficulty_sd, model.tasks)
        if model.pass_rates:  # sigmoid(theta0 - d_i) is task i's measured starting pass rate
            if len(model.pass_rates) != model.tasks:
                raise ValueError(f"{len(model.pass_rates)} pass rates for a pool of {model.tasks} tasks")
            p = np.clip(np.asarray(model.pass_rates, dtype=float), 1e-3, 1 - 1e-3)
            self.difficulty = model.theta0 - np.log(p / (1.0 - p))
        noisy = self.difficulty + rng.normal(0.0, model.estimate_noise_sd, model.tasks)
        self.label = np.searchsorted(np.quantile(noisy, [1 / 3, 2 / 3]), noisy)  # 0 easy, 1 medium, 2 hard
        self.cluster = rng.integers(0, model.clusters, model.tasks)
        self.theta = model.theta0
        self.mastery = np.zeros(model.tasks)
        self.cluster_skill = np.zeros(model.clusters)
        self.rollout_rng = np.random.default_rng([seed, 1])

    def label_correlation(self) -> float:
        return float(np.corrcoef(self.label, self.difficulty)[0, 1])

    def pass_rates(self, positions: np.ndarray | None = None) -> np.ndarray:
        index = slice(None) if positions is None else positions
        logit = self.theta + self.mastery[index] + self.cluster_skill[self.cluster[index]] - self.difficulty[index]
        return 1.0 / (1.0 + np.exp(-logit))

    def rollouts(self, positions: np.ndarray, n: int) -> np.ndarray:
        """(len(positions), n) array of successes (0/1)."""
        return (self.rollout_rng.random((positions.size, n)) < self.pass_rates(positions)[:, None]).astype(float)

    def train(self, positions: np.ndarray, successes: np.ndarray) -> int:
        informative = successes.min(axis=1) != successes.max(axis=1)
        if self.model.forgetting:
            untouched = np.ones(self.model.tasks, dtype=bool)
            untouched[positions] = False
            self.mastery[untouched] *= 1.0 - self.model.forgetting
        np.add.at(self.mastery, positions[informative], self.model.task_gain)
        np.add.at(self.cluster_skill, self.cluster[positions[informative]], self.model.cluster_gain)
        self.theta += self.model.global_gain * int(informative.sum())
        return int(informative.sum())


def make_tasks(learner: Learner, *, labels: bool) -> list[Task]:
    template = Task(id="bench", instruction="simulated task", evaluator=Evaluator(func="exact_match"))
    return [template.model_copy(update={"id": f"sim-{i:06d}",
                                        "metadata": {"estimated_difficulty": LABELS[k]} if labels else {}})
            for i, k in enumerate(learner.label)]


def run_one(name: str, options: dict[str, Any], model: LearnerModel, s: Settings, seed: int,
            staleness: int = 0) -> dict[str, Any]:
    """One sampler on one seed's pool. ``staleness`` k > 0 replays the asynchronous loop's schedule
    (``core.runtime.async_rollouts`` with ``max_staleness: k``): batch ``b`` is selected once the policy has
    trained ``b - k`` batches, so the sampler has observed batches up to ``b - k - 1`` and the rollouts come
    from the learner as it was ``k`` updates ago; the groups then train the current learner. The simulated
    learner has no gradient, so what this models is the lag (stale pass rates for the sampler, stale
    successes deciding which groups are informative), not the bias of off-policy gradient steps."""
    if staleness < 0:
        raise ValueError(f"staleness must be >= 0, got {staleness}")
    learner = Learner(model, seed)
    # the initial-pass curriculum ranks by measured pass rates only: its tasks carry no labels
    tasks = make_tasks(learner, labels=not (name == "curriculum" and options.get("initial_pass_rollouts")))
    position = {t.id: i for i, t in enumerate(tasks)}
    if name == "curriculum":
        options = {**options, "schedule_iterations": s.iterations}
    sampler = sampler_registry().create(name, options)
    sampler.setup(tasks, seed=seed)
    rollouts = 0
    if sampler.initial_pass_rollouts > 0:  # the sweep measures, it does not train
        everything = np.arange(model.tasks)
        rates = learner.rollouts(everything, sampler.initial_pass_rollouts).mean(axis=1)
        sampler.set_initial_pass_rates({t.id: float(r) for t, r in zip(tasks, rates)})
        rollouts += model.tasks * sampler.initial_pass_rollouts
    curve, spent, informative_share, extra = [float(learner.pass_rates().mean())], [rollouts], [], []
    groups_total = groups_informative = groups_trained = trained_informative = 0
    in_flight: list[tuple[int, dict[str, list[float]], list[str]]] = []  # (batch, outcomes, kept), oldest first
    for step in range(s.iterations + staleness):
        if step < s.iterations:  # select and roll out batch `step` with the learner as it is now
            pending, kept, outcomes = sampler.select(step, s.batch_size), [], {}
            generated_informative = generated = 0
            while pending:
                positions = np.array([position[t] for t in pending])
                successes = learner.rollouts(positions, s.n_rollouts)
                for task_id, row in zip(pending, successes):
                    outcomes[task_id] = row.tolist()
                    generated += 1
                    generated_informative += int(row.min() != row.max())
                    if sampler.accept(task_id, row.tolist()):
                        kept.append(task_id)
                missing = s.batch_size - len(kept)
                pending = sampler.top_up(step, missing, kept + pending) if missing > 0 else []
            in_flight.append((step, outcomes, kept))
            groups_total += generated
            groups_informative += generated_informative
            rollouts += generated * s.n_rollouts
            informative_share.append(generated_informative / generated)
            extra.append(generated - s.batch_size)
        if step < staleness:
            continue
        batch, outcomes, kept = in_flight.pop(0)  # batch `step - staleness`: observed and trained now
        sampler.observe(batch, outcomes)
        kept_positions = np.array([position[t] for t in kept], dtype=int)
        kept_successes = np.array([outcomes[t] for t in kept]).reshape(len(kept), s.n_rollouts)
        trained_informative += learner.train(kept_positions, kept_successes)
        groups_trained += len(kept)
        curve.append(float(learner.pass_rates().mean()))
        spent.append(rollouts)
    reached = next((i for i, v in enumerate(curve) if v >= s.target), None)
    return {
        "informative_share": groups_informative / groups_total,
        "informative_share_trained": trained_informative / max(1, groups_trained),
        "final_mean_pass_rate": curve[-1],
        "initial_mean_pass_rate": curve[0],
        "iterations_to_target": reached,
        "rollouts_to_target": spent[reached] if reached is not None else None,
        "rollouts_spent": rollouts,
        "initial_pass_rollouts": model.tasks * sampler.initial_pass_rollouts,
        "groups_trained": groups_trained,
        "extra_draws_per_iteration": statistics.fmean(extra),
        "curve": curve, "rollouts_curve": spent, "informative_curve": informative_share,
    }


def mean_or_none(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 4) if present else None


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ["informative_share", "informative_share_trained", "final_mean_pass_rate", "initial_mean_pass_rate",
            "iterations_to_target", "rollouts_to_target", "rollouts_spent", "initial_pass_rollouts",
            "extra_draws_per_iteration"]
    out: dict[str, Any] = {k: mean_or_none([r[k] for r in runs]) for k in keys}
    out["target_reached_in_seeds"] = sum(r["iterations_to_target"] is not None for r in runs)
    out["per_seed"] = {k: [r[k] if not isinstance(r[k], float) else round(r[k], 4) for r in runs]
                       for k in ("final_mean_pass_rate", "iterations_to_target", "informative_share")}
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b not in (None, 0) else None


def compare(model: LearnerModel, s: Settings) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Every variant on the same pools (one per seed); aggregated results with ratios to uniform, and raw runs."""
    curves: dict[str, list[dict[str, Any]]] = {}
    results: dict[str, dict[str, Any]] = {}
    for label, name, options in VARIANTS:
        runs = [run_one(name, options, model, s, seed) for seed in range(s.seeds)]
        curves[label] = runs
        results[label] = {"sampler": name, "options": options, **aggregate(runs)}
        print(f"{label}: final {results[label]['final_mean_pass_rate']}", file=sys.stderr)
    base = results["uniform"]
    for r in results.values():
        r["vs_uniform"] = {
            "informative_share": ratio(r["informative_share"], base["informative_share"]),
            "pass_rate_gain": ratio(r["final_mean_pass_rate"] - r["initial_mean_pass_rate"],
                                    base["final_mean_pass_rate"] - base["initial_mean_pass_rate"]),
            "rollouts_spent": ratio(r["rollouts_spent"], base["rollouts_spent"]),
            "iterations_to_target": ratio(r["iterations_to_target"], base["iterations_to_target"]),
            "rollouts_to_target": ratio(r["rollouts_to_target"], base["rollouts_to_target"]),
        }
    return results, curves


def selection_times(sizes: list[int], repeats: int, batch: int = 32) -> dict[str, Any]:
    template = Task(id="bench", instruction="timing task", evaluator=Evaluator(func="exact_match"))
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    tasks = [template.model_copy(update={"id": f"pool-{i:07d}", "metadata": {"estimated_difficulty": float(d)}})
             for i, d in enumerate(rng.normal(size=max(sizes)))]
    out: dict[str, Any] = {"build_tasks_s": round(time.perf_counter() - started, 2)}
    for name in ("uniform", "dapo", "curriculum", "frontier"):
        per_size = {}
        for size in sizes:
            sampler = sampler_registry().create(name, {})
            t0 = time.perf_counter()
            sampler.setup(tasks[:size], seed=0)
            setup_s = time.perf_counter() - t0
            sampler.select(0, batch)  # warm-up (the curriculum ranks the pool on its first select)
            durations = []
            for it in range(1, repeats + 1):
                t0 = time.perf_counter()
                picked = sampler.select(it, batch)
                durations.append(time.perf_counter() - t0)
                sampler.observe(it, {t: rng.integers(0, 2, 8).tolist() for t in picked})
            ms = sorted(d * 1000 for d in durations)
            per_size[str(size)] = {"median_ms": round(statistics.median(ms), 3),
                                   "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3), "setup_s": round(setup_s, 3)}
        out[name] = per_size
    return out


def plot(curves: dict[str, list[dict[str, Any]]], s: Settings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for label, runs in curves.items():
        curve = np.mean([r["curve"] for r in runs], axis=0)
        spent = np.mean([r["rollouts_curve"] for r in runs], axis=0)
        share = np.mean([r["informative_curve"] for r in runs], axis=0)
        smooth = np.convolve(share, np.ones(10) / 10, mode="valid")
        axes[0].plot(np.arange(curve.size), curve, label=label)
        axes[1].plot(spent / 1000, curve, label=label)
        axes[2].plot(np.arange(smooth.size) + 10, smooth, label=label)
    for ax in axes[:2]:
        ax.axhline(s.target, color="grey", linestyle=":", linewidth=1)
    axes[0].set(xlabel="iteration", ylabel="mean true pass rate (all tasks)", title="Learning curve")
    axes[1].set(xlabel="rollouts spent (thousands, incl. initial pass)", ylabel="mean true pass rate",
                title="Per rollout")
    axes[2].set(xlabel="iteration", ylabel="share of groups with non-zero advantage",
                title="Informative groups (10-iteration mean)")
    axes[0].legend()
    fig.suptitle(f"Samplers on a simulated learner: B={s.batch_size}, n={s.n_rollouts}, {s.seeds} seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks, iterations and seeds; no 10^6 timing")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out", help="folder for the PNG")
    args = parser.parse_args(argv)
    logs.configure("warning")
    model = LearnerModel(tasks=800) if args.quick else LearnerModel()
    s = Settings(iterations=60, seeds=2) if args.quick else Settings()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]

    started = time.perf_counter()
    by_learner: dict[str, Any] = {}
    curves: dict[str, list[dict[str, Any]]] = {}
    for name, changes in LEARNERS.items():
        setting = replace(model, **changes)
        print(f"learner {name}: {changes}", file=sys.stderr)
        results, runs = compare(setting, s)
        if name == "base":
            curves = runs
        by_learner[name] = {"learner": changes, "results": results}
    simulation_s = time.perf_counter() - started
    png = args.out / "samplers.png"
    plot(curves, s, png)
    label_correlation = round(Learner(model, 0).label_correlation(), 3)
    ranking = {name: sorted(((label, r["iterations_to_target"]) for label, r in entry["results"].items()),
                            key=lambda x: (x[1] is None, x[1] if x[1] is not None else 0))
               for name, entry in by_learner.items()}
    timing = selection_times(sizes, repeats=10 if args.quick else 30)
    print(json.dumps({
        "benchmark": "samplers",
        "quick": args.quick,
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "settings": {**asdict(s), "learner": asdict(model), "label_correlation_with_difficulty": label_correlation,
                     "paper_hyperparameters": "mu 0.5, sigma 0.25, gamma 0.2, alpha 0.2, filter [0, 1], pool 3B "
                     "(sampler defaults)"},
        "results": by_learner["base"]["results"],
        "by_learner": by_learner,
        "iterations_to_target_ranking": ranking,
        "selection_ms_batch_32": timing,
        "simulation_s": round(simulation_s, 1),
        "plot": str(png),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
