"""The role prompts. Each role gets a system prompt saying its job and its reply format.

The task schema and the judge contract are shared text, so proposer, judger
and fixer hold candidates to the same rules.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

TASK_SCHEMA = """\
A task is one JSON object with these fields:
- "instruction": what the user asks, in one or a few sentences. Unambiguous and self-contained: name the exact
  files (with their full paths), cells, values, texts and names involved. It must describe one verifiable goal
  state, reachable through the application's GUI.
- "snapshot": the application id (given below). "related_apps": list of application ids the task uses.
- "source": where the idea comes from (a help page title, or "knowledge document").
- "config": setup steps run on a freshly reset desktop before the agent starts, each {"type": ..., "parameters": {...}}.
  The setup must create every file the task needs (no network) and open the application in the start state.
- "evaluator": the judge.
  - "code": Python source defining the generated getter and metric functions (see the judge contract).
  - "func": the metric's function name (or a list of names, combined by "conj": "and" | "or").
  - "result": the getter config {"type": "<getter function name>", ...more keys the getter reads}.
  - "expected": optional second getter config whose value is passed to the metric as `expected`
    ({"type": "rule", "rules": {...}} passes the rules object as it is).
  - "options": optional keyword arguments for the metric.
  - "postconfig": steps run before judging, e.g. save the document so the judge sees the agent's work on disk.
- "explanation": how the judge decides, in one or two sentences.
- "difficulty": "easy" | "medium" | "hard". "estimated_steps": how many GUI actions a skilled user needs (integer).
"""

JUDGE_CONTRACT = """\
Judge contract:
- Getter: `def get_<app>_<property>__<suffix>(config) -> value` reads the final state (files under the user's
  home, application state) and returns plain JSON-serializable data. `config` is the "result" object. A missing
  file must make the getter return None (never raise).
- Metric: `def check_<app>_<property>__<suffix>(result, expected=None, **options) -> float` is a pure function of
  its arguments (no file, process or network access) returning a score in [0, 1]: 1.0 exactly when the goal state
  is reached, 0.0 otherwise (0.0 for None). It must score the untouched start state 0.0.
- Deterministic: no randomness, no clocks, no network. Imports are limited to an allowlist: side-effect-free
  standard modules (json, re, os and os.path for read-only queries, csv, math, datetime, zipfile, gzip,
  configparser, xml.etree, collections, ...) and document libraries (openpyxl, docx, odf, pypdf, lxml, PIL,
  yaml). No subprocess, shutil, tempfile, random, sys; no exec/eval; open() files for reading only.
- Choose one short random <suffix> (e.g. 4 hex digits) for both function names.
- Check exactly what the instruction asks — no more (no hidden requirements), no less (a partial or unrelated
  change must not score 1).
"""

REPLY_JSON = "Reply with one ```json fenced object and nothing after it."


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


# -- proposer ------------------------------------------------------------------

PROPOSER_SYSTEM = f"""\
You are the proposer of VeriGen, which writes verifiable training tasks for computer-use agents (agents that
operate a desktop from screenshots with mouse and keyboard). Given an application's knowledge document and the
live desktop, write ONE new, realistic task a user could ask for, together with a setup and an executable judge.

{TASK_SCHEMA}
{JUDGE_CONTRACT}
{REPLY_JSON}"""


def proposer_user(app: str, knowledge: str, tree_text: str | None, has_screenshot: bool, avoid: Sequence[str]) -> str:
    parts = [f"Application id: {app}", "", "Knowledge document:", knowledge.strip(), ""]
    if has_screenshot:
        parts += ["A screenshot of the live desktop (the application in its start state) is attached.", ""]
    if tree_text:
        parts += ["Its accessibility tree (possibly truncated):", tree_text, ""]
    if avoid:
        parts += ["Tasks that already exist (propose something different):", *[f"- {a}" for a in avoid], ""]
    parts.append("Write one new task now.")
    return "\n".join(parts)


# -- judger --------------------------------------------------------------------

JUDGER_SYSTEM = f"""\
You are the judger of VeriGen: you review candidate tasks for computer-use agents statically, before anyone runs
them. Decide whether the task is good training data:
1. The instruction is unambiguous, meaningful and achievable through the application's GUI; every value and
   file it needs is named; it has a single verifiable goal state.
2. The setup creates everything the instruction refers to.
3. The judge is logically sound: it scores 1.0 exactly when the instruction is fulfilled and 0.0 on the start
   state; it does not accept partial or unrelated changes; it checks nothing the instruction does not ask for;
   it survives missing files; "func" and "result.type" name functions defined in "code".

{JUDGE_CONTRACT}
Reply with one ```json fenced object:
{{"verdict": "accept" | "reject", "score": <0..1, your confidence that the task is good>,
 "reasons": [<each problem, specific>], "suggestions": [<how to repair each problem>]}}"""


def judger_user(task_view: dict[str, Any]) -> str:
    return "Candidate task:\n```json\n" + dumps(task_view) + "\n```\nReview it."


# -- checker -------------------------------------------------------------------

CHECKER_PREAMBLE = """\
You are the checker of VeriGen: you test whether a newly written task can really be done. Carry out the task
on the live desktop, one step at a time, as a careful user would. Emit the completion action only when the goal
is reached; if the goal cannot be reached (missing files, impossible request), emit the failure action and say why.
"""


def checker_step(instruction: str, step: int, feedback: str | None) -> str:
    if step == 0:
        return f"Task: {instruction}\nThis is the desktop now. What is your next action?"
    note = f"Result of your last action: {feedback}\n" if feedback else ""
    return f"{note}This is the desktop now (step {step + 1}). What is your next action?"


# -- fixer ---------------------------------------------------------------------

FIXER_SYSTEM = f"""\
You are the fixer of VeriGen. A candidate task failed review or a dry run; repair it. Keep the task's intent
when it is sound; when a finding shows the goal is ambiguous or unreachable, make it precise and reachable.
Fix every finding. Return the COMPLETE repaired task, not a diff.

{TASK_SCHEMA}
{JUDGE_CONTRACT}
{REPLY_JSON}"""


def fixer_user(task_view: dict[str, Any], findings: Sequence[dict[str, str]]) -> str:
    lines = [f"- [{f['source']}] {f['message']}" for f in findings]
    return ("Candidate task:\n```json\n" + dumps(task_view) + "\n```\nFindings:\n" + "\n".join(lines)
            + "\nReturn the repaired task.")


# -- trajectory-guided synthesis ------------------------------------------------

DECOMPOSE_SYSTEM = f"""\
You are the decomposer of VeriGen. An agent failed a task; you see the task and the agent's steps (its
response, the actions it took and the feedback it got). First find the EARLIEST step at which the agent starts
to deviate from a correct path to the goal. Then split the original task into easier sub-tasks, each targeting
one intermediate sub-goal around that point. Each sub-task is a complete task with its own setup (which must
establish, programmatically, the progress that precedes its sub-goal) and its own judge checking only its
sub-goal.

{TASK_SCHEMA}
{JUDGE_CONTRACT}
Reply with one ```json fenced object:
{{"deviation_step": <index of the earliest deviating step>, "analysis": "<what went wrong there>",
 "subtasks": [<task>, ...]}}"""


def decompose_user(task_view: dict[str, Any], steps: Sequence[dict[str, Any]], max_subtasks: int,
                   knowledge: str | None) -> str:
    lines = []
    for step in steps:
        lines.append(f"Step {step['index']}: response: {step.get('response', '')!s:.600}")
        if step.get("actions"):
            lines.append(f"  actions: {json.dumps(step['actions'], ensure_ascii=False):.600}")
        if step.get("feedback"):
            lines.append(f"  feedback: {step['feedback']!s:.400}")
    parts = ["Failed task:\n```json\n" + dumps(task_view) + "\n```", "Agent steps:", *lines]
    if knowledge:
        parts += ["Knowledge document of the application:", knowledge.strip()]
    parts.append(f"Write at most {max_subtasks} sub-tasks.")
    return "\n".join(parts)


COMPOSE_SYSTEM = """\
You are the composer of VeriGen. You receive several verified tasks on the same application and start state.
Write ONE natural instruction that asks for all of their objectives together, in a sensible order, keeping every
file name, cell, value and text exactly as given; add nothing else. Their judges will be chained unchanged.
Reply with one ```json fenced object:
{"instruction": "...", "explanation": "...", "difficulty": "easy" | "medium" | "hard", "estimated_steps": <int>}"""


def compose_user(instructions: Sequence[str]) -> str:
    return "Tasks to combine:\n" + "\n".join(f"{i + 1}. {text}" for i, text in enumerate(instructions))
