"""The K sweep of ``bench/vcs_speedup.py`` (the paper's Figure 5): per K = Delta, the measured training-step
speedup and the compute model's, both relative to step-wise, and their plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import flops

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
