"""The SQLite task store: records, rounds, export, and many concurrent writers (threads and processes)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.runtime.tasks import load_tasks
from plugins.synthesis.store import TaskStore, main

TASK = {
    "id": "t-1",
    "instruction": "Put 3 in A1.",
    "snapshot": "libreoffice_calc",
    "config": [],
    "related_apps": ["libreoffice_calc"],
    "evaluator": {"func": "exact_match", "result": {"type": "rule"}, "expected": {"type": "rule", "rules": {"expected": 3}}},
}


def test_candidate_lifecycle_and_rounds(tmp_path):
    store = TaskStore(tmp_path / "tasks.sqlite")
    store.insert("t-1", run_id="r", origin="explore", app="libreoffice_calc", task_json=TASK)
    store.add_round("t-1", 0, TASK, {"rule": {"pass": False, "reasons": ["no code"]}})
    store.update("t-1", status="accepted", stage="accepted", rule_pass=True, judge_pass=True, judge_score=0.9,
                 exec_pass=True, executable=True, initial_score=0.0, final_score=1.0, repairs=1,
                 validation={"rule_pass": True}, prompt_tokens=10, completion_tokens=5, cost_usd=0.01, latency_s=2.5)
    row = store.get("t-1")
    assert row.status == "accepted" and row.instruction == "Put 3 in A1." and row.task_json == TASK
    assert row.rule_pass is True and row.final_score == 1.0 and row.validation == {"rule_pass": True}
    assert store.rounds("t-1") == [{"round": 0, "task": TASK, "rule": {"pass": False, "reasons": ["no code"]}}]
    assert store.counts() == {"pending": 0, "accepted": 1, "rejected": 0, "error": 0, "duplicate": 0}
    assert store.instructions(app="libreoffice_calc") == ["Put 3 in A1."]
    with pytest.raises(ValueError, match="status must be one of"):
        store.update("t-1", status="done")
    with pytest.raises(ValueError, match="unknown columns"):
        store.update("t-1", colour="red")
    with pytest.raises(KeyError, match="no candidate 'nope'"):
        store.update("nope", status="rejected")
    store.close()


def test_export_writes_osworld_files_the_training_run_loads(tmp_path):
    store = TaskStore(tmp_path / "tasks.sqlite")
    for i, status in enumerate(["accepted", "rejected", "accepted"]):
        task = {**TASK, "id": f"t-{i}", "validation": {"execution_pass": True}}
        store.insert(f"t-{i}", run_id="r", origin="explore", task_json=task, status=status)
    paths = store.export(tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in paths) == [
        "libreoffice_calc/t-0.json", "libreoffice_calc/t-2.json"]
    tasks = load_tasks([str(tmp_path / "out")])
    assert [t.id for t in tasks] == ["t-0", "t-2"]
    assert tasks[0].model_extra["validation"] == {"execution_pass": True}  # Table 5 fields survive

    store.close()
    assert main(["export", str(tmp_path / "tasks.sqlite"), str(tmp_path / "cli")]) == 0
    assert len(list((tmp_path / "cli").rglob("*.json"))) == 2
    assert main(["counts", str(tmp_path / "missing.sqlite")]) == 2


def test_many_coroutines_share_one_store(tmp_path):
    store = TaskStore(tmp_path / "tasks.sqlite")

    async def worker(w: int) -> None:
        for i in range(25):
            cid = f"w{w}-{i}"
            await store.ainsert(cid, run_id="r", origin="explore", task_json={**TASK, "id": cid})
            await store.aadd_round(cid, 0, TASK, {})
            await store.aupdate(cid, status="accepted" if i % 2 else "rejected")

    async def all_workers() -> None:
        await asyncio.gather(*(worker(w) for w in range(8)))

    asyncio.run(all_workers())
    assert store.counts() == {"pending": 0, "accepted": 96, "rejected": 104, "error": 0, "duplicate": 0}
    store.close()


WRITER = textwrap.dedent(
    """
    import sys
    from plugins.synthesis.store import TaskStore
    store = TaskStore(sys.argv[1], busy_timeout_s=60)
    proc = sys.argv[2]
    for i in range(60):
        cid = f"{proc}-{i}"
        store.insert(cid, run_id=proc, origin="explore", task_json={"id": cid, "instruction": "x"})
        store.update(cid, status="accepted", cost_usd=0.5)
    store.close()
    """
)


def test_concurrent_processes_lose_nothing(tmp_path):
    db = tmp_path / "shared.sqlite"
    TaskStore(db).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), f"p{n}"], cwd=Path(__file__).parents[2],
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    store = TaskStore(db)
    assert store.counts()["accepted"] == 240
    assert {store.counts(run_id=f"p{n}")["accepted"] for n in range(4)} == {60}
    store.close()
    assert json.loads(subprocess.check_output(
        [sys.executable, "-m", "plugins.synthesis.store", "counts", str(db)], cwd=Path(__file__).parents[2]))[
        "accepted"] == 240
