"""``python -m core.judge metric`` and the executors' registration through the entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import load_config
from core.errors import ConfigError
from plugins.judges.in_environment import InEnvironmentExecutor
from plugins.judges.sandbox import SandboxExecutor

from .conftest import WORK_DIR


def judge_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.judge", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.fixture
def metric_file(tmp_path: Path) -> Path:
    path = tmp_path / "judge.py"
    path.write_text("def close(result, expected, tolerance=0.0):\n    return float(abs(result - expected) <= tolerance)\n")
    return path


def test_cli_prints_score_status_error(metric_file, tmp_path, host_guard):
    done = judge_cli("metric", "--code", str(metric_file), "--function", "close", "--result", "1.0",
                     "--expected", "1.05", "--options", '{"tolerance": 0.1}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"score": 1.0, "status": "ok", "error": None}
    (tmp_path / "expected.json").write_text("2.0")
    done = judge_cli("metric", "--code", str(metric_file), "--function", "close", "--result", "1.0",
                     "--expected", "@expected.json", cwd=tmp_path)
    assert json.loads(done.stdout) == {"score": 0.0, "status": "ok", "error": None}


def test_cli_exits_0_whatever_the_judge_does(tmp_path, host_guard):
    loop = tmp_path / "loop.py"
    loop.write_text("def spin(result, expected):\n    while True:\n        pass\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"judge:\n  name: sandbox\n  options: {{wall_timeout_s: 1, work_dir: {WORK_DIR}}}\n")
    done = judge_cli("metric", "--code", str(loop), "--function", "spin", "--result", "1", "--expected", "1",
                     "--config", str(config), "--task-id", "t-9", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["score"], out["status"]) == (0.0, "timeout")
    assert "task_id=t-9" in done.stderr  # the failure is logged with the task id
    rejected = tmp_path / "bad.py"
    rejected.write_text("import os\n\ndef m(result, expected):\n    os.system('true')\n    return 1.0\n")
    done = judge_cli("metric", "--code", str(rejected), "--function", "m", "--result", "1", "--expected", "1",
                     cwd=tmp_path)
    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["status"] == "rejected" and "'os.system' is not allowed" in out["error"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--code", "missing.py", "--function", "f", "--result", "1", "--expected", "1"], "--code: cannot read"),
        (["--code", "{code}", "--function", "close", "--result", "nope", "--expected", "1"], "--result: not valid JSON"),
        (["--code", "{code}", "--function", "close", "--result", "1", "--expected", "1", "--options", "[1]"],
         "--options: must be a JSON object"),
        (["--code", "{code}", "--function", "close", "--result", "1", "--expected", "1", "--executor", "sandbx"],
         "Did you mean 'sandbox'?"),
        (["--code", "{code}", "--function", "close"], "required: --result, --expected"),
    ],
)
def test_cli_bad_invocations_exit_2(args, message, metric_file, tmp_path):
    done = judge_cli("metric", *[a.replace("{code}", str(metric_file)) for a in args], cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_both_executors_are_registered(plugins):
    registry = plugins.registry("judge_executor")
    assert {"sandbox", "in-environment"} <= set(registry.names())
    assert isinstance(registry.create("sandbox", {"work_dir": WORK_DIR}), SandboxExecutor)
    assert isinstance(registry.create("in-environment", {"probe_grace_s": 5}), InEnvironmentExecutor)


def test_config_options_are_validated_by_path(plugins, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("judge:\n  name: in-environment\n  options: {wall_timeout: 3, cpu_time_s: 0}\n")
    with pytest.raises(ConfigError) as info:
        load_config(config, plugins=plugins)
    problems = "\n".join(info.value.problems)
    assert "judge.options.wall_timeout: unknown option. Did you mean 'wall_timeout_s'?" in problems
    assert "judge.options.cpu_time_s: Input should be greater than or equal to 1" in problems
