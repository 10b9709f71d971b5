"""The bundled task suite, statically: size, variety, valid JSON, oracles, assets and judges that exist."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.pluginmanager import Plugins
from core.runtime.tasks import load_tasks
from core.types import ActionType
from environments.setup import STEP_HANDLERS
from environments.tasks import ROOT, bundled_task_paths, load_bundled_tasks, load_task_file, oracle_actions
from environments.tasks.authoring.__main__ import MODULES, build

TASKS = load_bundled_tasks()


def test_suite_size_and_variety() -> None:
    assert len(TASKS) >= 40
    apps = Counter(app for task in TASKS for app in task.related_apps)
    assert len(apps) >= 5, apps
    assert all(count >= 6 for count in apps.values()), apps
    assert len({t.id for t in TASKS}) == len(TASKS)
    assert {t.domain for t in TASKS} == set(MODULES)


def test_core_loader_reads_the_suite_from_the_package() -> None:
    loaded = load_tasks(["package:environments.tasks/osworld"])
    assert sorted(t.id for t in loaded) == sorted(t.id for t in TASKS)
    assert all(Path(t.source_dir).parent == ROOT for t in loaded)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_task_is_complete(task, plugins: Plugins) -> None:  # type: ignore[no-untyped-def]
    text = json.dumps(task.to_json())
    for relative in re.findall(r'"(assets/[^"]+)"', text):
        assert (Path(task.source_dir) / relative).is_file(), f"{task.id}: missing asset {relative}"
    assert all(step.type in STEP_HANDLERS for step in task.config + task.evaluator.postconfig)

    metrics, getters = plugins.registry("metric"), plugins.registry("getter")
    assert all(name in metrics for name in task.evaluator.funcs), task.evaluator.funcs
    configs = []
    for key in ("result", "expected"):
        value = getattr(task.evaluator, key)
        configs += value if isinstance(value, list) else [value] if value else []
    assert all(c["type"] in getters for c in configs), configs

    actions = oracle_actions(task)
    assert actions[-1].type in (ActionType.DONE, ActionType.FAIL)
    infeasible = task.evaluator.funcs == ["infeasible"]
    assert (actions[-1].type == ActionType.FAIL) == infeasible
    assert task.instruction.strip() and task.related_apps


def test_task_files_are_what_the_authoring_code_writes(tmp_path: Path) -> None:
    for domain in MODULES:
        build(domain, tmp_path)
        fresh = {p.name: json.loads(p.read_text()) for p in (tmp_path / domain).glob("*.json")}
        shipped = {p.name: json.loads(p.read_text()) for p in (ROOT / domain).glob("*.json")}
        assert fresh == shipped, f"{domain}: run python -m environments.tasks.authoring {domain}"
        text_assets = [p for p in (tmp_path / domain / "assets").iterdir() if p.suffix in (".txt", ".html", ".py")]
        for asset in text_assets:
            assert asset.read_text() == (ROOT / domain / "assets" / asset.name).read_text(), asset.name


def test_loader_filters_and_reports_unknown_names() -> None:
    calc = load_bundled_tasks(domains=["libreoffice_calc"])
    assert calc and all(t.domain == "libreoffice_calc" for t in calc)
    picked = load_bundled_tasks(ids=["os-count-lines", "editor-change-port"])
    assert [t.id for t in picked] == ["os-count-lines", "editor-change-port"]
    with pytest.raises(ValueError, match="unknown bundled task domain.*available: chrome"):
        bundled_task_paths(["gimp"])
    with pytest.raises(ValueError, match="unknown bundled task id"):
        load_bundled_tasks(ids=["nope"])
    one = load_task_file(bundled_task_paths(["os"])[0])
    assert one.source_dir == str(ROOT / "os")


def test_core_loader_rejects_unknown_include() -> None:
    with pytest.raises(ConfigError, match="unknown task ids"):
        load_tasks(["package:environments.tasks/osworld"], include=["not-a-task"])


def test_a_task_may_name_several_sources(tmp_path: Path) -> None:
    """As OSWorld's vs_code/ea98c5d7 does (two forum threads)."""
    raw = {"id": "two-sources", "instruction": "x", "evaluator": {"func": "infeasible"},
           "source": ["https://superuser.com/q/1", "https://superuser.com/q/2"]}
    (tmp_path / "t.json").write_text(json.dumps(raw))
    (task,) = load_tasks([str(tmp_path / "t.json")])
    assert task.source == raw["source"]
