"""The VeriGen loop over scripted LLM roles (scripted_llm.py), without desktops (checker disabled).

Paths: a good task is accepted; an ambiguous one is repaired by the fixer and accepted; unsafe judge code
is caught by the rule validator and repaired; an unparsable proposal and an unrepairable task are
rejected at their stages; an unreachable judger is an error, not a rejection. Token and cost accounting
adds up to what the server reported.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from core.runtime.tasks import load_tasks
from plugins.synthesis.pipeline import PipelineOptions, VeriGenPipeline
from plugins.synthesis.store import TaskStore

from .helpers import UNSAFE_JUDGE, fenced, file_task, llm_options, verdict
from .scripted_llm import Reply, Rule, ScriptedLLM

A = file_task("Create the file ~/Documents/alpha.txt containing the word alpha.", path="~/Documents/alpha.txt",
              text="alpha")
B = file_task("Tidy up the files.", suffix="b000")
B_FIXED = file_task("Move ~/Downloads/app.log into the folder ~/Documents/logs.", path="~/Documents/logs/app.log",
                    text="log line", suffix="b001")
C = file_task("Create ~/Documents/gamma.txt containing gamma.", path="~/Documents/gamma.txt", text="gamma",
              code=UNSAFE_JUDGE, suffix="c000")
C_FIXED = file_task("Create ~/Documents/gamma.txt containing gamma.", path="~/Documents/gamma.txt", text="gamma",
                    suffix="c001")
E = file_task("Write a poem.", suffix="e000")
E_AGAIN = file_task("Write a poem about cats.", suffix="e001")


def scripted_rules() -> list[Rule]:
    return [
        Rule(model="proposer", contains="could not be used", replies=["still no JSON"], repeat_last=True),
        Rule(model="proposer", replies=[fenced(A), fenced(B), fenced(C), "I cannot write JSON today.", fenced(E)]),
        Rule(model="judger", contains="alpha.txt", replies=[verdict(True)], repeat_last=True),
        Rule(model="judger", contains="Tidy up", replies=[verdict(False, 0.2, ("ambiguous: which files, where?",))]),
        Rule(model="judger", contains="app.log", replies=[verdict(True, 0.8)], repeat_last=True),
        Rule(model="judger", contains="gamma.txt", replies=[verdict(True)], repeat_last=True),
        Rule(model="judger", contains="poem", replies=[verdict(False, 0.1, ("not verifiable",))], repeat_last=True),
        Rule(model="fixer", contains="Tidy up", replies=[fenced(B_FIXED)]),
        Rule(model="fixer", contains="gamma.txt", replies=[fenced(C_FIXED)]),
        Rule(model="fixer", contains="poem", replies=[fenced(E_AGAIN)], repeat_last=True),
    ]


async def run_pipeline(plugins, server, tmp_path, *, roles=("validator", "judger", "fixer"), workers=2,
                       candidates=5, max_fix_rounds=1, prices=(1.0, 2.0)):
    registry = plugins.registry("synthesizer_role")
    ctx = {"getters": plugins.registry("getter"), "metrics": plugins.registry("metric")}
    made = {"proposer": registry.create("llm-proposer", llm_options(
        server.base_url, "proposer", apps=["os"], candidates_per_job=1, observe=False, format_retries=1,
        price_prompt_per_1m=prices[0], price_completion_per_1m=prices[1]), **ctx)}
    specs = {"validator": ("rule-validator", {}),
             "judger": ("llm-judger", llm_options(server.base_url, "judger", price_prompt_per_1m=prices[0],
                                                  price_completion_per_1m=prices[1])),
             "fixer": ("llm-fixer", llm_options(server.base_url, "fixer", price_prompt_per_1m=prices[0],
                                                price_completion_per_1m=prices[1]))}
    for role in roles:
        name, options = specs[role]
        made[role] = registry.create(name, options, **ctx)
    pipeline = VeriGenPipeline(PipelineOptions(candidates=candidates, workers=workers, max_fix_rounds=max_fix_rounds),
                               roles=made, run_dir=tmp_path, run_id="test-run")
    try:
        return await pipeline.run(), pipeline
    finally:
        await pipeline.close()


def test_each_path_ends_where_it_should(plugins, tmp_path):
    with ScriptedLLM(scripted_rules()) as server:
        summary, _ = asyncio.run(run_pipeline(plugins, server, tmp_path))
        usage = list(server.usage)
        server_requests = list(server.requests)
    store = TaskStore(tmp_path / "tasks.sqlite")
    rows = store.candidates(run_id="test-run")
    by_instruction = {r.instruction: r for r in rows}
    assert summary["candidates"] == 5 and summary["accepted"] == 3 and summary["rejected"] == 2
    assert summary["rejected_by_stage"] == {"propose": 1, "judger": 1}
    assert summary["repairs"] == 3 and summary["accepted_after_repair"] == 2

    alpha = by_instruction[A["instruction"]]
    assert alpha.status == "accepted" and alpha.repairs == 0 and alpha.rule_pass and alpha.judge_pass
    repaired = by_instruction[B_FIXED["instruction"]]
    assert repaired.status == "accepted" and repaired.repairs == 1
    rounds = store.rounds(repaired.id)
    assert [r["findings"] for r in rounds] == [[{"source": "judger", "message": "ambiguous: which files, where?"},
                                                {"source": "judger",
                                                 "message": "suggested repair: fix: ambiguous: which files, where?"}],
                                               []]
    fixer_request = next(r for r in server_requests if r["body"]["model"] == "fixer" and "Tidy up" in str(r["body"]))
    assert "suggested repair" in str(fixer_request["body"]["messages"])
    gamma = by_instruction[C_FIXED["instruction"]]
    first = store.rounds(gamma.id)[0]
    assert not first["rule"]["pass"] and any("subprocess" in r for r in first["rule"]["reasons"])
    assert "judger" not in first  # the rule gate stops the round before the LLM judge is paid for
    poem = by_instruction[E_AGAIN["instruction"]]
    assert (poem.status, poem.stage) == ("rejected", "judger") and "not verifiable" in poem.reason
    unparsable = next(r for r in rows if r.stage == "propose")
    assert unparsable.status == "rejected" and "ReplyFormatError" in unparsable.reason

    # everything the server billed is accounted to some candidate
    assert summary["prompt_tokens"] == sum(u[1] for u in usage)
    assert summary["completion_tokens"] == sum(u[2] for u in usage)
    expected_cost = sum(u[1] * 1.0 + u[2] * 2.0 for u in usage) / 1e6
    assert summary["cost_usd"] == pytest.approx(expected_cost, rel=1e-6)
    assert summary["cost_usd_per_accepted"] == pytest.approx(expected_cost / 3, rel=1e-4)
    assert summary["executable_rate"] is None and summary["reached_execution"] == 0  # no checker ran

    exported = load_tasks([summary["export_dir"]])
    assert sorted(t.instruction for t in exported) == sorted(
        [A["instruction"], B_FIXED["instruction"], C_FIXED["instruction"]])
    fixed = next(t for t in exported if t.instruction == B_FIXED["instruction"])
    assert fixed.model_extra["validation"]["llm_judge_pass"] is True
    assert fixed.model_extra["new_id"] == f"{fixed.id}_explore"
    assert fixed.metadata["repairs"] == 1 and fixed.metadata["difficulty"] == "easy"
    store.close()


def test_role_ablation_lets_unsafe_judges_through(plugins, tmp_path):
    rules = [Rule(model="proposer", replies=[fenced(C)]),
             Rule(model="judger", contains="gamma.txt", replies=[verdict(True)], repeat_last=True)]
    with ScriptedLLM(rules) as server:
        full, _ = asyncio.run(run_pipeline(plugins, server, tmp_path / "full", roles=("validator", "judger"),
                                           candidates=1))
    for rule in rules:
        rule.used = 0
    with ScriptedLLM(rules) as server:
        ablated, _ = asyncio.run(run_pipeline(plugins, server, tmp_path / "ablated", roles=("judger",),
                                              candidates=1))
    assert (full["accepted"], full["rejected_by_stage"]) == (0, {"rule": 1})
    assert ablated["accepted"] == 1 and ablated["roles"]["validator"] is None


def test_unreachable_judger_is_an_error_not_a_rejection(plugins, tmp_path):
    rules = [Rule(model="proposer", replies=[fenced(A)]),
             Rule(model="judger", replies=[Reply(status=503)], repeat_last=True)]
    with ScriptedLLM(rules) as server:
        summary, _ = asyncio.run(run_pipeline(plugins, server, tmp_path, roles=("judger",), candidates=1))
    assert summary["errors"] == 1 and summary["rejected"] == 0 and summary["accepted"] == 0


def test_a_crashing_role_loses_no_accepted_task(plugins, tmp_path):
    """A judger that raises an unexpected exception for one candidate: that candidate is an error, the others go on."""
    rules = [Rule(model="proposer", replies=[fenced(A), fenced(B_FIXED), fenced(C_FIXED)]),
             Rule(model="judger", replies=[verdict(True)], repeat_last=True)]

    async def scenario():
        registry = plugins.registry("synthesizer_role")
        proposer = registry.create("llm-proposer", llm_options(server.base_url, "proposer", apps=["os"],
                                                               candidates_per_job=1, observe=False))
        judger = registry.create("llm-judger", llm_options(server.base_url, "judger"))
        original = judger.review

        async def flaky(task, usage):
            if "app.log" in task.instruction:
                raise RuntimeError("judger bug")
            return await original(task, usage)

        judger.review = flaky
        pipeline = VeriGenPipeline(PipelineOptions(candidates=3, workers=3), roles={"proposer": proposer,
                                                                                   "judger": judger},
                                   run_dir=tmp_path, run_id="crash")
        try:
            return await pipeline.run()
        finally:
            await pipeline.close()

    with ScriptedLLM(rules) as server:
        summary = asyncio.run(scenario())
    assert summary["accepted"] == 2 and summary["errors"] == 1
    assert summary["exported"] == 2
    assert len(list((tmp_path / "tasks").rglob("*.json"))) == 2
    assert json.loads(next((tmp_path / "tasks").rglob("*.json")).read_text())["validation"]["llm_judge_pass"]
