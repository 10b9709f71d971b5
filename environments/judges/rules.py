"""OSWorld's value rules: ``{"method": "eq" | "re" | "approx:0.01" | ..., "ref": ...}``.

Used by ``check_json``, ``check_cell`` and friends so a task written for
OSWorld keeps its meaning here.
"""

from __future__ import annotations

import operator
import re
from typing import Any, Mapping

_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}


def match_value(value: Any, rule: Mapping[str, Any]) -> bool:
    """Whether ``value`` satisfies ``rule``; unknown methods are an error naming the choices."""
    method = str(rule.get("method", "eq"))
    ref = rule.get("ref")
    if method in _COMPARE:
        if method in ("eq", "ne"):
            equal = isinstance(value, bool) == isinstance(ref, bool) and _normalize(value) == _normalize(ref)
            return equal if method == "eq" else not equal
        try:
            return bool(_COMPARE[method](value, ref))
        except TypeError:
            return False
    if method in ("re", "regex") or method.startswith("re."):
        return value is not None and re.search(str(ref), str(value), _regex_flags(method)) is not None
    if method == "fullmatch":
        return value is not None and re.fullmatch(str(ref), str(value)) is not None
    if method.startswith("approx"):
        tolerance = float(method.partition(":")[2] or 1e-6)
        try:
            return abs(float(value) - float(ref)) <= tolerance
        except (TypeError, ValueError):
            return False
    if method.startswith("range.") and len(method) == 8:
        # "range.te": left bound is <= (e) or < (t), likewise right; OSWorld's encoding.
        left = operator.le if method[6] == "e" else operator.lt
        right = operator.le if method[7] == "e" else operator.lt
        try:
            return bool(left(ref[0], value) and right(value, ref[1]))
        except TypeError:
            return False
    if method in ("str_list_eq", "str_set_eq"):
        items = str(value).strip("\"'").split(",")
        return (list(items) == list(ref)) if method == "str_list_eq" else (set(items) == set(ref))
    if method == "in":
        return value in ref
    if method == "contains":
        return value is not None and ref in value
    if method == "ieq":
        return str(value).strip().lower() == str(ref).strip().lower()
    raise ValueError(
        f"unknown value rule method {method!r}; use one of eq, ne, lt, le, gt, ge, re (re.S, re.I, ...), fullmatch, "
        f"approx[:tol], range.XY, str_list_eq, str_set_eq, in, contains, ieq"
    )


def _regex_flags(method: str) -> re.RegexFlag:
    """``re.S.I`` -> ``re.S | re.I`` (OSWorld's spelling of regex flags)."""
    flags = re.RegexFlag(0)
    for name in method.split(".")[1:]:
        flag = getattr(re, name, None) if name.isupper() else None
        if not isinstance(flag, re.RegexFlag):
            raise ValueError(f"value rule method {method!r}: {name!r} is not a regex flag (e.g. re.S, re.I, re.M)")
        flags |= flag
    return flags


def _normalize(value: Any) -> Any:
    """Numbers compare by value whatever their type (3 == 3.0 == True is avoided for bools)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value
