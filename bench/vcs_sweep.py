"""The K sweep of ``bench/vcs_speedup.py`` (the paper's Figure 5): per K = Delta, the measured training-step
speedup and the compute model's, both relative to step-wise, and their plot.

``python bench/vcs_sweep.py [--quick] [vcs_speedup options]`` runs ``vcs_speedup`` (whose step-wise and K = 5
variants every ratio needs) with the sweep of :data:`SWEEP` and prints its one JSON object; ``--quick`` finishes
in about a minute."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path, not bench/
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

from bench import flops  # noqa: E402

#: the paper's Figure 5 window sizes K = Delta
SWEEP = (1, 3, 5, 8, 10, 15)

#: the paper's Table (Visual Context Segmentation): per-step time step-wise vs sliding-window K = Delta = 5
PAPER = {"step_wise_s": 750.0, "sliding_window_s": 265.0, "ratio": 2.83, "model": "Qwen3.5-9B", "hardware": "GPUs"}


def k_sweep(variants: dict[str, Any], ks: list[int]) -> list[dict[str, Any]]:
    """Per K = Delta: measured step time and the compute model, both relative to step-wise."""
    step = variants["step-wise"]
    out = []
    for k in sorted(set(ks) | {5}):
        v = variants["sliding-window" if k == 5 else f"sliding-window K={k}"]
        measured = "train_step_s" in v
        out.append({"K": k, "items": v["items"], "tokens": v["tokens"], "train_step_s": v.get("train_step_s"),
                    "measured_speedup_vs_step_wise":
                        round(step["train_step_s"] / v["train_step_s"], 3) if measured else None,
                    "compute_model_pflop": v["compute_model_pflop"]["total"],
                    "compute_model_speedup_vs_step_wise": round(
                        step["compute_model_pflop"]["total"] / v["compute_model_pflop"]["total"], 3)})
    return out


def plot_sweep(sweep: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    ks = [row["K"] for row in sweep]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if sweep[0]["measured_speedup_vs_step_wise"] is not None:
        ax.plot(ks, [row["measured_speedup_vs_step_wise"] for row in sweep], "o-", label="measured (this machine)")
    ax.plot(ks, [row["compute_model_speedup_vs_step_wise"] for row in sweep], "s--",
            label=f"compute model ({flops.QWEN3_VL_8B.name})")
    ax.axhline(PAPER["ratio"], color="grey", lw=0.8, ls=":", label=f"paper, K=5 ({PAPER['ratio']}x)")
    ax.set_xlabel("K = Delta (screenshots kept / removal threshold)")
    ax.set_ylabel("training-step speedup vs step-wise")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """``bench/vcs_speedup.py`` with this sweep's K values, as its own process (vcs_speedup imports this module's
    sweep pieces, so this module never imports it back)."""
    import subprocess

    args = list(sys.argv[1:] if argv is None else argv)
    args = args if "--k-sweep" in args else [*args, "--k-sweep", *map(str, SWEEP)]
    return subprocess.run([sys.executable, str(Path(__file__).with_name("vcs_speedup.py")), *args]).returncode


if __name__ == "__main__":
    sys.exit(main())
