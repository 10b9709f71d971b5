"""ScienceBoard task JSON -> :class:`core.types.Task`.

A ScienceBoard task (``tasks/VM/<App>/<name>.json`` upstream) is::

    {"type": "KAlgebra", "sort": "VM", "steps": 5, "instruction": "...", "version": "0.1",
     "initialize": [{"func": "launch", "command": "...", "wait": 2.5}, ...],
     "evaluate": [{"type": "var", "key": "p", "value": "1+-i"}, ...],
     "ans": "p := conjugate(1+i)"}

``evaluate`` is a conjunction. Each item becomes one metric of an OSWorld
evaluator (``conj: and``) over registered getters, so the judges' machinery
(registries, statuses, details) applies unchanged:

=================  ===================================  ==========================
item ``type``      getter                               metric
=================  ===================================  ==========================
``stop``           ``scienceboard_last_action``         ``scienceboard_stop``
``file``           ``vm_file_text`` (+ ``rule``)        ``exact_match``
``include``        ``vm_file_text``                     ``scienceboard_regex``
``compile``        ``scienceboard_tex_check``           ``scienceboard_passed``
``val``/``var``    ``kalgebra_variables``               ``kalgebra_val``/``_var``
``eqn``            ``kalgebra_functions`` (2D), ``_3d``  ``kalgebra_eqn``
``db``             ``grass_command``                    ``scienceboard_predicate``
``info`` (GRASS)   ``grass_gui_dump``                   ``scienceboard_predicate``
``info`` (Cel.)    ``celestia_dump``                    ``scienceboard_predicate``
``info`` (ChX)     ``chimerax_info``                    ``chimerax_info``
``states`` (ChX)   ``chimerax_states``                  ``chimerax_states``
``file`` (ChX)     ``vm_file_text``                     ``scienceboard_contains``
``placeholder``    ``scienceboard_lean_check``          ``scienceboard_passed``
=================  ===================================  ==========================

Getters of ``environments.scienceboard.apps`` ask the applications' own servers; where only an instrumented
build of ScienceBoard's VM image has one (Celestia, KAlgebra 3D, the GRASS GUI), the task converts and its
judge says at run time which build it needs.

The original JSON stays in ``metadata["scienceboard"]`` (the backend runs its
``initialize`` list); ``config`` is empty. Two keys beyond upstream's are
read: ``id`` (else one is derived from the content) and ``oracle`` (a list of
our actions, for ``core.envcheck``). Upstream's home ``/home/user`` maps to
the desktop user's home, and ``«PORTLIKE»`` to the application port.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.types import Evaluator, Task

PORT_PLACEHOLDER = "«PORTLIKE»"
#: the home directory of ScienceBoard's VM image
UPSTREAM_HOME = "/home/user"
STOP_VALUES = ("DONE", "FAIL", "ANS")
class ScienceBoardTask(BaseModel):
    """The fields ScienceBoard's ``Task.__check_config`` asserts, plus our ``id`` and ``oracle``."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(min_length=1, description="the application: KAlgebra, TeXstudio, GrassGIS, Lean, ...")
    sort: Literal["VM", "Raw"] = "VM"
    steps: int = Field(ge=1, description="the step budget of an episode")
    instruction: str = Field(min_length=1)
    version: str = "0.1"
    snapshot: str | None = None
    initialize: list[dict[str, Any]] = Field(default_factory=list)
    evaluate: list[dict[str, Any]] = Field(min_length=1)
    ans: str | None = None
    id: str | None = None
    oracle: list[dict[str, Any]] | None = None

    @field_validator("initialize")
    @classmethod
    def _funcs(cls, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, item in enumerate(items):
            if not isinstance(item.get("func"), str) or not item["func"]:
                raise ValueError(f"initialize[{index}] needs a 'func' name, got {item!r:.120}")
        return items

    @field_validator("evaluate")
    @classmethod
    def _types(cls, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, item in enumerate(items):
            if not isinstance(item.get("type"), str) or not item["type"]:
                raise ValueError(f"evaluate[{index}] needs a 'type', got {item!r:.120}")
        return items


def is_scienceboard(raw: Mapping[str, Any]) -> bool:
    """ScienceBoard JSON (``initialize``/``evaluate`` lists) rather than OSWorld's (``config``/``evaluator``)."""
    return "evaluate" in raw and "evaluator" not in raw


def derived_id(task: ScienceBoardTask) -> str:
    """A stable id for upstream files, which carry none: ``<type>-<hash of instruction and evaluate>``."""
    digest = hashlib.sha1(json.dumps([task.instruction, task.evaluate], sort_keys=True).encode()).hexdigest()
    return f"{task.type.lower()}-{digest[:10]}"


def _map_strings(value: Any, mapping: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return mapping(value)
    if isinstance(value, list):
        return [_map_strings(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, mapping) for k, v in value.items()}
    return value


def localize(task: ScienceBoardTask, *, port: int, upstream_home: str = UPSTREAM_HOME) -> ScienceBoardTask:
    """Replace ``«PORTLIKE»`` and upstream's home: ``{HOME}`` in ``initialize`` (setup placeholders), ``~`` in
    ``evaluate`` (the probe expands it)."""

    def home_to(replacement: str) -> Callable[[str], str]:
        def mapping(text: str) -> str:
            text = text.replace(PORT_PLACEHOLDER, str(port))
            return text.replace(upstream_home, replacement) if upstream_home else text

        return mapping

    return task.model_copy(update={
        "initialize": _map_strings(task.initialize, home_to("{HOME}")),
        "evaluate": _map_strings(task.evaluate, home_to("~")),
    })


class UnsupportedItem(ValueError):
    """An evaluate item this offline port cannot judge; the message says what it would need."""


def _touched_text(task: ScienceBoardTask, path: str) -> str:
    """The text an ``initialize`` ``touch`` wrote to ``path`` (ScienceBoard's ``reverse_touch``)."""
    for item in task.initialize:  # localized: initialize paths say {HOME}/, evaluate paths ~/
        if item.get("func") == "touch" and str(item.get("path")).replace("{HOME}", "~") == path:
            return str(item.get("text", ""))
    raise UnsupportedItem(f"evaluate 'file' on {path!r} needs an initialize 'touch' of the same path (its original text)")


def _stop(task: ScienceBoardTask, item: Mapping[str, Any]) -> tuple[str, Any, Any, dict[str, Any]]:
    value = item.get("value")
    if value not in STOP_VALUES:
        raise UnsupportedItem(f"stop value must be one of {', '.join(STOP_VALUES)}, got {value!r}")
    options: dict[str, Any] = {"value": value}
    if value == "ANS":
        args = item.get("args")
        if args is None and task.ans and task.ans.startswith("ANS "):
            args = task.ans[len("ANS "):].split()  # the reference answer, when the item does not list it
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise UnsupportedItem("stop ANS needs 'args' (the expected answer split on spaces) or ans 'ANS <answer>'")
        options["args"] = args
    return "scienceboard_stop", {"type": "scienceboard_last_action"}, None, options


def _predicate_options(item: Mapping[str, Any]) -> dict[str, Any]:
    if "key" not in item or "value" not in item:
        raise UnsupportedItem(f"{item['type']} needs 'key' and 'value'")
    options = {"key": item["key"], "value": item["value"]}
    if "pred" in item:
        options["pred"] = item["pred"]
    return options


def _item(task: ScienceBoardTask, item: Mapping[str, Any], port: int) -> tuple[str, Any, Any, dict[str, Any]]:
    """(metric, result getter, expected getter, options) for one evaluate item."""
    kind = item["type"]
    if kind == "stop":
        return _stop(task, item)
    if task.type == "ChimeraX" and kind in ("info", "states", "file"):
        return _chimerax(item, port)
    if task.type == "Celestia" and kind == "info":
        query = (task.model_extra or {}).get("query", [])
        if not isinstance(query, list) or not all(isinstance(q, dict) and "name" in q and "type" in q for q in query):
            raise UnsupportedItem("a Celestia task's 'query' must be a list of {name, type} (the bodies to report)")
        return "scienceboard_predicate", {"type": "celestia_dump", "port": port, "query": query}, None, \
            _predicate_options(item)
    if kind == "file":
        if "path" not in item:
            raise UnsupportedItem("file needs 'path' (the file whose text is compared)")
        text = _touched_text(task, str(item.get("path")))
        if "source" in item and "target" in item:
            text = text.replace(str(item["source"]), str(item["target"]))
        return "exact_match", {"type": "vm_file_text", "path": item["path"]}, \
            {"type": "rule", "rules": {"expected": text}}, {}
    if kind == "include":
        if "pattern" not in item or "path" not in item:
            raise UnsupportedItem("include needs 'path' and 'pattern'")
        return "scienceboard_regex", {"type": "vm_file_text", "path": item["path"]}, \
            {"type": "rule", "rules": {"pattern": item["pattern"]}}, {}
    if kind == "compile":
        if "path" not in item or "file" not in item:
            raise UnsupportedItem("compile needs 'path' (the directory) and 'file' (the name without .tex)")
        bibtex = any(i.get("func") == "touch" and str(i.get("path", "")).endswith(".bib") for i in task.initialize)
        return "scienceboard_passed", {"type": "scienceboard_tex_check", "path": item["path"], "file": item["file"],
                                       "bibtex": bibtex}, None, {}
    if kind in ("val", "var"):
        if "key" not in item or "value" not in item:
            raise UnsupportedItem(f"{kind} needs 'key' (a variable name) and 'value'")
        getter = {"type": "kalgebra_variables", "numeric": [item["key"]] if kind == "val" else []}
        return f"kalgebra_{kind}", getter, None, {"key": item["key"], "value": item["value"]}
    if kind == "eqn":
        key, value = item.get("key"), item.get("value")
        if key == "#SIZE":
            return "kalgebra_eqn", {"type": "kalgebra_functions", "points": []}, None, {"size": value}
        if not isinstance(key, list) or not key or any(not isinstance(p, list) or len(p) not in (2, 3) for p in key) \
                or len({len(p) for p in key}) != 1:
            raise UnsupportedItem("eqn needs 'key': a list of [x, y] (2D) or [x, y, z] (3D) points, or '#SIZE'")
        if not isinstance(value, dict):
            raise UnsupportedItem("eqn needs 'value': {\"(x, y)\": true/false, ...}")
        getter = {"type": "kalgebra_functions", "points": key} if len(key[0]) == 2 else \
            {"type": "kalgebra_functions_3d", "port": port, "points": key}
        return "kalgebra_eqn", getter, None, {"value": value}
    if kind == "db":
        if "cmd" not in item:
            raise UnsupportedItem("db needs 'cmd' (a GRASS module) and 'kwargs'")
        getter = {"type": "grass_command", "cmd": item["cmd"], "kwargs": item.get("kwargs", {})}
        return "scienceboard_predicate", getter, None, {**_predicate_options(item), "field": "stdout"}
    if kind == "info" and task.type == "GrassGIS":
        return "scienceboard_predicate", {"type": "grass_gui_dump", "port": port}, None, _predicate_options(item)
    if kind == "placeholder" and task.type == "Lean":
        return "scienceboard_passed", {"type": "scienceboard_lean_check", "header": lean_query(task)}, None, {}
    raise UnsupportedItem(f"evaluate type {kind!r} of a {task.type} task is not supported; supported: stop, file, "
                          "include, compile (TeXstudio), val, var, eqn (KAlgebra), db, info (GrassGIS), "
                          "placeholder (Lean), info (Celestia), info, states, file (ChimeraX)")


def _chimerax(item: Mapping[str, Any], port: int) -> tuple[str, Any, Any, dict[str, Any]]:
    """ChimeraX's ``info`` (stock REST server), ``states`` (the SessionStates bundle) and ``file`` items."""
    kind, key = item["type"], item.get("key")
    if not isinstance(key, str) or not key:
        raise UnsupportedItem(f"{kind} needs 'key' (a string)")
    if kind == "info":
        value = item.get("value")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UnsupportedItem("info needs 'value': the list of lines 'info <key>' logs")
        return "chimerax_info", {"type": "chimerax_info", "port": port, "key": key}, None, {"value": value}
    if kind == "file":
        if not isinstance(item.get("value"), str):
            raise UnsupportedItem("file needs 'value': the text the file at 'key' contains (or a 'lambda: ...')")
        return "scienceboard_contains", {"type": "vm_file_text", "path": key}, None, {"value": item["value"]}
    options: dict[str, Any] = {"key": key}
    if "value" in item:
        options.update(value=item["value"], absent=item["value"] is None)
    elif isinstance(item.get("pattern"), str):
        options["pattern"] = item["pattern"]
    else:
        raise UnsupportedItem("states needs 'value' (null: the entry must not exist) or 'pattern'")
    if "find" in item:
        options["find"] = item["find"]
    return "chimerax_states", {"type": "chimerax_states", "port": port}, None, options


def lean_query(task: ScienceBoardTask) -> str:
    """The theorem statement of a Lean task (its ``query`` initialize item): the line /lean/check looks for."""
    for item in task.initialize:
        if item.get("func") == "query":
            return str(item.get("expr", ""))
    raise UnsupportedItem("a Lean task needs an initialize 'query' item (the theorem to prove)")


def convert_task(raw: Mapping[str, Any], *, port: int = 8000, upstream_home: str = UPSTREAM_HOME) -> Task:
    """Turn ScienceBoard JSON into a :class:`Task`; raises ``ValueError`` naming what is wrong."""
    try:
        source = ScienceBoardTask.model_validate(raw)
    except ValidationError as exc:  # one line naming every field: the task loader shows the first line
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"not a ScienceBoard task: {problems}") from None
    task = localize(source, port=port, upstream_home=upstream_home)
    task_id = task.id or derived_id(task)
    funcs, results, expecteds, options = [], [], [], []
    has_expected = False
    for index, item in enumerate(task.evaluate):
        try:
            func, result, expected, opts = _item(task, item, port)
        except UnsupportedItem as exc:
            raise ValueError(f"ScienceBoard task {task_id}: evaluate[{index}] ({item.get('type')}): {exc}") from None
        funcs.append(func)
        results.append(result)
        expecteds.append(expected or {})  # {}: no expected getter for this metric
        options.append(opts)
        has_expected = has_expected or expected is not None
    evaluator = Evaluator(
        func=funcs, result=results, expected=expecteds if has_expected else None, options=options, conj="and",
    )
    metadata: dict[str, Any] = {
        "domain": task.type, "max_steps": task.steps, "scienceboard": task.model_dump(exclude={"oracle", "id"}),
    }
    if task.oracle is not None:
        metadata["oracle"] = task.oracle
    if task.ans is not None:
        metadata["reference_answer"] = task.ans
    return Task(id=task_id, instruction=task.instruction, snapshot=task.snapshot or task.type,
                related_apps=[task.type], evaluator=evaluator, metadata=metadata)
