"""The rule validator role: static checks of a candidate, no LLM, no desktop.

It returns every problem at once (so the fixer repairs them in one round):

* the judge code, through :func:`plugins.judges.validator.validate_judge_code`
  (syntax, entry signatures, import allowlist, no dynamic code, read-only files)
  for every generated metric (``func``) and getter (``result``/``expected`` types);
* every name the evaluator uses is either defined in the code or a registered
  getter/metric; the per-metric lists have one entry per ``func``;
* every setup and postconfig step type is supported offline;
* task-level rules: a generated judge is present (Table 5 tasks carry their
  own Python judge), the instruction is not empty or overlong, no infeasible
  tasks (VeriGen writes feasible ones; ``allow_infeasible`` admits requests judged by ``infeasible`` alone,
  which need no generated judge).
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field

from core.types import Task

from plugins.synthesis.roles import Validator


def _default_imports() -> list[str]:
    from plugins.judges.validator import DEFAULT_ALLOWED_IMPORTS

    return list(DEFAULT_ALLOWED_IMPORTS)


class RuleValidatorOptions(BaseModel):
    """Rules the validator applies."""

    model_config = ConfigDict(extra="forbid")

    allowed_imports: list[str] = Field(default_factory=_default_imports,
                                       description="modules generated judges may import (as the judge executor)")
    require_generated_judge: bool = Field(True, description="the evaluator must define its getter/metric in code")
    allow_infeasible: bool = Field(False, description="accept infeasible requests (judged by the agent's fail "
                                   "action alone, OSWorld's 'infeasible'): the task families include them")
    max_instruction_chars: int = Field(1200, ge=20)


def _configs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


class RuleValidator(Validator):
    """Static rules over a candidate task and its generated judge."""

    def __init__(self, options: RuleValidatorOptions, *, getters: Any = None, metrics: Any = None, **_: Any):
        self.options = options
        self.getters = getters
        self.metrics = metrics

    def _registered(self, registry: Any, name: str) -> bool:
        return registry is not None and name in registry

    def validate(self, task: Task) -> list[str]:
        from environments.judges.evaluate import defined_functions
        from environments.setup import STEP_HANDLERS
        from plugins.judges.validator import EntryPoint, validate_judge_code

        o = self.options
        reasons: list[str] = []
        text = task.instruction.strip()
        if not text:
            reasons.append("the instruction is empty")
        elif len(text) > o.max_instruction_chars:
            reasons.append(f"the instruction has {len(text)} characters; keep it under {o.max_instruction_chars}")
        ev = task.evaluator
        infeasible = ev.funcs == ["infeasible"]
        if "infeasible" in ev.funcs and not (o.allow_infeasible and infeasible):
            reasons.append("infeasible tasks are not synthesized: write a task the agent can complete"
                           if not o.allow_infeasible else "an infeasible task is judged by 'infeasible' alone")
        for where, steps in (("config", task.config), ("evaluator.postconfig", ev.postconfig)):
            for i, step in enumerate(steps):
                if step.type not in STEP_HANDLERS:
                    reasons.append(f"{where}[{i}]: step type '{step.type}' is not supported; use one of "
                                   f"{', '.join(sorted(STEP_HANDLERS))}")
        count = len(ev.funcs)
        for name in ("result", "expected", "options"):
            value = getattr(ev, name)
            if isinstance(value, list) and len(value) != count:
                reasons.append(f"evaluator.{name} has {len(value)} entries but func names {count} metrics")
        defined = defined_functions(ev.code)
        if ev.code and not defined:
            reasons.append("evaluator.code defines no top-level function (or does not parse)")
        entries: list[EntryPoint] = []
        options = _configs(ev.options) if isinstance(ev.options, list) else [ev.options] * count
        for i, func in enumerate(ev.funcs):
            if func in defined:
                opts = options[i] if i < len(options) and isinstance(options[i], Mapping) else {}
                entries.append(EntryPoint(func, "metric", tuple(opts)))
            elif func != "infeasible" and not self._registered(self.metrics, func):
                reasons.append(f"evaluator.func '{func}' is neither defined in evaluator.code nor a known metric")
        for name in ("result", "expected"):
            for cfg in _configs(getattr(ev, name)):
                if not isinstance(cfg, Mapping) or not cfg:
                    continue
                kind = str(cfg.get("type", ""))
                if not kind:
                    reasons.append(f"evaluator.{name}: a getter config needs a 'type'")
                elif kind in defined or f"get_{kind}" in defined:
                    entries.append(EntryPoint(kind if kind in defined else f"get_{kind}", "getter"))
                elif not self._registered(self.getters, kind):
                    reasons.append(f"evaluator.{name}.type '{kind}' is neither defined in evaluator.code nor a "
                                   "known getter")
        if o.require_generated_judge and not infeasible and not (ev.code and entries):
            reasons.append("the task has no generated judge: define its getter and metric in evaluator.code and "
                           "reference them from evaluator.func and evaluator.result.type")
        if ev.code:
            report = validate_judge_code(ev.code, list(dict.fromkeys(entries)), allowed_imports=o.allowed_imports)
            reasons.extend(f"evaluator.code {r}" for r in report.reasons)
            if report.hint and not report.ok:
                reasons.append(report.hint)
        return reasons
