"""The plots a run directory gets: ``RUN_DIR/report/`` — ``curves.png`` (reward and success rate per
iteration, informative-group share; below them the optimizer's health: policy entropy, approximate KL, clip
fraction, gradient norm), ``phases.png`` (wall time per phase per iteration), ``async.png`` (async runs),
``sampler_weights.png`` (the sampler's weight distribution over tasks at each recorded checkpoint), and
``summary.json``. The loop writes them at a run's end; ``python -m core.report RUN_DIR`` on demand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from core.errors import ScaleCUAError
from core.runtime.metrics import PASS_BINS, MetricsLog


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: the optimizer's health per iteration (``train/`` metrics of the trainer): where a collapse shows first
HEALTH_PANELS = (
    ("policy entropy (nats per token)", ("train/actor/entropy",)),
    ("approx. KL from the rollout policy", ("train/actor/approx_kl", "train/actor/approx_kl_max")),
    ("clip fraction", ("train/actor/clipfrac",)),
    ("gradient norm (before clipping)", ("train/actor/grad_norm",)),
)


def plot_health(axes: Sequence[Any], records: list[dict[str, Any]]) -> None:
    """Entropy, approximate KL (mean and largest over the iteration's steps; a cross where the KL stop cut the
    iteration short), clip fraction and gradient norm per iteration, one panel each."""
    its = [r["iteration"] for r in records]
    for ax, (title, keys) in zip(axes, HEALTH_PANELS):
        for key in keys:
            values = [r.get(key, float("nan")) for r in records]
            ax.plot(its, values, marker="o", ms=2, label=key.removeprefix("train/actor/"))
        if keys[0] == "train/actor/approx_kl":
            stops = [(r["iteration"], r.get("train/actor/approx_kl_max", 0.0)) for r in records
                     if r.get("train/actor/kl_stopped")]
            if stops:
                ax.plot([x for x, _ in stops], [y for _, y in stops], "rx", label="KL stop")
            ax.legend(fontsize=7)
        if keys[0] == "train/actor/grad_norm" and any(r.get(keys[0], 0) > 0 for r in records):
            ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_title(title, fontsize=9)


def health_figure(plt: Any) -> tuple[Any, list[Any], list[Any]]:
    """A figure with two wide panels on top (the run's own curves) and the four health panels below."""
    fig, grid = plt.subplots(2, 4, figsize=(16, 7), gridspec_kw={"height_ratios": [1.3, 1]})
    spec = grid[0][0].get_gridspec()
    for ax in grid[0]:
        ax.remove()
    return fig, [fig.add_subplot(spec[0, 0:2]), fig.add_subplot(spec[0, 2:4])], list(grid[1])


def plot_curves(records: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    its = [r["iteration"] for r in records]
    fig, axes, health = health_figure(plt)
    plot_health(health, records)
    for key, label in (("reward/mean", "reward (mean)"), ("success/rate", "success rate")):
        axes[0].plot(its, [r.get(key, float("nan")) for r in records], marker="o", ms=3, label=label)
    axes[0].set_xlabel("iteration")
    axes[0].set_title("reward and success")
    axes[0].legend()
    axes[1].plot(its, [r.get("groups/informative_share", float("nan")) for r in records], marker="o", ms=3,
                 color="tab:green")
    axes[1].set_ylim(-0.05, 1.05)
    axes[1].set_xlabel("iteration")
    axes[1].set_title("share of groups with non-zero advantage")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_ablation(cells: dict[str, dict[str, list[list[float]]]], path: Path,
                  runs: dict[str, list[dict[str, list[list[float]]]]] | None = None) -> None:
    """One panel per metric: each cell's ``[rollouts spent, value]`` curve (:func:`core.ablate.curves`; with
    several seeds the mean curve, and each seed's ``runs`` as thin lines of the same colour)."""
    metrics = list(next(iter(cells.values()), {}))
    if not metrics:
        return
    plt = pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4), squeeze=False)
    for ax, key in zip(axes[0], metrics):
        for label, curve in cells.items():
            points = curve.get(key) or []
            if points:
                line, = ax.plot([x for x, _ in points], [y for _, y in points], marker="o", ms=3, label=label)
                for run in (runs or {}).get(label, []):
                    seed_points = run.get(key) or []
                    ax.plot([x for x, _ in seed_points], [y for _, y in seed_points], lw=0.7, alpha=0.35,
                            color=line.get_color())
        ax.set_xlabel("rollouts spent")
        ax.set_title(key)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_rollout_bins(cells: dict[str, dict[str, float]], path: Path) -> None:
    """Where each cell's rollouts went: one stacked bar per cell, the share of its rollouts run on groups of each
    pass-rate bin (:data:`core.runtime.metrics.PASS_BINS`; the two ends train nothing under GRPO)."""
    if not cells:
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.5 * len(cells)))
    labels = list(cells)
    left = [0.0] * len(labels)
    for label in PASS_BINS:
        shares = [cells[c].get(label, 0.0) / (sum(cells[c].values()) or 1.0) for c in labels]
        ax.barh(labels, shares, left=left, label=f"pass {label}")
        left = [a + b for a, b in zip(left, shares)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of rollouts spent, by the group's pass rate")
    ax.legend(fontsize=7, ncol=len(PASS_BINS), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_phases(records: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    phases = sorted({k for r in records for k in r if k.startswith("time/") and k != "time/iteration"})
    its = [r["iteration"] for r in records]
    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = [0.0] * len(records)
    for phase in phases:
        values = [float(r.get(phase, 0.0)) for r in records]
        ax.bar(its, values, bottom=bottom, label=phase.removeprefix("time/"))
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel("iteration")
    ax.set_ylabel("seconds")
    ax.set_title("time per phase")
    if phases:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_async(records: list[dict[str, Any]], path: Path) -> None:
    """``rollout_loop.mode: async``: staleness of trained groups per step, idle shares, drops."""
    plt = pyplot()
    its = [r["iteration"] for r in records]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    levels = sorted({int(k.rsplit("_", 1)[1]) for r in records for k in r
                     if k.startswith("async/staleness_") and k.rsplit("_", 1)[1].isdigit()})
    bottom = [0.0] * len(records)
    for level in levels:
        values = [float(r.get(f"async/staleness_{level}", 0.0)) for r in records]
        left.bar(its, values, bottom=bottom, label=f"staleness {level}")
        bottom = [b + v for b, v in zip(bottom, values)]
    left.plot(its, [float(r.get("async/dropped_stale", 0.0)) for r in records], "kx", label="dropped (too stale)")
    left.set_xlabel("iteration")
    left.set_ylabel("groups")
    left.set_title("trained groups by staleness")
    left.legend()
    for key, label in (("async/trainer_idle_share", "trainer idle"), ("async/rollout_idle_share", "rollouts idle")):
        right.plot(its, [float(r.get(key, 0.0)) for r in records], marker="o", label=label)
    right.set_ylim(0, 1)
    right.set_xlabel("iteration")
    right.set_ylabel("share of the step's wall time")
    right.set_title("idle shares")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sampler_weights(snapshots: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for snap in snapshots:
        label = f"iteration {snap['iteration']}"
        if "weights" in snap:
            ax.hist(list(snap["weights"].values()), bins=30, range=(0, 1), histtype="step", label=label)
        else:
            hist = snap["histogram"]
            ax.stairs(hist["counts"], hist["edges"], label=label)
    ax.set_xlabel("sampling weight")
    ax.set_ylabel("tasks")
    ax.set_title("sampler weight distribution over tasks")
    if snapshots:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(run_dir: Path) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise ScaleCUAError(f"{run_dir} is not a run directory")
    records = MetricsLog(run_dir).read()
    if not records:
        raise ScaleCUAError(f"{run_dir}/metrics.jsonl has no iterations yet; nothing to plot")
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    plot_curves(records, out / "curves.png")
    plot_phases(records, out / "phases.png")
    files = ["curves.png", "phases.png"]
    if any("async/staleness_mean" in r for r in records):
        plot_async(records, out / "async.png")
        files.append("async.png")
    weights_file = run_dir / "sampler_weights.jsonl"
    if weights_file.exists():
        snapshots = [json.loads(line) for line in weights_file.read_text().splitlines() if line.strip()]
        plot_sampler_weights(snapshots[-5:], out / "sampler_weights.png")
        files.append("sampler_weights.png")
    last = records[-1]
    summary = {
        "run_dir": str(run_dir),
        "iterations": len(records),
        "final": {k: last[k] for k in ("reward/mean", "success/rate", "groups/informative_share") if k in last},
        "best_success_rate": max(r.get("success/rate", 0.0) for r in records),
        **({"async": {"dropped_stale": sum(r.get("async/dropped_stale", 0.0) for r in records),
                      "staleness_mean": sum(r["async/staleness_mean"] for r in records) / len(records)}}
           if any("async/staleness_mean" in r for r in records) else {}),
        "files": files,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
