"""``python -m core.synthesize``: a full run without desktops, and user mistakes as messages, not tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from core.commands.cli import main_guard
from core.commands.synthesize import main

from .helpers import fenced, file_task, llm_options, verdict
from .scripted_llm import Rule, ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
TASK = file_task("Create ~/Documents/cli.txt containing cli.", path="~/Documents/cli.txt", text="cli")


def config(tmp_path: Path, base_url: str, **changes) -> dict:
    cfg = {
        "run": {"name": "cli", "output_dir": str(tmp_path / "runs")},
        "synthesis": {
            "proposer": {"name": "llm-proposer", "options": llm_options(
                base_url, "proposer", apps=["os"], candidates_per_job=2, observe=False, api_key_env="TEST_LLM_KEY")},
            "validator": {"name": "rule-validator"},
            "judger": {"name": "llm-judger", "options": llm_options(base_url, "judger", api_key_env="TEST_LLM_KEY")},
            "checker": None,
            "fixer": None,
            "pipeline": {"name": "verigen", "options": {"candidates": 2, "workers": 2}},
        },
    }
    cfg.update(changes)
    return cfg


def write(tmp_path: Path, cfg: dict) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_full_run_writes_summary_store_and_export_but_never_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TEST_LLM_KEY", "sk-very-secret-0042")
    rules = [Rule(model="proposer", replies=[fenced(TASK)], repeat_last=True),
             Rule(model="judger", replies=[verdict(True)], repeat_last=True)]
    with ScriptedLLM(rules) as server:
        code = main_guard(main, ["--config", write(tmp_path, config(tmp_path, server.base_url)), "--no-progress"])
        keys = {r["headers"]["authorization"] for r in server.requests}
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["candidates"] == 2 and summary["accepted"] == 2
    assert summary["roles"] == {"proposer": "llm-proposer", "validator": "rule-validator", "judger": "llm-judger",
                                "checker": None, "fixer": None}
    run_dir = Path(summary["run_dir"])
    assert {"config.yaml", "plugins.json", "summary.json", "log.jsonl", "tasks.sqlite"} <= {
        p.name for p in run_dir.iterdir()}
    assert len(list((run_dir / "tasks" / "os").glob("*.json"))) == 2
    assert keys == {"Bearer sk-very-secret-0042"}
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert b"sk-very-secret-0042" not in path.read_bytes(), path


def run_cli(tmp_path: Path, cfg: dict, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.synthesize", "--config", write(tmp_path, cfg), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})


def run_in_process(tmp_path: Path, cfg: dict, capsys, *extra: str) -> tuple[int, str]:
    code = main_guard(main, ["--config", write(tmp_path, cfg), "--no-progress", *extra])
    return code, capsys.readouterr().err


def test_config_mistakes_are_messages(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TEST_LLM_KEY", "x")
    cfg = config(tmp_path, "http://127.0.0.1:9/v1")
    cfg["synthesis"]["proposer"]["options"]["temprature"] = 0.3
    code, err = run_in_process(tmp_path, cfg, capsys)
    assert code == 2 and "synthesis.proposer.options.temprature: unknown option" in err
    assert "Did you mean 'temperature'?" in err

    cfg = config(tmp_path, "http://127.0.0.1:9/v1")
    cfg["synthesis"]["judge"] = cfg["synthesis"].pop("judger")
    code, err = run_in_process(tmp_path, cfg, capsys)
    assert code == 2 and "synthesis.judge: unknown role; the roles are proposer" in err

    cfg = config(tmp_path, "http://127.0.0.1:9/v1")
    del cfg["synthesis"]["pipeline"]
    code, err = run_in_process(tmp_path, cfg, capsys)
    assert code == 2 and "synthesis.pipeline: required" in err and "verigen" in err


def test_missing_key_and_missing_desktops_name_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TEST_LLM_KEY", raising=False)
    cfg = config(tmp_path, "http://127.0.0.1:9/v1")
    code, err = run_in_process(tmp_path, cfg, capsys)
    assert code == 2 and "TEST_LLM_KEY is not set" in err

    monkeypatch.setenv("TEST_LLM_KEY", "x")
    cfg["synthesis"]["checker"] = {"name": "llm-checker", "options": llm_options("http://127.0.0.1:9/v1", "checker")}
    code, err = run_in_process(tmp_path, cfg, capsys)
    assert code == 2 and "environment: the checker" in err


def test_dry_run_prepares_the_run_directory_and_mistakes_print_no_traceback(tmp_path):
    result = run_cli(tmp_path, config(tmp_path, "http://127.0.0.1:9/v1"), "--dry-run")
    assert result.returncode == 0, result.stderr
    run_dir = Path(result.stdout.strip())
    assert (run_dir / "config.yaml").is_file() and (run_dir / "plugins.json").is_file()

    cfg = config(tmp_path, "http://127.0.0.1:9/v1")
    cfg["synthesis"]["fixer"] = {"name": "llm-fixr"}
    result = run_cli(tmp_path, cfg, "--dry-run")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "synthesis.fixer.name: unknown task-synthesizer role 'llm-fixr'. Did you mean 'llm-fixer'?" in result.stderr


def test_example_config_validates_and_roles_can_be_ablated():
    from core.config import load_config

    resolved, _ = load_config(ROOT / "configs" / "synthesize.yaml", ["synthesis.judger=null"], environ={})
    assert resolved.components["synthesis.proposer"].name == "llm-proposer"
    assert "synthesis.judger" not in resolved.components  # the paper's "w/o LLM judge agent"
    assert resolved.options["synthesis.pipeline"].candidates == 24
    assert resolved.options["synthesis.checker"].api_key_env == "OPENAI_API_KEY"
