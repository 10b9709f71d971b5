"""Clustering solved tasks and chaining their judges into one harder, multi-objective task.

Similarity (documented, deliberately simple): two tasks can be composed when
they belong to the same application AND start from the same state (their
setup ``config`` lists are identical — e.g. the same spreadsheet opened the
same way), and their instructions are similar: cosine similarity of TF-IDF
vectors over lower-cased word tokens, ``idf = ln((1 + N) / (1 + df)) + 1``.
Clusters grow greedily: each unassigned task (in id order) seeds a cluster
and takes the most similar unassigned tasks above the threshold, up to
``size`` tasks.

Chaining: the composed evaluator lists every sub-task's metrics with
``conj: "and"`` (scores average, and any 0 scores the whole task 0), so it
scores 1 only when every objective is met. Generated functions are renamed
per sub-task (``name__c<i>``) so their code can live in one module.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.types import Evaluator, Task

_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def tfidf_vectors(texts: Sequence[str]) -> list[dict[str, float]]:
    docs = [Counter(tokens(t)) for t in texts]
    n = len(docs)
    df = Counter(word for doc in docs for word in doc)
    vectors = []
    for doc in docs:
        vec = {w: c * (math.log((1 + n) / (1 + df[w])) + 1.0) for w, c in doc.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        vectors.append({w: v / norm for w, v in vec.items()})
    return vectors


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(w, 0.0) for w, v in a.items())


def setup_key(task: Task) -> str:
    return json.dumps([s.model_dump(mode="json") for s in task.config], sort_keys=True)


def composable(task: Task) -> bool:
    """Judges that chain soundly: not infeasible, and a single metric or an ``and`` list."""
    ev = task.evaluator
    return "infeasible" not in ev.funcs and (len(ev.funcs) == 1 or ev.conj == "and")


def cluster(tasks: Sequence[Task], *, threshold: float, size: int) -> list[list[Task]]:
    """Clusters of 2..``size`` similar tasks (same app, same setup, TF-IDF cosine >= ``threshold``)."""
    groups: dict[tuple[str, str], list[Task]] = {}
    for task in sorted(tasks, key=lambda t: t.id):
        if composable(task):
            groups.setdefault((task.domain, setup_key(task)), []).append(task)
    clusters: list[list[Task]] = []
    for members in groups.values():
        vectors = tfidf_vectors([t.instruction for t in members])
        free = list(range(len(members)))
        while free:
            seed = free.pop(0)
            ranked = sorted(free, key=lambda j: -cosine(vectors[seed], vectors[j]))
            chosen = [j for j in ranked if cosine(vectors[seed], vectors[j]) >= threshold][: size - 1]
            if chosen:
                for j in chosen:
                    free.remove(j)
                clusters.append([members[seed], *(members[j] for j in chosen)])
    return clusters


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: Mapping[str, str]):
        self.names = names

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.names.get(node.name, node.name)
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.names.get(node.id, node.id)
        return node


def _defined(code: str | None) -> set[str]:
    if not code:
        return set()
    tree = ast.parse(code)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def rename_functions(code: str, names: Mapping[str, str]) -> str:
    return ast.unparse(_Renamer(names).visit(ast.parse(code)))


def _as_list(value: Any, count: int) -> list[Any]:
    if isinstance(value, list):
        return list(value)
    return [value] * count if count > 1 and value is None else [value]


def _rename_getter(config: Any, names: Mapping[str, str]) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        return {}
    config = dict(config)
    kind = str(config.get("type", ""))
    if kind in names:
        config["type"] = names[kind]
    elif f"get_{kind}" in names:  # the evaluator also resolves "x" to a generated "get_x"
        config["type"] = names[f"get_{kind}"]
    return config


def chain_evaluators(tasks: Sequence[Task]) -> Evaluator:
    """One ``and`` evaluator over every sub-task's metrics (see the module docstring)."""
    funcs: list[str] = []
    results: list[dict[str, Any]] = []
    expecteds: list[dict[str, Any]] = []
    options: list[dict[str, Any]] = []
    code_parts: list[str] = []
    postconfig: list[Any] = []
    seen_post: set[str] = set()
    for i, task in enumerate(tasks):
        ev = task.evaluator
        names = {name: f"{name}__c{i}" for name in _defined(ev.code)}
        if ev.code:
            code_parts.append(f"# objective {i + 1}: {task.id}\n" + rename_functions(ev.code, names))
        count = len(ev.funcs)
        for func, result, expected, opts in zip(ev.funcs, _as_list(ev.result, count), _as_list(ev.expected, count),
                                                _as_list(ev.options, count)):
            funcs.append(names.get(func, func))
            results.append(_rename_getter(result, names))
            expecteds.append(_rename_getter(expected, names))
            options.append(dict(opts or {}))
        for step in ev.postconfig:
            key = json.dumps(step.model_dump(mode="json"), sort_keys=True)
            if key not in seen_post:
                seen_post.add(key)
                postconfig.append(step)
    return Evaluator(func=funcs, result=results, expected=expecteds, options=options, conj="and",
                     postconfig=postconfig, code="\n\n\n".join(code_parts) or None)


def asset_dir(task: Task) -> str | None:
    """Where ``task``'s relative asset paths resolve (the environments' ``metadata.task_dir`` convention)."""
    if task.metadata.get("task_dir"):
        return str(task.metadata["task_dir"])
    return str(Path(task.source_dir).resolve()) if task.source_dir else None


def compose_task(tasks: Sequence[Task], *, task_id: str, instruction: str, explanation: str, difficulty: str,
                 estimated_steps: int) -> Task:
    """The harder task: the shared setup, a combined instruction, the chained judges."""
    first = tasks[0]
    apps = list(dict.fromkeys(app for t in tasks for app in (t.related_apps or [t.domain])))
    metadata = {"augmentation": "compose", "app": first.domain, "parents": [t.id for t in tasks], "repairs": 0,
                "explanation": explanation, "difficulty": difficulty, "estimated_steps": estimated_steps}
    task = Task(id=task_id, instruction=instruction, snapshot=first.snapshot or first.domain, source="verigen-compose",
                config=list(first.config), related_apps=apps, evaluator=chain_evaluators(tasks), metadata=metadata,
                new_id=f"{task_id}_compose")
    if asset_dir(first):
        task.metadata["task_dir"] = asset_dir(first)  # relative asset paths resolve as for the parents
    task.metadata["getters"] = sorted({str(c.get("type")) for c in (task.evaluator.result or []) if c})
    task.metadata["metrics"] = list(task.evaluator.funcs)
    return task
