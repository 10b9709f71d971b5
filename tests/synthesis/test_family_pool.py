"""The family pool through VeriGen on real desktops: ``python -m core.synthesize --config configs/families.yaml``
(template proposer, rule validator, oracle checker, the real sandboxed judge), exported by split; a second run
into the same store records duplicates instead of crashing; a variant that fails its own check is reported by
family and parameters and never exported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pytest

from core.commands.synthesize import main
from core.types import Action
from plugins.synthesis.families import CATALOG
from plugins.synthesis.families.spec import Family, commands
from plugins.synthesis.store import TaskStore

pytestmark = pytest.mark.desktop
ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "families.yaml")


def _run(tmp_path: Path, capsys, *overrides: str) -> dict[str, Any]:
    code = main(["--config", CONFIG, "--no-progress", f"run.output_dir={tmp_path / 'runs'}",
                 f"synthesis.pipeline.options.export_dir={tmp_path / 'pool'}",
                 f"synthesis.pipeline.options.store={tmp_path / 'store.sqlite'}",
                 "environment.options.desktop_user=null", "synthesis.pipeline.options.workers=3",
                 "synthesis.pipeline.options.environments=2", *overrides])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_the_family_pool_lands_in_the_store_by_split_and_a_rerun_records_duplicates(tmp_path, capsys) -> None:
    small = ["synthesis.proposer.options.families=[count-lines,make-files,infeasible,move-named]",
             "synthesis.proposer.options.heldout_families=[move-named]", "synthesis.proposer.options.train=2",
             "synthesis.proposer.options.validation=1", "synthesis.proposer.options.test=1",
             "synthesis.proposer.options.heldout=1"]
    first = _run(tmp_path, capsys, *small)
    assert (first["candidates"], first["accepted"], first["rejected"], first["errors"]) == (13, 13, 0, 0)
    assert first["executable_rate"] == 1.0 and first["exported"] == 13
    pool = tmp_path / "pool"
    counts = {split: len(list((pool / split / "os").glob("*.json"))) for split in ("train", "validation", "test",
                                                                                    "heldout")}
    assert counts == {"train": 6, "validation": 3, "test": 3, "heldout": 1}
    task = json.loads((pool / "test" / "os" / "fam-count-lines-test-0000.json").read_text())
    assert task["validation"]["execution_pass"] is True and task["metadata"]["split"] == "test"
    _check_demonstrations(tmp_path, pool, counts)

    for path in pool.rglob("*.json"):
        path.unlink()
    again = _run(tmp_path, capsys, *small)
    assert (again["candidates"], again["duplicates"], again["accepted"]) == (13, 13, 0)
    assert again["reached_execution"] == 0 and again["exported"] == 13  # nothing checked twice, all exported
    store = TaskStore(tmp_path / "store.sqlite")
    assert store.counts() == {"pending": 0, "accepted": 13, "rejected": 0, "error": 0, "duplicate": 13}
    store.close()


def _check_demonstrations(tmp_path: Path, pool: Path, counts: dict[str, int]) -> None:
    """The oracle checker kept every accepted variant's oracle run, by split, as a demonstration the warm start
    reads in the policy's own format; the train split's folder holds no other split's task."""
    from core.runtime.demonstrations import load_demonstrations
    from core.runtime.tasks import load_tasks
    from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions

    [run] = (tmp_path / "runs").glob("*/demonstrations")
    assert {split: len(list((run / split).glob("*.jsonl"))) for split in counts} == counts
    backend = LocalDesktopBackend(LocalDesktopOptions())
    train = {t.id: t for t in load_tasks([str(pool / "train")], convert=backend.convert_task)}
    demos, report = load_demonstrations([str(run / "train")], tasks=train, parse=backend.parse_response)
    assert sorted(d.task_id for d in demos) == sorted(train) and report.skipped == {}
    for demo in demos:
        oracle = [Action.model_validate(a) for a in train[demo.task_id].metadata["oracle"]]
        assert [a for t in demo.turns for a in t.actions] == oracle
        assert all(backend.parse_response(t.response_text) == t.actions for t in demo.turns)
        assert demo.initial is not None and all(t.screenshot is not None for t in demo.turns[:-1])
    long = next(d for d in demos if "make-files" in d.task_id)
    assert len(long.turns) >= 13  # 6 or 7 commands (two turns each), then done


class _LenientTouch(Family):
    """A family whose judge only checks that the file exists: its near miss (the wrong content) scores 1."""

    name = "lenient-touch"
    paraphrases = ("Write {word} into ~/{file}.txt.", "Put {word} in ~/{file}.txt.", "~/{file}.txt: {word}.",
                   "Save {word} as ~/{file}.txt.")

    def params(self, draw):
        return {"file": draw.one("word"), "word": draw.one("word")}

    def setup(self, p: Mapping[str, Any]) -> str:
        return "true"

    def oracle(self, p):
        return commands(f"echo {p['word']} > ~/{p['file']}.txt")

    def end_state(self, p):
        return [(f"{p['file']}.txt", "mode", "644")]  # any file echo creates (umask 022): blind to its content

    def near_misses(self, p):
        return {"wrong word": commands(f"echo wrong > ~/{p['file']}.txt")}


def test_a_variant_failing_its_check_is_reported_and_never_enters_the_pool(tmp_path, capsys) -> None:
    CATALOG.add(_LenientTouch)
    try:
        summary = _run(tmp_path, capsys, "synthesis.proposer.options.families=[lenient-touch]",
                       "synthesis.proposer.options.heldout_families=[]", "synthesis.proposer.options.train=1",
                       "synthesis.proposer.options.validation=0", "synthesis.proposer.options.test=0")
    finally:
        del CATALOG.families["lenient-touch"]
    assert (summary["accepted"], summary["rejected"], summary["rejected_by_stage"]) == (0, 1, {"checker": 1})
    [rejected] = summary["rejected_examples"]
    assert rejected["family"] == "lenient-touch" and rejected["stage"] == "checker"
    assert set(rejected["values"]) == {"word"} and len(rejected["values"]["word"]) == 2
    assert "near miss 'wrong word' scores 1" in rejected["reason"]
    assert not list((tmp_path / "pool").rglob("*.json"))
