from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from core.commands.ablate import aggregate, cell_overrides, curves, expand, load_spec, mean_curve
from core.commands.ablate import format_table as format_ablation
from core.commands.ablate import main as ablate_main
from core.errors import ConfigError, ScaleCUAError
from core.commands.eval import format_table, pass_at_k, summarize
from core.runtime.metrics import MetricsLog
from core.runtime.plots import plot_ablation, write_report
from core.types import Evaluator, Judgement, RolloutGroup, Task, Trajectory

ROOT = Path(__file__).resolve().parents[2]


def test_pass_at_k_unbiased_estimator():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 4, 4) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))  # 0.5
    assert pass_at_k(4, 2, 8) is None


def _task(task_id: str, domain: str) -> Task:
    return Task(id=task_id, instruction="x", snapshot=domain, evaluator=Evaluator(func="exact_match"))


def _group(task_id: str, outcomes: list[int]) -> RolloutGroup:
    return RolloutGroup(task_id, [
        Trajectory(f"{task_id}-{i}", task_id, task_id, judgement=Judgement(score=float(o)))
        for i, o in enumerate(outcomes)
    ])


def test_summarize_per_domain_std_over_passes_and_groups():
    tasks = {"a": _task("a", "libreoffice_calc"), "b": _task("b", "libreoffice_writer"), "c": _task("c", "os")}
    results = [_group("a", [1, 0, 1, 1]), _group("b", [0, 0, 1, 0]), _group("c", [1, 1, 1, 1])]
    table = summarize(results, tasks, 4, {"Office": ["libreoffice_calc", "libreoffice_writer"]})
    office = table["Office"]
    per_pass = [50.0, 0.0, 100.0, 50.0]
    assert office["tasks"] == 2
    assert office["success"] == pytest.approx(50.0)
    assert office["std"] == pytest.approx(35.3553, abs=1e-3) and per_pass  # pstdev of the per-pass rates
    assert office["pass_at"]["1"] == pytest.approx(50.0)
    assert office["pass_at"]["4"] == pytest.approx(100.0)
    assert office["pass_at"]["8"] is None
    assert table["os"]["success"] == 100.0
    assert table["Overall"]["tasks"] == 3
    text = format_table(table, "t")
    assert "Office" in text and "Overall" in text and "pass@8" in text


def test_metrics_truncate_drops_redone_and_torn_lines(tmp_path):
    log = MetricsLog(tmp_path)
    for i in range(5):
        log.append({"iteration": i, "reward/mean": i / 10})
    with log.path.open("a") as fh:
        fh.write('{"iteration": 5, "rew')  # torn by a kill
    assert log.truncate_from(3) == 3
    assert [r["iteration"] for r in log.read()] == [0, 1, 2]


def test_report_writes_plots(tmp_path):
    log = MetricsLog(tmp_path)
    for i in range(4):
        log.append({"iteration": i, "reward/mean": 0.1 * i, "success/rate": 0.2 * i,
                    "groups/informative_share": 0.5, "time/rollout": 1.0, "time/train": 0.5})
    (tmp_path / "sampler_weights.jsonl").write_text(json.dumps({"iteration": 2, "weights": {"a": 0.2, "b": 0.9}}) + "\n")
    summary = write_report(tmp_path)
    for name in ("curves.png", "phases.png", "sampler_weights.png"):
        data = (tmp_path / "report" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert summary["iterations"] == 4 and summary["best_success_rate"] == pytest.approx(0.6)


def test_report_on_empty_run_is_a_clear_error(tmp_path):
    with pytest.raises(ScaleCUAError, match="no iterations yet"):
        write_report(tmp_path)


def test_ablation_cells_swap_names_and_drop_foreign_options(tmp_path):
    spec_file = tmp_path / "abl.yaml"
    spec_file.write_text("base: base.yaml\nmatrix:\n  sampler: [frontier, uniform]\n  segmenter: [sliding-window, step-wise]\n")
    spec = load_spec(spec_file)
    cells = expand(spec)
    assert len(cells) == 4
    base_raw = {"sampler": {"name": "frontier", "options": {"sigma": 0.25}}, "segmenter": {"name": "sliding-window"}}
    label, overrides = cell_overrides(base_raw, {"sampler": "uniform", "segmenter": "sliding-window"})
    assert label == "sampler=uniform,segmenter=sliding-window"
    assert overrides == ["~sampler.options", "sampler.name=uniform", "segmenter.name=sliding-window"]
    _, same = cell_overrides(base_raw, {"sampler": "frontier"})
    assert same == ["sampler.name=frontier"]  # same plugin keeps its options


def test_ablation_rejects_non_slot(tmp_path):
    spec_file = tmp_path / "abl.yaml"
    spec_file.write_text("base: base.yaml\nmatrix:\n  algorithm: [a]\n")
    with pytest.raises(ConfigError, match="matrix.algorithm: not a plugin slot"):
        load_spec(spec_file)


def test_ablation_curves_put_each_metric_against_the_rollouts_spent(tmp_path):
    log = MetricsLog(tmp_path)
    log.append({"iteration": 0, "rollout/episodes": 24.0, "success/rate": 0.25})
    log.append({"iteration": 1, "rollout/episodes": 40.0, "success/rate": 0.5, "eval/success": 0.4})  # a refill
    log.append({"iteration": 2, "rollout/episodes": 8.0, "rollout/episodes_run": 24.0, "success/rate": 0.75})
    got = curves(tmp_path, ["success/rate", "eval/success"])  # episodes_run (dropped groups too) where recorded
    assert got == {"success/rate": [[24.0, 0.25], [64.0, 0.5], [88.0, 0.75]], "eval/success": [[64.0, 0.4]]}
    assert curves(None, ["success/rate"]) == {"success/rate": []}
    plot_ablation({"sampler=frontier": got, "sampler=uniform": got}, tmp_path / "ablation.png")
    assert (tmp_path / "ablation.png").read_bytes().startswith(b"\x89PNG")


def test_ablation_seeds_aggregate_each_cell_over_its_runs(tmp_path):
    """``seeds:``: one run per cell and seed; the table is mean ± sd of the runs' summaries, the curves are the
    point-by-point means (a run with fewer points, e.g. one stopped earlier by a budget, joins fewer of them)."""
    def row(cell, seed, success, points):
        return {"cell": cell, "seed": seed, "status": "ok", "summary": {"iterations": len(points),
                                                                         "eval/success": success},
                "curves": {"eval/success": points}}

    rows = [row("sampler=frontier", 0, 0.25, [[24.0, 0.2], [48.0, 0.25]]),
            row("sampler=frontier", 1, 0.75, [[24.0, 0.4], [48.0, 0.75]]),
            row("sampler=dapo", 0, 0.5, [[30.0, 0.5]]),
            {**row("sampler=dapo", 1, None, []), "status": "exit 1"}]
    cells = aggregate(rows, ["eval/success"])
    frontier, dapo = cells
    assert frontier["summary"]["eval/success"] == pytest.approx(0.5)
    assert frontier["sd"]["eval/success"] == pytest.approx(0.3536, abs=1e-4)
    assert frontier["curves"]["eval/success"] == [[24.0, pytest.approx(0.3)], [48.0, 0.5]]
    assert (dapo["status"], dapo["summary"]["eval/success"], dapo["sd"]["eval/success"]) == ("1/2 ok", 0.5, None)
    assert mean_curve([[[1.0, 1.0], [2.0, 3.0]], [[3.0, 2.0]]]) == [[2.0, 1.5], [2.0, 3.0]]
    table = format_ablation(cells, ["eval/success"])
    assert "0.5 ± 0.35" in table and "1/2 ok" in table
    plot_ablation({c["cell"]: c["curves"] for c in cells}, tmp_path / "seeds.png",
                  runs={c["cell"]: [r["curves"] for r in rows if r["cell"] == c["cell"]] for c in cells})
    assert (tmp_path / "seeds.png").read_bytes().startswith(b"\x89PNG")


def test_ablation_seeds_run_every_cell_with_the_same_seeds(tmp_path, capsys):
    (tmp_path / "abl.yaml").write_text(
        f"base: {ROOT / 'configs' / 'quickstart.yaml'}\nmatrix:\n  sampler: [frontier, uniform]\nseeds: [3, 4]\n")
    assert ablate_main([str(tmp_path / "abl.yaml"), "--dry-run", f"run.output_dir={tmp_path}"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [(p["cell"], p["seed"]) for p in plan] == [("sampler=frontier", 3), ("sampler=frontier", 4),
                                                      ("sampler=uniform", 3), ("sampler=uniform", 4)]
    assert "run.seed=4" in plan[1]["overrides"] and "run.name=sampler-uniform_seed3" in plan[2]["overrides"]
