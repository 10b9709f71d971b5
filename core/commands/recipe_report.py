"""The recipe's report: ``report/summary.json``, ``report/curves.png`` and the before/after table.

``summary.json`` holds the warm start's held-out loss, warm-start and post-RL
success on the evaluation pool (mean and std over passes; with
``recipe.evaluate.sets``, per set under ``eval_sets``: sampled, greedy, pass@k,
floors and a paired per-family table; the first set is the headline), the RL stage's
success and informative-group share per iteration, the wall time of every
stage and the machine it ran on.
"""

from __future__ import annotations

import html
import json
import os
import platform
from pathlib import Path
from typing import Any, Mapping

import structlog

from core.errors import ScaleCUAError
from core.runtime.metrics import MetricsLog


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "cpus": os.cpu_count()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        pass
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    return info


def overall(result: Mapping[str, Any] | None) -> dict[str, float] | None:
    if not result:
        return None
    row = result["domains"]["Overall"]
    return {"success": round(row["success"] / 100.0, 4), "std": round(row["std"] / 100.0, 4),
            "tasks": row["tasks"], "passes": result["passes"]}


def before_after_table(results: Mapping[str, Any]) -> str:
    """Per-domain success (%) +- std over passes, warm start vs after RL, same tasks and seeds."""
    before, after = results.get("before"), results.get("after")
    domains = [d for d in (before or after or {"domains": {}})["domains"] if d != "Overall"] + ["Overall"]
    passes = (before or after or {}).get("passes")
    lines = [f"Success rate (%), {passes} passes per task, same tasks and seeds", "",
             "| domain | tasks | warm start | after RL | change |", "|---|---|---|---|---|"]
    for domain in domains:
        b = before["domains"].get(domain) if before else None
        a = after["domains"].get(domain) if after else None
        cell = lambda r: f"{r['success']:.1f} ± {r['std']:.1f}" if r else "-"  # noqa: E731
        change = f"{a['success'] - b['success']:+.1f}" if a and b else "-"
        tasks = (b or a or {}).get("tasks", "-")
        lines.append(f"| {domain} | {tasks} | {cell(b)} | {cell(a)} | {change} |")
    return "\n".join(lines)


def _pct(result: Mapping[str, Any] | None) -> str:
    return f"{result['domains']['Overall']['success']:.1f}" if result else "-"


def set_summary(results: Mapping[str, Any]) -> dict[str, Any]:
    """One evaluation set's numbers (0..1): sampled, greedy, pass@k, floors and a paired per-family table."""
    before, after = results.get("before"), results.get("after")
    out: dict[str, Any] = {"warm_start": overall(before), "after_rl": overall(after)}
    if out["warm_start"] and out["after_rl"]:
        out["gain"] = round(out["after_rl"]["success"] - out["warm_start"]["success"], 4)
    if results.get("control"):
        out["sft_only_control"] = overall(results["control"])
    if results.get("before_greedy") or results.get("after_greedy"):
        out["greedy"] = {"warm_start": overall(results.get("before_greedy")),
                         "after_rl": overall(results.get("after_greedy")),
                         "sft_only_control": overall(results.get("control_greedy"))}
    out["pass_at"] = {label: {k: None if v is None else round(v / 100.0, 4)
                              for k, v in r["domains"]["Overall"]["pass_at"].items()}
                      for label, r in (("warm_start", before), ("after_rl", after)) if r}
    if results.get("floors"):
        out["floors"] = {name: floor["success"] for name, floor in results["floors"].items()}
    families = sorted({*((before or {}).get("families") or {}), *((after or {}).get("families") or {})})
    if families:
        cell = lambda r, f: round(r["families"][f]["success"] / 100.0, 4) if r and f in r.get("families", {}) else None  # noqa: E731
        out["families"] = {f: {"tasks": ((before or after)["families"].get(f) or {}).get("tasks"),
                               "warm_start": cell(before, f), "after_rl": cell(after, f)} for f in families}
    return out


def before_after_report(results: Mapping[str, Any]) -> str:
    """Markdown: for each evaluation set, the per-domain table, greedy and pass@k, floors, the per-family table."""
    sets = results.get("sets") or {"pool": results}
    parts = []
    for name, r in sets.items():
        lines = [f"## {name}", "", before_after_table(r), ""]
        lines += ["| measure | warm start | after RL |", "|---|---|---|"]
        if r.get("control"):
            lines.append(f"| SFT-only control (RL's wall time as more warm-start epochs) | {_pct(r['control'])}"
                         + (f", greedy {_pct(r.get('control_greedy'))}" if r.get("control_greedy") else "") + " | |")
        if r.get("before_greedy") or r.get("after_greedy"):
            lines.append(f"| greedy (1 pass) | {_pct(r.get('before_greedy'))} | {_pct(r.get('after_greedy'))} |")
        for k in ("1", "2", "4", "8"):
            cells = [(x or {}).get("domains", {}).get("Overall", {}).get("pass_at", {}).get(k) for x in
                     (r.get("before"), r.get("after"))]
            if any(c is not None for c in cells):
                lines.append(f"| pass@{k} | " + " | ".join("-" if c is None else f"{c:.1f}" for c in cells) + " |")
        for floor, value in (r.get("floors") or {}).items():
            lines.append(f"| floor: {floor} | {100 * value['success']:.1f} | |")
        families = set_summary(r).get("families")
        if families:
            lines += ["", "| family | tasks | warm start | after RL | change |", "|---|---|---|---|---|"]
            for family, row in families.items():
                b, a = row["warm_start"], row["after_rl"]
                change = f"{100 * (a - b):+.1f}" if a is not None and b is not None else "-"
                lines.append(f"| {family} | {row['tasks']} | " + " | ".join(
                    "-" if v is None else f"{100 * v:.1f}" for v in (b, a)) + f" | {change} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def plot_recipe_curves(records: list[dict[str, Any]], evals: Mapping[str, Any], path: Path) -> None:
    """Success against policy updates: training batches (rolled out before update i), the periodic
    evaluations (``run.eval_every``, after update i+1) and the recipe's before/after evaluation."""
    from core.runtime.plots import pyplot, health_figure, plot_health

    plt = pyplot()
    its = [r["iteration"] for r in records]
    fig, axes, health = health_figure(plt)
    plot_health(health, records)
    axes[0].plot(its, [r.get("success/rate", float("nan")) for r in records], marker="o", ms=3, alpha=0.6,
                 label="training batches (tasks picked by the sampler)")
    points = [(r["iteration"] + 1, r["eval/success"]) for r in records if "eval/success" in r]
    before, after = overall(evals.get("before")), overall(evals.get("after"))
    if points:
        line = ([(0, before["success"])] if before else []) + points
        axes[0].plot([p[0] for p in line], [p[1] for p in line], marker="s", color="tab:red",
                     label="whole pool, fixed seeds (run.eval_every)")
    for row, x, colour, name in ((before, 0, "tab:gray", "warm start"), (after, len(its), "tab:purple", "after RL")):
        if row:
            axes[0].errorbar([x], [row["success"]], yerr=[row["std"]], fmt="D", color=colour, capsize=4,
                             label=f"{name}: evaluation, {row['passes']} passes (± std over passes)")
    axes[0].set_ylim(-0.05, 1.05)
    axes[0].set_xlabel("RL policy updates")
    axes[0].set_title("success rate")
    axes[0].legend(fontsize=7)
    axes[1].plot(its, [r.get("groups/informative_share", float("nan")) for r in records], marker="o", ms=3,
                 color="tab:green")
    axes[1].set_ylim(-0.05, 1.05)
    axes[1].set_xlabel("RL iteration")
    axes[1].set_title("share of groups with non-zero advantage")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_recipe_report(root: Path, state: Mapping[str, Any]) -> dict[str, Any]:
    stages = state.get("stages", {})
    out = root / "report"
    out.mkdir(exist_ok=True)
    summary: dict[str, Any] = {"root": str(root), "machine": machine(),
                               "stage_seconds": {k: v.get("seconds") for k, v in stages.items()}}
    warm = stages.get("warm_start", {}).get("outputs") or {}
    if warm.get("summary") and Path(warm["summary"]).is_file():
        ws = json.loads(Path(warm["summary"]).read_text(encoding="utf-8"))
        keys = ("steps", "demonstrations", "segments", "train_loss", "held_out_loss")
        summary["warm_start"] = {k: ws[k] for k in keys if k in ws}
    evals: dict[str, Any] = {}
    ev = stages.get("evaluate", {}).get("outputs") or {}
    if ev.get("before_after") and Path(ev["before_after"]).is_file():
        evals = json.loads(Path(ev["before_after"]).read_text(encoding="utf-8"))
        summary["warm_start_success"] = overall(evals.get("before"))
        summary["post_rl_success"] = overall(evals.get("after"))
        if summary["warm_start_success"] and summary["post_rl_success"]:
            summary["rl_gain"] = round(summary["post_rl_success"]["success"]
                                       - summary["warm_start_success"]["success"], 4)
        if evals.get("sets"):
            summary["eval_sets"] = {name: set_summary(r) for name, r in evals["sets"].items()}
    records = MetricsLog(root / "rl").read() if (root / "rl").is_dir() else []
    if records:
        summary["rl"] = {
            "iterations": len(records),
            "success_per_iteration": [round(r.get("success/rate", 0.0), 4) for r in records],
            "informative_share_per_iteration": [round(r.get("groups/informative_share", 0.0), 4) for r in records],
            "eval_success": {r["iteration"]: r["eval/success"] for r in records if "eval/success" in r},
        }
        plot_recipe_curves(records, evals, out / "curves.png")
        summary["curves"] = str(out / "curves.png")
    pages = {name: page for name, page in (ev.get("episodes") or {}).items() if page and Path(page).is_file()}
    if pages:
        summary["episodes"] = pages
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    write_index(out, summary, root / "evaluate" / "before_after.md")
    return summary


def write_index(out: Path, summary: Mapping[str, Any], table: Path) -> Path:
    """``report/index.html``: the before/after table, the curves and links to the episode pages."""
    parts = [f"<h1>{html.escape(Path(summary['root']).name)}</h1>"]
    if table.is_file():
        parts.append(f"<pre>{html.escape(table.read_text(encoding='utf-8'))}</pre>")
    if summary.get("curves"):
        parts.append(f'<img src="{html.escape(os.path.relpath(summary["curves"], out))}" alt="curves" width="900">')
    links = "".join(f'<li><a href="{html.escape(os.path.relpath(page, out))}">{html.escape(name)}</a>: each '
                    "task's episodes before and after RL, side by side</li>"
                    for name, page in (summary.get("episodes") or {}).items())
    if links:
        parts.append(f"<h2>Episodes</h2><ul>{links}</ul>")
    index = out / "index.html"
    index.write_text('<!doctype html><html><head><meta charset="utf-8"><title>report</title></head><body>'
                     + "".join(parts) + "</body></html>\n", encoding="utf-8")
    return index


def episode_pages(where: Path, name: str, base: Path, results: Mapping[str, Any]) -> str | None:
    """The viewer's pages of each evaluated checkpoint of one set (``results``: label -> core.eval result, under
    ``base/<label>`` unless reused from elsewhere), and a page with each task's episodes before / after (/ control)
    side by side: ``<where>/report/<set>.html``; None (and a warning) when there are no rollouts to show."""
    from core.runtime.episodes import write_compare_page, write_episode_pages

    columns = {key: Path(r["reused_from"]).parent if r.get("reused_from") else base / key
               for key, r in results.items() if key != "floors" and r is not None}
    try:
        for run_dir in columns.values():
            write_episode_pages(run_dir)
        return str(write_compare_page(where / "report" / f"{name}.html", columns, f"{name}: {' / '.join(columns)}"))
    except ScaleCUAError as exc:  # no rollouts written (every episode lost): the numbers still stand
        structlog.get_logger(__name__).warning("no episode pages for this set", set=name, error=str(exc))
        return None
