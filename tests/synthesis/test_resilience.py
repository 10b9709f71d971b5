"""Crashes lose no accepted task: a desktop killed mid dry run, and the synthesis process killed mid run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.interfaces import JudgeServices
from plugins.synthesis.pipeline import PipelineOptions, VeriGenPipeline
from plugins.synthesis.store import TaskStore

from .helpers import act, fenced, file_task, llm_options, typed_then, verdict
from .scripted_llm import Reply, Rule, ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
TASKS = [file_task(f"Create ~/Documents/r{i}.txt containing r{i}.", path=f"~/Documents/r{i}.txt", text=f"r{i}",
                   suffix=f"{i:04d}") for i in range(3)]


def live_members(pgid: int) -> list[int]:
    """Pids of process group ``pgid`` that are still running (zombies aside)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                state, _ppid, group = handle.read().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != b"Z":
            found.append(int(entry.name))
    return found


async def wait_until_group_is_gone(pgid: int, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s  # bounds a hang only
    while live := live_members(pgid):
        assert time.monotonic() < deadline, f"processes {live} of the killed session still run after {deadline_s:g} s"
        await asyncio.sleep(0.05)


@pytest.mark.desktop
def test_a_desktop_killed_during_a_dry_run_is_replaced(plugins, tmp_path):
    rules = [Rule(model="proposer", replies=[fenced(t) for t in TASKS]),
             Rule(model="judger", replies=[verdict(True)], repeat_last=True)]
    for i in range(3):
        rules.append(Rule(model="checker", contains=f"r{i}.txt",
                          respond=typed_then(f"echo r{i} > ~/Documents/r{i}.txt", act({"type": "done"}))))
    killed: list[str] = []

    async def scenario(server: ScriptedLLM) -> dict:
        registry = plugins.registry("synthesizer_role")
        roles = {
            "proposer": registry.create("llm-proposer", llm_options(server.base_url, "proposer", apps=["os"],
                                                                    candidates_per_job=1, observe=False)),
            "judger": registry.create("llm-judger", llm_options(server.base_url, "judger")),
            "checker": registry.create("llm-checker", llm_options(server.base_url, "checker", max_steps=3,
                                                                  timeout_s=120)),
        }
        backend = plugins.registry("environment").create("local-desktop", {"max_environments": 2}, run_dir=tmp_path)
        executor = plugins.registry("judge_executor").create("sandbox", {})
        original_acquire = backend.acquire

        async def acquire():
            env = await original_acquire()
            if not killed:  # the first desktop handed out dies at its first action
                original_step = env.step

                async def dying_step(action):
                    if not killed:
                        killed.append(env.env_id)
                        os.killpg(env._session.pid, signal.SIGKILL)  # the whole session: Xvfb, probe, apps
                        await wait_until_group_is_gone(env._session.pid)
                    return await original_step(action)

                env.step = dying_step
            return env

        backend.acquire = acquire
        pipeline = VeriGenPipeline(
            PipelineOptions(candidates=3, workers=3, environments=2, max_fix_rounds=0), roles=roles, backend=backend,
            judge=JudgeServices.of(plugins, executor),
            run_dir=tmp_path, run_id="desk-crash")
        try:
            return await pipeline.run()
        finally:
            await pipeline.close()
            await executor.close()
            await backend.close()

    with ScriptedLLM(rules) as server:
        summary = asyncio.run(scenario(server))
    assert killed, "no desktop was killed"
    assert (summary["accepted"], summary["errors"], summary["rejected"]) == (3, 0, 0)
    assert summary["exported"] == 3


KILL_SCRIPT = """
import sys
from core.commands.cli import main_guard
from core.commands.synthesize import main
sys.exit(main_guard(main, ["--config", sys.argv[1], "--no-progress"]))
"""


def test_killing_the_process_keeps_accepted_tasks(tmp_path):
    rules = [Rule(model="proposer", replies=[fenced(t) for t in TASKS]),
             Rule(model="judger", contains="r0.txt", replies=[verdict(True)]),
             # the other verdicts come only once the process is gone (the killed client hangs up)
             Rule(model="judger", replies=[Reply(text=verdict(True), hold=True)], repeat_last=True)]
    with ScriptedLLM(rules) as server:
        config = {
            "run": {"name": "killed", "output_dir": str(tmp_path / "runs")},
            "synthesis": {
                "proposer": {"name": "llm-proposer", "options": llm_options(
                    server.base_url, "proposer", apps=["os"], candidates_per_job=1, observe=False)},
                "judger": {"name": "llm-judger", "options": llm_options(server.base_url, "judger", timeout_s=120)},
                "pipeline": {"name": "verigen", "options": {"candidates": 3, "workers": 3,
                                                            "store": str(tmp_path / "shared.sqlite")}},
            },
        }
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
        output = open(tmp_path / "synthesis.log", "wb")  # noqa: SIM115 (a file, not a pipe nobody reads)
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(tmp_path / "c.yaml")], cwd=ROOT,
                                stdout=output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300  # bounds a hang only
        accepted = 0
        while time.monotonic() < deadline and accepted == 0 and proc.poll() is None:
            time.sleep(0.3)
            if (tmp_path / "shared.sqlite").exists():
                try:
                    with sqlite3.connect(tmp_path / "shared.sqlite", timeout=5) as conn:
                        accepted = conn.execute("SELECT COUNT(*) FROM candidates WHERE status = 'accepted'").fetchone()[0]
                except sqlite3.OperationalError:
                    accepted = 0  # the schema is not there yet
        exited = proc.poll()
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        output.close()
    log_tail = (tmp_path / "synthesis.log").read_text(errors="replace")[-2000:]
    assert exited is None, f"the synthesis process ended on its own (exit {exited}): {log_tail}"
    assert accepted == 1, "no task was accepted within 300 s"
    store = TaskStore(tmp_path / "shared.sqlite")
    assert store.counts() == {"pending": 2, "accepted": 1, "rejected": 0, "error": 0, "duplicate": 0}
    store.close()
    out = subprocess.run([sys.executable, "-m", "plugins.synthesis.store", "export", str(tmp_path / "shared.sqlite"),
                          str(tmp_path / "export")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout)["exported"] == 1
    exported = json.loads(next((tmp_path / "export").rglob("*.json")).read_text())
    assert exported["instruction"] == TASKS[0]["instruction"]
