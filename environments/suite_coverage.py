"""How much of a task suite the judges evaluate, counted by what each task uses, not by names alone.

``python -m environments.suite_coverage PATH [PATH ...] [--json]`` reads OSWorld-format task files and counts a
task *covered* when everything its judgement and setup ask for is evaluated here:

* every setup and postconfig step type has a handler (:data:`environments.setup.STEP_HANDLERS`);
* every getter type and metric is registered;
* every option a metric is given is one it reads: a named parameter of its function, or, for metrics with a rule
  language of their own, every rule and property (:data:`PARTS`: ``compare_table``'s rule types and cell
  properties, ``compare_pptx_files``'s ``examine_*`` options).

Every metric function here takes ``**kwargs``, as upstream's do, so an option no parameter names is ignored rather
than failing; such options are listed apart (``ignored``, e.g. ``compare_references``'s ``content_only``, which
upstream's function ignores too) and do not count against a task. It prints per-domain counts, the most used
missing items and the ignored options; ``--json`` prints them as one object. Exit 0.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

#: metrics whose options are a rule language: ``module:function`` returning what the options ask that is unknown
PARTS = {
    "compare_table": "environments.judges.tables:unknown_parts",
    "compare_pptx_files": "environments.judges.slides:unknown_options",
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _types(configs: Any) -> list[str]:
    return [c["type"] for c in _as_list(configs) if isinstance(c, dict) and c.get("type")]


def _function(spec: str) -> Callable[..., Any]:
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def unread_options(metric: Callable[..., Any], options: Mapping[str, Any]) -> tuple[list[str], bool]:
    """Options a metric function has no parameter for, and whether it swallows them (``**kwargs``: ignored)
    rather than failing on them."""
    try:
        parameters = list(inspect.signature(metric).parameters.values())
    except (TypeError, ValueError):
        return [], True
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return [f"option {key}" for key in options if key not in named], any(p.kind is p.VAR_KEYWORD for p in parameters)


class Coverage:
    """What the installed plugins evaluate: setup step types, getters, metrics (and their options)."""

    def __init__(self, plugins: Any) -> None:
        from environments.setup import STEP_HANDLERS

        self.steps = set(STEP_HANDLERS)
        self.getters = plugins.registry("getter")
        self.metrics = plugins.registry("metric")
        #: options the last :meth:`missing` found ignored (a ``**kwargs`` swallowed them)
        self.ignored: list[str] = []

    def missing(self, task: Mapping[str, Any]) -> list[str]:
        """Everything ``task`` (an OSWorld-format task's JSON) asks for that is not evaluated here (and, in
        :attr:`ignored`, the options its metrics are given and ignore)."""
        self.ignored = []
        evaluator = task.get("evaluator") or {}
        out = [f"setup {t}" for t in _types(task.get("config", [])) + _types(evaluator.get("postconfig", []))
               if t not in self.steps]
        out += [f"getter {t}" for key in ("result", "expected") for t in _types(evaluator.get(key))
                if t not in self.getters]
        funcs = [f for f in _as_list(evaluator.get("func")) if f]
        options = evaluator.get("options") or {}
        per_metric = options if isinstance(options, list) else [options] * len(funcs)
        for name, given in zip(funcs, per_metric):
            if name == "infeasible":
                continue
            if name not in self.metrics:
                out.append(f"metric {name}")
                continue
            given = given or {}
            if name in PARTS:
                out += [f"{name} {part}" for part in _function(PARTS[name])(given)]
            else:
                metric = getattr(self.metrics.get(name), "factory", None)
                unread, swallowed = unread_options(metric, given) if callable(metric) else ([], True)
                (self.ignored if swallowed else out).extend(f"{name} {part}" for part in unread)
        return out


def measure(paths: Iterable[Path], plugins: Any) -> dict[str, Any]:
    """Per-domain covered/total and the missing items by how many tasks need them."""
    coverage = Coverage(plugins)
    totals, covered, needs = collections.Counter(), collections.Counter(), collections.Counter()
    ignored: collections.Counter[str] = collections.Counter()
    for path in paths:
        domain = path.parent.name
        totals[domain] += 1
        missing = sorted(set(coverage.missing(json.loads(path.read_text(encoding="utf-8")))))
        needs.update(missing)
        ignored.update(set(coverage.ignored))
        covered[domain] += not missing
    return {"covered": sum(covered.values()), "tasks": sum(totals.values()),
            "domains": {d: {"covered": covered[d], "tasks": totals[d]} for d in sorted(totals)},
            "missing": dict(needs.most_common()), "ignored": dict(ignored.most_common())}


def _task_files(paths: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for given in map(Path, paths):
        if not given.exists():
            raise SystemExit(f"coverage: {given} does not exist (give task JSON files or folders of them)")
        files += sorted(given.rglob("*.json")) if given.is_dir() else [given]
    return files


def main(argv: Sequence[str] | None = None) -> int:
    from core.pluginmanager import load_plugins

    parser = argparse.ArgumentParser(prog="python -m environments.suite_coverage", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="task JSON files or folders (e.g. OSWorld's evaluation_examples/examples)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = measure(_task_files(args.paths), load_plugins())
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for domain, counts in result["domains"].items():
        print(f"{domain:<22} {counts['covered']:>4} / {counts['tasks']}")
    print(f"{'all':<22} {result['covered']:>4} / {result['tasks']} tasks: every step, getter, metric, option and rule "
          "evaluated")
    for item, count in list(result["missing"].items())[:20]:
        print(f"  missing: {item} ({count} tasks)")
    for item, count in result["ignored"].items():
        print(f"  ignored: {item} ({count} tasks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
