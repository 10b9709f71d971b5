"""A bad-input corpus for the loaders: configs and task files with wrong types, huge numbers, deep nesting,
path traversal, symlinks out of the task directory and bytes that are not UTF-8 each give one clear error
(ConfigError; exit 2 from the command line, no traceback, nothing written). Hypothesis generates the inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.config import load_config, load_raw
from core.errors import ConfigError
from core.pluginmanager import load_plugins
from core.runtime.tasks import load_tasks
from environments.setup import SetupContext, _local_source

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = load_raw(REPO / "configs" / "quickstart.yaml")
TASK = json.loads(next((REPO / "environments/tasks/osworld/os").glob("*.json")).read_text())
PLUGINS = load_plugins(environ={})

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["../../../../etc/passwd", "/etc/shadow", "file:///root/.ssh/id_rsa", "~", "\x00", "é" * 5]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


def paths_of(tree: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += paths_of(value, (*prefix, key))
    return out


def replaced(tree: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    copy = dict(tree) if isinstance(tree, dict) else {}
    copy[path[0]] = replaced(copy.get(path[0]), path[1:], value)
    return copy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_config_loads_or_raises_one_config_error(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    path = data.draw(st.sampled_from(paths_of(QUICKSTART) + [("run", "new_key"), ("model", "options", "x")]))
    raw = replaced(QUICKSTART, path, data.draw(values))
    file = tmp_path_factory.mktemp("cfg") / "c.yaml"
    file.write_text(yaml.safe_dump(raw, allow_unicode=True))
    try:
        load_config(file, plugins=PLUGINS)
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_task_file_loads_or_raises_one_config_error(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    path = data.draw(st.sampled_from(paths_of(TASK)))
    task = replaced(TASK, path, data.draw(values))
    directory = tmp_path_factory.mktemp("tasks")
    (directory / "t.json").write_text(json.dumps(task))
    try:
        loaded = load_tasks([str(directory)])
    except ConfigError as exc:
        assert len(exc.problems) == 1 and str(directory / "t.json") in exc.problems[0]
    else:
        assert len(loaded) <= 1


@pytest.mark.parametrize(("name", "content"), [
    ("binary.json", b"\xff\xfe\x00{"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000),
    ("huge.json", json.dumps({**TASK, "id": "h", "config": [{"type": "sleep", "parameters": {"seconds": 1e308}}]})
     .encode()),
    ("list.json", b"[1, 2, 3]"),
])
def test_unreadable_task_files_are_named(tmp_path: Path, name: str, content: bytes) -> None:
    (tmp_path / name).write_bytes(content)
    try:
        load_tasks([str(tmp_path)])
    except ConfigError as exc:
        assert str(tmp_path / name) in exc.problems[0]


def test_asset_paths_cannot_leave_the_task_directory(tmp_path: Path) -> None:
    task_dir = tmp_path / "task"
    (task_dir / "assets").mkdir(parents=True)
    (task_dir / "assets" / "ok.csv").write_text("a")
    (tmp_path / "secret.txt").write_text("host")
    (task_dir / "assets" / "link.csv").symlink_to(tmp_path / "secret.txt")
    context = SetupContext(task_dir=task_dir)
    assert _local_source("assets/ok.csv", context) == (task_dir / "assets" / "ok.csv").resolve()
    for bad in ("../secret.txt", "assets/../../secret.txt", "assets/link.csv"):
        with pytest.raises(ValueError, match="escapes the task directory"):
            _local_source(bad, context)


@pytest.mark.parametrize("content", [b"\xff\xfe not yaml", b"run: [1, 2\n", b"a: " + b"[" * 3000 + b"]" * 3000,
                                     b"run:\n  iterations: 1e400\n", b"- just\n- a list\n"])
def test_the_command_line_exits_2_without_a_traceback_and_writes_nothing(tmp_path: Path, content: bytes) -> None:
    config = tmp_path / "bad.yaml"
    config.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "core.run", "--config", str(config), f"run.output_dir={tmp_path}/out"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "error:" in proc.stderr
    assert not (tmp_path / "out").exists()
