"""Metrics of ScienceBoard's evaluate items: ``metric(result, expected=None, **options) -> float``.

Each mirrors the upstream check named in its docstring (``sci/<App>/task.py``
in OS-Copilot/ScienceBoard). A result of ``None`` means the application could
not be asked (not running); that scores 0, as upstream's ``error_factory(False)``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Sequence

import structlog

from environments.scienceboard.lambdas import compile_lambda, is_lambda

log = structlog.get_logger(__name__)

#: upstream KAlgebra ``is_near``
VALUE_TOLERANCE = 1e-6


def scienceboard_stop(result: Any, expected: Any = None, *, value: str, args: Sequence[str] | None = None,
                      **_: Any) -> float:
    """``stop``: the episode ended with ``value`` (DONE, FAIL, or ANS whose text split on spaces equals ``args``)."""
    if not isinstance(result, Mapping):
        return 0.0
    kind = str(result.get("type", "")).lower()
    if value == "DONE":
        return float(kind == "done")
    if value == "FAIL":
        return float(kind == "fail")
    if value == "ANS":
        return float(kind == "answer" and str(result.get("text") or "").split() == list(args or []))
    raise ValueError(f"scienceboard_stop: value must be DONE, FAIL or ANS, got {value!r}")


def scienceboard_regex(result: Any, rules: Any = None, **_: Any) -> float:
    """``include`` (TeXstudio): ``re.search(pattern, file text)`` finds something."""
    if result is None or not isinstance(rules, Mapping) or "pattern" not in rules:
        return 0.0
    return float(re.search(str(rules["pattern"]), str(result)) is not None)


def scienceboard_passed(result: Any, expected: Any = None, **_: Any) -> float:
    """``compile`` / Lean ``placeholder``: the checker answered ``{"pass": true}``."""
    return float(isinstance(result, Mapping) and result.get("pass") is True)


def kalgebra_val(result: Any, expected: Any = None, *, key: str, value: Any, **_: Any) -> float:
    """``val``: variable ``key`` is numerically within 1e-6 of ``value``."""
    if not isinstance(result, Mapping):
        return 0.0
    number = (result.get("numbers") or {}).get(key)
    try:
        return float(number is not None and abs(float(number) - float(value)) <= VALUE_TOLERANCE)
    except (TypeError, ValueError):
        return 0.0


def kalgebra_var(result: Any, expected: Any = None, *, key: str, value: Any, **_: Any) -> float:
    """``var``: variable ``key`` is shown as ``value`` (``#UNDEF``: it is not defined)."""
    if not isinstance(result, Mapping):
        return 0.0
    variables = result.get("variables") or {}
    if value == "#UNDEF":
        return float(key not in variables)
    return float(key in variables and variables[key] == str(value))


def kalgebra_eqn(result: Any, expected: Any = None, *, value: Mapping[str, bool] | None = None,
                 size: int | None = None, **_: Any) -> float:
    """``eqn``: some plotted 2D function passes through exactly the points marked true (``#SIZE``: the count)."""
    if not isinstance(result, list):
        return 0.0
    if size is not None:
        return float(len(result) == size)
    wanted = dict(value or {})
    return float(any(all(fn.get("points", {}).get(k) == v for k, v in wanted.items()) for fn in result))


def scienceboard_predicate(result: Any, expected: Any = None, *, key: str, value: Any, pred: str | None = None,
                           field: str | None = None, **_: Any) -> float:
    """``db`` / ``info`` (GrassGIS): ``pred(key(obj), value)``; ``key`` and ``pred`` are lambda strings, ``key``
    may also be a plain key of ``obj``; ``pred`` defaults to equality. ``field`` picks ``obj`` out of the result."""
    if result is None:
        return 0.0
    obj = result.get(field) if field and isinstance(result, Mapping) else result
    getter = compile_lambda(key) if is_lambda(key) else (lambda info: info[key])
    compare = compile_lambda(pred) if pred else (lambda left, right: left == right)
    try:
        outcome = compare(getter(obj), value)
    except Exception as exc:  # upstream: error_factory(False): the state lacks what the item looks for
        log.info("scienceboard predicate raised; scoring 0", key=key, error=f"{type(exc).__name__}: {exc}")
        return 0.0
    if isinstance(outcome, float) and math.isnan(outcome):
        return 0.0
    return float(bool(outcome))


def chimerax_info(result: Any, expected: Any = None, *, value: Sequence[str], **_: Any) -> float:
    """``info`` (ChimeraX): the lines ``info <key>`` logged are, as a set, exactly ``value``."""
    if not isinstance(result, list):
        return 0.0
    return float(set(result) == set(value))


def chimerax_states(result: Any, expected: Any = None, *, key: str, value: Any = None, absent: bool = False,
                    pattern: str | None = None, find: str | None = None, **_: Any) -> float:
    """``states`` (ChimeraX) over the SessionStates dump ``{dotted path: repr}``, as upstream's ``_eval_states``:

    * the entry: ``key`` itself; or the first path ``key`` (a ``lambda path: bool``) accepts; or, with ``find``
      (a ``lambda path, value: bool``), ``key`` (a ``lambda path: path``) applied to the first path ``find``
      accepts;
    * ``absent`` (upstream: ``value`` given as null): no such entry exists (with ``find``, upstream fails: 0);
    * else ``pattern`` searched in the entry (JSON text when not a string), or the entry equal to ``value``.
    A missing entry scores 0 (upstream's ``error_factory(False)``).
    """
    if not isinstance(result, Mapping):
        return 0.0
    try:
        if find is not None:
            if absent:
                return 0.0
            accepts = compile_lambda(find)
            matches = [path for path, entry in result.items() if accepts(path, entry)]
            path = compile_lambda(key)(matches[0])
        elif is_lambda(key):
            paths = [path for path in result if compile_lambda(key)(path)]
            if absent:
                return float(not paths)
            path = paths[0]
        else:
            if absent:
                return float(key not in result)
            path = key
        entry = result[path]
    except Exception as exc:  # noqa: BLE001 (upstream: any failure of the lookup scores False)
        log.info("chimerax state entry not found; scoring 0", key=key, error=f"{type(exc).__name__}: {exc}")
        return 0.0
    if pattern is not None:
        return float(re.search(pattern, entry if isinstance(entry, str) else json.dumps(entry)) is not None)
    return float(value is not None and entry == value)


def scienceboard_contains(result: Any, expected: Any = None, *, value: str, **_: Any) -> float:
    """``file`` (ChimeraX): the file's text contains ``value``; a ``lambda: ...`` value is called when judged
    (upstream writes today's date as ``lambda: __import__('datetime').datetime.today().strftime(...)``)."""
    if result is None:
        return 0.0
    needle = compile_lambda(value)() if is_lambda(value) else value
    return float(str(needle) in str(result))
