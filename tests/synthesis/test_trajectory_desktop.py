"""Trajectory-guided synthesis end to end on real desktops (scripted LLMs, real xterm, real judges).

* a failed task -> the decomposer locates the deviation and writes two easier sub-tasks, each with its own
  setup and judge -> both pass the dry run and are accepted;
* two clusters of solved tasks -> two composed tasks with chained (``and``) judges: the checker completes every
  objective of one (accepted) but only the first objective of the other, which the chained judge scores 0
  (rejected: a harder task is only solved when all its goals are met).
"""

from __future__ import annotations

import json

import pytest
import yaml
from PIL import Image

from core.commands.synthesize import main
from plugins.synthesis.schema import task_from_reply
from plugins.synthesis.store import TaskStore

from .helpers import act, fenced, file_task, llm_options, typed_then, verdict
from .scripted_llm import Rule, ScriptedLLM

pytestmark = pytest.mark.desktop

XTERM = {"type": "open", "parameters": {"path": "xterm"}}
SETUP_AB = [{"type": "execute", "parameters": {"command": "mkdir -p ~/Documents", "shell": True, "check": True}}, XTERM]
SETUP_CD = [{"type": "execute", "parameters": {"command": "mkdir -p ~/Documents/cd", "shell": True, "check": True}},
            XTERM]
DIR_JUDGE = '''import os


def get_os_is_dir__d1r0(config):
    return os.path.isdir(os.path.expanduser(config["path"]))


def check_os_is_dir__d1r0(result, expected=None, **options):
    return 1.0 if result is True else 0.0
'''


def parent(instruction: str, name: str, text: str, setup: list, suffix: str) -> dict:
    task = task_from_reply(file_task(instruction, path=f"~/Documents/{name}", text=text, suffix=suffix,
                                     config=setup), app="os", origin="explore")
    return task.to_json()


FAILED = parent("Create ~/Documents/notes/today.txt containing hello.", "notes/today.txt", "hello",
                SETUP_AB, "f000")
A = parent("Create ~/Documents/a.txt containing alpha.", "a.txt", "alpha", SETUP_AB, "a000")
B = parent("Create ~/Documents/b.txt containing beta.", "b.txt", "beta", SETUP_AB, "b000")
C = parent("Create ~/Documents/c.txt containing gamma.", "c.txt", "gamma", SETUP_CD, "c000")
D = parent("Create ~/Documents/d.txt containing delta.", "d.txt", "delta", SETUP_CD, "d000")

SUB_FOLDER = {**file_task("Create the folder ~/Documents/notes.", config=SETUP_AB),
              "evaluator": {"func": "check_os_is_dir__d1r0", "result": {"type": "get_os_is_dir__d1r0",
                                                                        "path": "~/Documents/notes"},
                            "code": DIR_JUDGE}}
SUB_FILE = file_task("Create ~/Documents/notes/today.txt containing hello (the folder exists).",
                     path="~/Documents/notes/today.txt", text="hello", suffix="5b00",
                     config=[{"type": "execute", "parameters": {"command": "mkdir -p ~/Documents/notes",
                                                                "shell": True, "check": True}}, XTERM])
DECOMPOSITION = {"deviation_step": 0, "analysis": "the agent created ~/Documents/note instead of notes",
                 "subtasks": [SUB_FOLDER, SUB_FILE]}
AB = "Create ~/Documents/a.txt containing alpha and ~/Documents/b.txt containing beta."
CD = "Create ~/Documents/c.txt containing gamma and ~/Documents/d.txt containing delta."


def compose_reply(instruction: str) -> str:
    return fenced({"instruction": instruction, "explanation": "both files", "difficulty": "medium",
                   "estimated_steps": 6})


def rules() -> list[Rule]:
    done = act({"type": "done"})
    return [
        Rule(model="proposer", contains="Failed task", replies=[fenced(DECOMPOSITION)]),
        Rule(model="proposer", contains="Tasks to combine", respond=lambda body: compose_reply(
            AB if "a.txt" in json.dumps(body) else CD)),
        Rule(model="judger", replies=[verdict(True)], repeat_last=True),
        Rule(model="checker", contains="the folder ~/Documents/notes.",
             respond=typed_then("mkdir ~/Documents/notes", done)),
        Rule(model="checker", contains="today.txt",
             respond=typed_then("echo hello > ~/Documents/notes/today.txt", done)),
        Rule(model="checker", contains=AB,
             respond=typed_then("echo alpha > ~/Documents/a.txt; echo beta > ~/Documents/b.txt", done)),
        Rule(model="checker", contains=CD, respond=typed_then("echo gamma > ~/Documents/c.txt", done)),
    ]


def write_inputs(tmp_path):
    tasks = tmp_path / "pool"
    tasks.mkdir()
    for task in (FAILED, A, B, C, D):
        (tasks / f"{task['id']}.json").write_text(json.dumps(task))
    Image.new("RGB", (64, 40), "navy").save(tmp_path / "step0.png")
    turns = [{"index": 0, "response_text": "I make the folder.", "actions": [{"type": "type", "text": "mkdir ~/Documents/note\n"}],
              "feedback": None, "screenshot": "step0.png"},
             {"index": 1, "response_text": "Now the file.",
              "actions": [{"type": "type", "text": "echo hello > ~/Documents/notes/today.txt\n"}],
              "feedback": "bash: /root/Documents/notes/today.txt: No such file or directory"},
             {"index": 2, "response_text": "Done.", "actions": [{"type": "done"}], "feedback": None}]
    ok = [{"index": 0, "response_text": "ok", "actions": [{"type": "done"}]}]
    lines = [{"trajectory_id": "r-failed", "task_id": FAILED["id"], "success": False, "turns": turns}]
    lines += [{"trajectory_id": f"r-{t['id']}", "task_id": t["id"], "success": True, "turns": ok} for t in (A, B, C, D)]
    (tmp_path / "rollouts.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    rates = {FAILED["id"]: 0.0, A["id"]: 1.0, B["id"]: 0.875, C["id"]: 1.0, D["id"]: 1.0}
    (tmp_path / "pass_rates.json").write_text(json.dumps(rates))


def test_decompose_failed_and_compose_solved_on_real_desktops(tmp_path, capsys):
    write_inputs(tmp_path)
    with ScriptedLLM(rules()) as server:
        config = {
            "run": {"name": "traj", "output_dir": str(tmp_path / "runs")},
            "environment": {"name": "local-desktop", "options": {"max_environments": 2}},
            "judge": {"name": "sandbox"},
            "synthesis": {
                "proposer": {"name": "trajectory-proposer", "options": llm_options(
                    server.base_url, "proposer", rollouts="rollouts.jsonl", pass_rates="pass_rates.json",
                    tasks=["pool"], max_subtasks=2, similarity_threshold=0.2)},
                "validator": {"name": "rule-validator"},
                "judger": {"name": "llm-judger", "options": llm_options(server.base_url, "judger")},
                "checker": {"name": "llm-checker", "options": llm_options(server.base_url, "checker", max_steps=3,
                                                                          timeout_s=120)},
                "pipeline": {"name": "verigen", "options": {"candidates": 10, "workers": 3, "environments": 2}},
            },
        }
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))  # relative paths resolve next to the config
        code = main(["--config", str(tmp_path / "c.yaml"), "--no-progress"])
        decompose_request = next(r for r in server.requests_for("proposer") if "Failed task" in json.dumps(r["body"]))
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["candidates"], summary["accepted"], summary["rejected"]) == (4, 3, 1)
    assert summary["by_origin"] == {"decompose": {"candidates": 2, "accepted": 2},
                                    "compose": {"candidates": 2, "accepted": 1}}

    text = json.dumps(decompose_request["body"])
    assert "mkdir ~/Documents/note" in text and "No such file or directory" in text  # actions and feedback
    assert "data:image/png;base64," in text  # the rollout's screenshot

    store = TaskStore(summary["store"])
    rows = {r.instruction: r for r in store.candidates()}
    folder = rows[SUB_FOLDER["instruction"]]
    assert folder.status == "accepted" and folder.parents == [FAILED["id"]]
    assert folder.task_json["metadata"]["deviation_step"] == 0 and folder.task_json["new_id"].endswith("_decompose")
    # derived tasks resolve relative asset paths where their parents do, wherever they are exported
    assert folder.task_json["metadata"]["task_dir"] == str((tmp_path / "pool").resolve())
    ab = rows[AB]
    assert ab.status == "accepted" and sorted(ab.parents) == sorted([A["id"], B["id"]])
    assert ab.task_json["evaluator"]["conj"] == "and" and len(ab.task_json["evaluator"]["func"]) == 2
    assert (ab.initial_score, ab.final_score) == (0.0, 1.0)
    assert ab.task_json["metadata"]["task_dir"] == str((tmp_path / "pool").resolve())
    cd = rows[CD]
    assert (cd.status, cd.stage, cd.final_score) == ("rejected", "checker", 0.0)
    assert "judge scored the reached state 0" in cd.reason
    store.close()
