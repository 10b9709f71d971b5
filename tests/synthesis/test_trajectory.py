"""Trajectory-guided synthesis without desktops: rollout files, clustering, judge chaining, job planning."""

from __future__ import annotations

import json

import pytest

from core.errors import ConfigError
from core.types import Action, ActionType, Judgement, Observation, SetupStep, Task, Trajectory, Turn
from plugins.synthesis.compose import chain_evaluators, cluster, compose_task, cosine, tfidf_vectors
from core.runtime.metrics import trajectory_record as rollout_record
from plugins.synthesis.rollouts import load_rollouts, pass_rates
from plugins.synthesis.schema import task_from_reply
from plugins.synthesis.validator import RuleValidator, RuleValidatorOptions

from .helpers import file_task

SETUP = [{"type": "execute", "parameters": {"command": "mkdir -p ~/Documents", "shell": True, "check": True}}]
OTHER_SETUP = [{"type": "open", "parameters": {"path": "xterm"}}]


def make(instruction: str, path: str, text: str, *, suffix: str = "aaaa", config=SETUP, app: str = "os") -> Task:
    return task_from_reply(file_task(instruction, path=path, text=text, suffix=suffix, config=config, app=app),
                           app=app, origin="explore")


def test_tfidf_similarity_prefers_shared_rare_words():
    vectors = tfidf_vectors(["bold the header row of sales.xlsx", "bold the header row of grades.xlsx",
                             "rename the sheet to Summary"])
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    assert cosine(vectors[0], vectors[0]) == pytest.approx(1.0)


def test_clusters_need_same_app_same_setup_and_similar_instructions():
    a = make("Create ~/Documents/a.txt containing alpha.", "~/Documents/a.txt", "alpha")
    b = make("Create ~/Documents/b.txt containing beta.", "~/Documents/b.txt", "beta")
    c = make("Create ~/Documents/c.txt containing gamma.", "~/Documents/c.txt", "gamma", config=OTHER_SETUP)
    d = make("Create ~/Documents/d.txt containing delta.", "~/Documents/d.txt", "delta", app="mousepad")
    unrelated = make("Rename the folder holding invoices to archive", "~/Documents/x", "x")
    infeasible = Task.model_validate({**b.to_json(), "id": "inf", "evaluator": {"func": "infeasible"}})
    groups = cluster([a, b, c, d, unrelated, infeasible], threshold=0.3, size=2)
    assert [[t.id for t in g] for g in groups] == [sorted([a.id, b.id])]
    assert cluster([a, b], threshold=0.99, size=2) == []


def test_chained_judge_renames_generated_functions_and_passes_the_rules(plugins):
    # both parents define functions with the SAME names: chaining must keep them apart
    a = make("Create ~/Documents/a.txt containing alpha.", "~/Documents/a.txt", "alpha", suffix="same")
    b = make("Create ~/Documents/b.txt containing beta.", "~/Documents/b.txt", "beta", suffix="same")
    b.evaluator.result = {"type": "os_file_text__same", "path": "~/Documents/b.txt"}  # resolved via get_ prefix
    sleep = SetupStep(type="sleep", parameters={"seconds": 1})
    a.evaluator.postconfig = [sleep]
    b.evaluator.postconfig = [sleep]  # identical steps run once
    ev = chain_evaluators([a, b])
    assert ev.funcs == ["check_os_file_text__same__c0", "check_os_file_text__same__c1"]
    assert [r["type"] for r in ev.result] == ["get_os_file_text__same__c0", "get_os_file_text__same__c1"]
    assert ev.expected == [{}, {}] and ev.options == [{"text": "alpha"}, {"text": "beta"}]
    assert ev.conj == "and" and len(ev.postconfig) == 1

    composed = compose_task([a, b], task_id="comp-1", instruction="Create a.txt with alpha and b.txt with beta.",
                            explanation="both files", difficulty="medium", estimated_steps=6)
    assert composed.metadata["parents"] == [a.id, b.id] and composed.config == a.config
    validator = RuleValidator(RuleValidatorOptions(), getters=plugins.registry("getter"),
                              metrics=plugins.registry("metric"))
    assert validator.validate(composed) == []

    namespace: dict = {}
    exec(compile(ev.code, "<chained>", "exec"), namespace)  # the test inspects the generated module directly
    check0, check1 = namespace["check_os_file_text__same__c0"], namespace["check_os_file_text__same__c1"]
    assert check0("alpha\n", None, text="alpha") == 1.0 and check1("alpha", None, text="beta") == 0.0


def test_rollout_records_round_trip_and_pass_rates(tmp_path):
    traj = Trajectory("t-1", "task-a", "g")
    traj.turns.append(Turn(0, "I type.", [1], [0.0], actions=[Action(type=ActionType.TYPE, text="ls\n")],
                           observation=Observation(text="typed")))
    traj.turns.append(Turn(1, "garbage", [2], [0.0], parse_error="no action"))
    traj.judgement = Judgement(score=1.0)
    lines = [rollout_record(traj, {0: "shot0.png"}), {**rollout_record(traj), "trajectory_id": "t-2",
                                                       "success": False}]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    rollouts = load_rollouts(path)
    assert [r.success for r in rollouts] == [True, False]
    first = rollouts[0].steps
    assert first[0].actions == [{"type": "type", "text": "ls\n"}] and first[0].feedback == "typed"
    assert first[0].screenshot == tmp_path / "shot0.png" and first[1].to_prompt()["feedback"] == "unparsable: no action"
    assert pass_rates(rollouts) == {"task-a": 0.5}
    rates = tmp_path / "rates.json"
    rates.write_text(json.dumps({"task-a": 0.25}))
    assert pass_rates(rollouts, rates) == {"task-a": 0.25}

    path.write_text('{"task_id": "x"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"rollouts.jsonl:2: not a recorded rollout"):
        load_rollouts(path)


def test_plan_alternates_decompositions_and_compositions(plugins, tmp_path):
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    tasks = [make("Create ~/Documents/a.txt containing alpha.", "~/Documents/a.txt", "alpha"),
             make("Create ~/Documents/b.txt containing beta.", "~/Documents/b.txt", "beta"),
             make("Create ~/Documents/f1.txt containing one.", "~/Documents/f1.txt", "one", config=OTHER_SETUP),
             make("Create ~/Documents/f2.txt containing two.", "~/Documents/f2.txt", "two", config=OTHER_SETUP)]
    for t in tasks:
        (tasks_dir / f"{t.id}.json").write_text(json.dumps(t.to_json()))
    step = {"index": 0, "response_text": "x", "actions": [{"type": "done"}]}
    rollouts = [{"task_id": tasks[0].id, "success": True, "turns": [step]},
                {"task_id": tasks[1].id, "success": True, "turns": [step]},
                {"task_id": tasks[2].id, "success": False, "turns": [step]},
                {"task_id": tasks[3].id, "success": False, "turns": [step, step]},
                {"task_id": "not-in-the-pool", "success": False, "turns": [step]}]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rollouts))
    registry = plugins.registry("synthesizer_role")
    proposer = registry.create("trajectory-proposer", {
        "model": "m", "api_key_env": None, "rollouts": str(tmp_path / "r.jsonl"), "tasks": [str(tasks_dir)],
        "max_subtasks": 2})
    jobs = proposer.plan(100)
    assert [j.origin for j in jobs] == ["decompose", "compose", "decompose"]
    assert sorted(jobs[1].parents) == sorted([tasks[0].id, tasks[1].id])
    assert jobs[0].payload["count"] == 2
    assert [j.origin for j in proposer.plan(3)] == ["decompose", "compose"]
    with pytest.raises(ConfigError, match="failed_at_most"):
        registry.create("trajectory-proposer", {"model": "m", "api_key_env": None, "rollouts": str(tmp_path / "r.jsonl"),
                                                "tasks": [str(tasks_dir)], "failed_at_most": 0.9,
                                                "solved_at_least": 0.5})
