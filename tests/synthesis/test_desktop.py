"""VeriGen end to end on real local desktops: ``python -m core.synthesize`` with every role, scripted LLMs.

The LLM roles talk to the scripted OpenAI-compatible server (scripted_llm.py); the desktops, the setup
steps, the checker's actions (xterm on Xvfb), the judges (the sandbox executor) are all real. Each
scripted candidate shows one path ending where it should:

* good task                      -> accepted on the first round
* judge crashes on the start     -> repaired by the fixer -> accepted (its first execution counts as not executable)
* judge scores the start 1       -> still lenient after repair -> rejected at the checker
* unreachable goal               -> the checker gives up -> rejected at the checker
* ambiguous instruction          -> rejected by the judger, repaired -> accepted after a real dry run
* setup that fails               -> rejected at the checker
"""

from __future__ import annotations

import json

import pytest
import yaml

from core.commands.synthesize import main
from plugins.synthesis.store import TaskStore

from .helpers import CRASHING_JUDGE, LENIENT_JUDGE, act, fenced, file_task, llm_options, typed_then, verdict
from .scripted_llm import Rule, ScriptedLLM

pytestmark = pytest.mark.desktop

GOOD = file_task("Create the file ~/Documents/out.txt containing the word hello.", path="~/Documents/out.txt",
                 text="hello", suffix="0001")
CRASH = file_task("Create ~/Documents/crash.txt containing the word crash.", path="~/Documents/crash.txt",
                  text="crash", code=CRASHING_JUDGE, suffix="0002")
CRASH_FIXED = file_task(CRASH["instruction"], path="~/Documents/crash.txt", text="crash", suffix="0003")
LENIENT = file_task("Create ~/Documents/lenient.txt containing the word lenient.", path="~/Documents/lenient.txt",
                    text="lenient", code=LENIENT_JUDGE, suffix="0004")
UNREACHABLE = file_task("Copy the text of ~/vault/key.txt into ~/Documents/key.txt.", path="~/Documents/key.txt",
                        text="the key", suffix="0005")
AMBIGUOUS = file_task("Tidy up the documents.", suffix="0006")
AMBIGUOUS_FIXED = file_task("Create ~/Documents/tidy.txt containing the word tidy.", path="~/Documents/tidy.txt",
                            text="tidy", suffix="0007")
SETUP_FAILS = file_task("Create ~/Documents/setupfail.txt containing ok.", path="~/Documents/setupfail.txt",
                        text="ok", suffix="0008",
                        config=[{"type": "execute", "parameters": {"command": "false", "shell": True, "check": True}}])


def rules() -> list[Rule]:
    done = act({"type": "done"})
    return [
        Rule(model="proposer", replies=[fenced(t) for t in (GOOD, CRASH, LENIENT, UNREACHABLE, AMBIGUOUS, SETUP_FAILS)]),
        Rule(model="judger", contains="Tidy up", replies=[verdict(False, 0.3, ("ambiguous: which documents?",))]),
        Rule(model="judger", replies=[verdict(True, 0.9)], repeat_last=True),
        Rule(model="fixer", contains="crash.txt", replies=[fenced(CRASH_FIXED)]),
        Rule(model="fixer", contains="lenient.txt", replies=[fenced(LENIENT)], repeat_last=True),
        Rule(model="fixer", contains="vault", replies=[fenced(UNREACHABLE)], repeat_last=True),
        Rule(model="fixer", contains="Tidy up", replies=[fenced(AMBIGUOUS_FIXED)]),
        Rule(model="fixer", contains="setupfail", replies=[fenced(SETUP_FAILS)], repeat_last=True),
        Rule(model="checker", contains="out.txt", respond=typed_then("echo hello > ~/Documents/out.txt", done)),
        Rule(model="checker", contains="crash.txt",
             respond=typed_then("echo crash > ~/Documents/crash.txt", done)),
        Rule(model="checker", contains="tidy.txt", respond=typed_then("echo tidy > ~/Documents/tidy.txt", done)),
        Rule(model="checker", contains="vault",
             replies=[act({"type": "fail", "text": "~/vault/key.txt does not exist"})], repeat_last=True),
    ]


def write_config(tmp_path, base_url: str) -> str:
    prices = {"price_prompt_per_1m": 3.0, "price_completion_per_1m": 15.0}
    config = {
        "run": {"name": "verigen-test", "output_dir": str(tmp_path / "runs")},
        "environment": {"name": "local-desktop", "options": {"max_environments": 2}},
        "judge": {"name": "sandbox", "options": {}},
        "synthesis": {
            "proposer": {"name": "llm-proposer", "options": llm_options(base_url, "proposer", apps=["os"],
                                                                        candidates_per_job=1, **prices)},
            "validator": {"name": "rule-validator"},
            "judger": {"name": "llm-judger", "options": llm_options(base_url, "judger", **prices)},
            "checker": {"name": "llm-checker", "options": llm_options(base_url, "checker", max_steps=4, timeout_s=120,
                                                                      **prices)},
            "fixer": {"name": "llm-fixer", "options": llm_options(base_url, "fixer", **prices)},
            "pipeline": {"name": "verigen", "options": {"candidates": 6, "workers": 3, "environments": 2,
                                                        "max_fix_rounds": 1}},
        },
    }
    path = tmp_path / "synthesize.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_every_path_on_real_desktops(tmp_path, capsys):
    with ScriptedLLM(rules()) as server:
        code = main(["--config", write_config(tmp_path, server.base_url), "--no-progress"])
        proposer_requests = server.requests_for("proposer")
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["candidates"], summary["accepted"], summary["rejected"], summary["errors"]) == (6, 3, 3, 0)
    assert summary["rejected_by_stage"] == {"checker": 3}
    # first execution: crash -> not executable; setup failure -> never executed; the rest ran their judges
    assert summary["reached_execution"] == 5 and summary["executable_rate"] == pytest.approx(0.8)
    assert summary["cost_usd_per_accepted"] > 0 and summary["mean_latency_s"] > 0

    # the proposer looked at the live desktop: a real screenshot went with every request
    for request in proposer_requests:
        parts = request["body"]["messages"][1]["content"]
        assert any(p["type"] == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,")
                   for p in parts)

    store = TaskStore(summary["store"])
    rows = {r.instruction: r for r in store.candidates()}
    good = rows[GOOD["instruction"]]
    assert (good.status, good.repairs, good.executable, good.initial_score, good.final_score) == (
        "accepted", 0, True, 0.0, 1.0)
    crash = rows[CRASH["instruction"]]
    assert (crash.status, crash.repairs, crash.executable) == ("accepted", 1, False)
    first = store.rounds(crash.id)[0]["checker"]
    assert first["initial"]["status"] == "crashed" and "start state" in first["findings"][0]["message"]
    lenient = rows[LENIENT["instruction"]]
    assert (lenient.status, lenient.stage, lenient.initial_score) == ("rejected", "checker", 1.0)
    assert "rewards doing nothing" in lenient.reason
    unreachable = rows[UNREACHABLE["instruction"]]
    assert (unreachable.status, unreachable.stage) == ("rejected", "checker")
    assert "vault/key.txt does not exist" in unreachable.reason
    assert store.rounds(unreachable.id)[0]["checker"]["reachable"] is False
    tidy = rows[AMBIGUOUS_FIXED["instruction"]]
    rounds = store.rounds(tidy.id)
    assert rounds[0]["judger"]["accept"] is False and "checker" not in rounds[0]
    assert rounds[1]["checker"]["passed"] is True and tidy.status == "accepted"
    setup = rows[SETUP_FAILS["instruction"]]
    assert (setup.status, setup.executable) == ("rejected", None) and "setup failed" in setup.reason

    exported = sorted(p.name for p in (tmp_path / "runs").rglob("tasks/os/*.json"))
    assert exported == sorted(f"{rows[i].id}.json" for i in
                              (GOOD["instruction"], CRASH["instruction"], AMBIGUOUS_FIXED["instruction"]))
    task = json.loads(next((tmp_path / "runs").rglob(f"tasks/os/{good.id}.json")).read_text())
    assert task["validation"]["execution_pass"] is True and task["validation"]["final_score"] == 1.0
    store.close()

    # every accepted task's dry run is a warm-start demonstration in the policy's own format
    from core.runtime.demonstrations import load_demonstrations
    from core.runtime.tasks import load_tasks
    from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions

    backend = LocalDesktopBackend(LocalDesktopOptions())
    export = next((tmp_path / "runs").rglob("tasks/os")).parent
    tasks = {t.id: t for t in load_tasks([str(export)], convert=backend.convert_task)}
    demo_dir = export.parent / "demonstrations"
    assert sorted(p.stem for p in demo_dir.glob("*.jsonl")) == sorted(p.removesuffix(".json") for p in exported)
    demos, report = load_demonstrations([str(demo_dir)], tasks=tasks, parse=backend.parse_response)
    assert len(demos) == 3 and report.skipped == {}
    good_demo = next(d for d in demos if d.task_id == good.id)
    assert [a.type.value for t in good_demo.turns for a in t.actions][-1] == "done"
    assert all(backend.parse_response(t.response_text) == t.actions for t in good_demo.turns)
    assert good_demo.initial is not None and all(t.screenshot is not None for t in good_demo.turns[:-1])
