"""General OSWorld metrics: strings, rules, text files, JSON.

Every metric is ``metric(result, expected=None, **options) -> float`` in [0, 1]
and is pure: it reads only its arguments (and the local files they name).
Names and argument shapes follow OSWorld's ``desktop_env.evaluators.metrics``
so task JSON written for OSWorld scores the same here: ``expected`` is often
the dict a ``rule`` getter returns (``{"expected": ...}`` or
``{"include": [...], "exclude": [...]}``). Where an upstream function raises instead of
scoring (``check_direct_json_object`` on text that is not JSON, such as a broken script's
output), the metric here scores 0; so do ``check_include_exclude`` on a result that holds nothing,
``check_list``/``compare_text_file`` on a missing file or one that is not UTF-8, and ``compare_csv`` with a
missing gold in a list (upstream raises on each; the suite's tasks never give them).
"""

from __future__ import annotations

import csv
import difflib
import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import structlog

from environments.judges.rules import match_value

log = structlog.get_logger(__name__)


def _expected_value(rules: Any) -> Any:
    """OSWorld passes ``{"expected": x}``; accept a bare ``x`` too."""
    if isinstance(rules, Mapping) and "expected" in rules:
        return rules["expected"]
    return rules


def _read_text(path: str | Path | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------------------
# Strings and values
# ---------------------------------------------------------------------------


def exact_match(result: Any, rules: Any = None, **_: Any) -> float:
    """1 when ``result`` equals ``rules["expected"]`` (a None answer to an expected None too, as upstream's;
    no rules at all, where upstream raises, scores 0)."""
    if rules is None:
        return 0.0
    return float(result == _expected_value(rules))


def literal_match(result: Any, expected: Any = None, *, type: str = "str", ignore_case: bool = False, **_: Any) -> float:
    """String (or list of strings) equality, optionally case-insensitive."""
    def norm(value: Any) -> str:
        text = str(value)
        return text.lower() if ignore_case else text

    if type == "str":
        return float(result is not None and norm(result) == norm(expected))
    if type == "list":
        if not isinstance(result, (list, tuple)) or not isinstance(expected, (list, tuple)):
            return 0.0
        return float([norm(r) for r in result] == [norm(e) for e in expected])
    raise ValueError(f"literal_match: type must be 'str' or 'list', got {type!r}")


def match_in_list(result: Any, rules: Any = None, **_: Any) -> float:
    """1 when ``result`` is one of ``rules["expected"]`` (a list of acceptable answers)."""
    return float(result is not None and result in _expected_value(rules))


def is_in_list(result: Any, rules: Any = None, **_: Any) -> float:
    """1 when ``rules["expected"]`` is an element of ``result`` (a list or string)."""
    return float(result is not None and _expected_value(rules) in result)


def check_include_exclude(result: Any, rules: Any = None, **_: Any) -> float:
    """1 when every ``include`` string is ``in`` ``result`` (a substring of a string, a member of a list) and no
    ``exclude`` string is; a result that holds nothing (a number) scores 0 (upstream raises)."""
    if result is None:
        return 0.0
    rules = rules or {}
    include: Sequence[str] = rules.get("include", [])
    exclude: Sequence[str] = rules.get("exclude", [])
    try:
        return float(all(s in result for s in include) and all(s not in result for s in exclude))
    except TypeError:
        return 0.0


def fuzzy_match(result: Any, rules: Any = None, **_: Any) -> float:
    """Similarity ratio in [0, 1] between ``result`` and ``rules["expected"]`` (Levenshtein-like)."""
    if result is None:
        return 0.0
    expected = str(_expected_value(rules))
    return difflib.SequenceMatcher(a=str(result), b=expected, autojunk=False).ratio()


def fuzzy_match_threshold(result: Any, rules: Any = None, *, threshold: float = 0.9, **_: Any) -> float:
    """1 when :func:`fuzzy_match` reaches ``threshold`` (a binary variant for RL rewards)."""
    return float(fuzzy_match(result, rules) >= threshold)


def check_value(result: Any, rules: Any = None, **_: Any) -> float:
    """1 when ``result`` satisfies the OSWorld value rule ``{"method", "ref"}`` (or every rule of a list)."""
    if result is None or rules is None:
        return 0.0
    rule_list = rules if isinstance(rules, list) else [rules]
    return float(all(match_value(result, r) for r in rule_list))


def infeasible(result: Any = None, expected: Any = None, **_: Any) -> float:
    """Marker metric: the evaluation scores infeasible tasks by the last action (FAIL) itself."""
    return 0.0


# ---------------------------------------------------------------------------
# Text files (``result``/``expected`` are local paths, as vm_file returns)
# ---------------------------------------------------------------------------


def _read_strict(path: str | Path) -> str | None:
    """A text file as upstream opens it (UTF-8, universal newlines); None when missing or not UTF-8 (upstream
    raises there), so two files that differ only in undecodable bytes never compare equal."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        log.info("text file unreadable", path=str(path), error=str(exc))
        return None


def _normalize_text(text: str, *, ignore_blanks: bool, ignore_case: bool) -> str:
    if ignore_blanks:
        text = re.sub(r"\s+", " ", text.strip())  # upstream turns tabs and newlines into spaces first: the same
    if ignore_case:
        text = text.lower()
    return text


def compare_text_file(
    result: str | None, expected: str | None = None, *, ignore_blanks: bool = False, ignore_case: bool = False, **_: Any
) -> float:
    """1 when the two text files have the same content (optionally ignoring blanks/case)."""
    if not result or not expected:
        return 0.0
    actual, gold = _read_strict(result), _read_strict(expected)
    if actual is None or gold is None:
        return 0.0
    return float(
        _normalize_text(actual, ignore_blanks=ignore_blanks, ignore_case=ignore_case)
        == _normalize_text(gold, ignore_blanks=ignore_blanks, ignore_case=ignore_case)
    )


def diff_text_file(result: str | None, expected: str | None = None, **_: Any) -> float:
    """Line-level similarity ratio of two text files."""
    actual, gold = _read_text(result), _read_text(expected)
    if actual is None or gold is None:
        return 0.0
    return difflib.SequenceMatcher(a=actual.splitlines(), b=gold.splitlines(), autojunk=False).ratio()


def check_text_file(result: str | None, rules: Any = None, **_: Any) -> float:
    """:func:`check_include_exclude` over a text file's content."""
    return check_include_exclude(_read_text(result), rules)


def check_list(result: str | None, rules: Any = None, **_: Any) -> float:
    """Every ``expect`` regex matches some line of the file and no ``unexpect`` regex matches any line. As upstream
    reads the file, only a newline (``\\n``, ``\\r\\n``, ``\\r``) ends a line and each line keeps its ``\\n``
    (``\\s$`` can match it)."""
    if not result:
        return 0.0
    rules = rules or {}
    expect = [re.compile(p) for p in rules.get("expect", [])]
    unexpect = [re.compile(p) for p in rules.get("unexpect", [])]
    text = _read_strict(result)
    if text is None:
        return 0.0
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)  # upstream iterates the file: each line keeps its "\n"
    found = all(any(p.search(line) for line in lines) for p in expect)
    clean = not any(p.search(line) for p in unexpect for line in lines)
    return float(found and clean)


def check_csv(result: str | None, rules: Any = None, **_: Any) -> float:
    """Every ``expect`` record ``{column: value}`` occurs in the CSV and no ``unexpect`` record does."""
    text = _read_text(result)
    if text is None:
        return 0.0
    rules = rules or {}
    records = list(csv.DictReader(text.splitlines()))

    def matches(rule: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
        return all(str(record.get(k, "")).strip() == str(v).strip() for k, v in rule.items())

    expect_ok = all(any(matches(r, rec) for rec in records) for r in rules.get("expect", []))
    unexpect_ok = not any(matches(r, rec) for r in rules.get("unexpect", []) for rec in records)
    return float(expect_ok and unexpect_ok)


def _csv_lines(path: str) -> list[str] | None:
    """Upstream's reading: UTF-8, else Latin-1 (which decodes any bytes), then ``splitlines``."""
    try:
        data = Path(path).read_bytes()
    except (OSError, TypeError):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n").splitlines()


def compare_csv(
    result: str | None, expected: str | Sequence[str] | None = None, *, strict: bool = True,
    ignore_case: bool = False, **_: Any
) -> float:
    """Line-by-line CSV comparison (``strict=False`` strips each line); ``expected`` may be a list of gold files
    (a ``multi`` getter's answer): 1 when any of them matches."""
    if not result:
        return 0.0
    actual = _csv_lines(result)
    if actual is None:
        return 0.0

    def normal(lines: list[str]) -> list[str]:
        lines = [line.strip() for line in lines] if not strict else lines
        return [line.lower() for line in lines] if ignore_case else lines

    golds = [expected] if isinstance(expected, (str, Path)) else list(expected or [])
    for gold_path in golds:
        gold = _csv_lines(gold_path) if gold_path else None
        if gold is not None and normal(actual) == normal(gold):
            return 1.0
    return 0.0


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------


def _load_structured(path: str | None, is_yaml: bool) -> Any:
    text = _read_text(path)
    if text is None:
        return None
    try:
        if is_yaml:
            import yaml

            return yaml.safe_load(text)
        return json.loads(text)
    except Exception as exc:  # a malformed file is a wrong answer, not a judge crash
        log.info("structured file does not parse", path=path, error=str(exc))
        return None


def _lookup(data: Any, keys: Sequence[Any]) -> tuple[bool, Any]:
    value = data
    for key in keys:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return False, None
    return True, value


def check_json(result: str | None, rules: Any = None, *, is_yaml: bool = False, **_: Any) -> float:
    """OSWorld's ``check_json``: ``expect``/``unexpect`` lists of ``{key: [path...], method, ref}`` on a JSON file."""
    data = _load_structured(result, is_yaml)
    if data is None:
        return 0.0
    rules = rules or {}
    for rule in rules.get("expect", []):
        found, value = _lookup(data, rule["key"])
        if not found or not match_value(value, rule):
            return 0.0
    for rule in rules.get("unexpect", []):
        found, value = _lookup(data, rule["key"])
        if found and match_value(value, rule):
            return 0.0
    return 1.0


#: the value upstream's getters put in ``expected`` when they could not compute it (the task then scores 0)
EVALUATION_FAILED = "__EVALUATION_FAILED__"


def check_direct_json_object(result: Any, rules: Any = None, **_: Any) -> float:
    """OSWorld's ``check_direct_json_object``: a JSON object (or its text) against ``rules["expected"]``, key by key.

    A string result is stripped and every ``'`` becomes ``"`` (so a printed Python dict parses) before it is
    parsed. Without ``expect_in_result`` each expected value must equal the result's (``==``; a missing key reads
    as None); an ``ignore_list_order`` entry *inside* ``expected`` sorts both sides of every key first (one at the
    level of ``rules`` is ignored, as upstream ignores it). With ``expect_in_result`` an expected string must be
    ``in`` the result's value (a substring, a list member or a key) and an expected list is a set of alternatives:
    one must be a member of the result's list or equal to its string; any other expected type scores 0. An
    expected value :data:`EVALUATION_FAILED` scores 0. Upstream raises on a string that does not parse; it scores
    0 here.
    """
    if isinstance(result, str):
        try:
            result = json.loads(result.strip().replace("'", '"'))
        except ValueError as exc:
            log.info("result is not JSON", error=str(exc))
            return 0.0
    if result is None or not isinstance(rules, Mapping) or not isinstance(rules.get("expected"), Mapping):
        return 0.0
    expected: Mapping[str, Any] = rules["expected"]
    if any(value == EVALUATION_FAILED for value in expected.values()):
        return 0.0
    if expected and not isinstance(result, Mapping):
        return 0.0
    if rules.get("expect_in_result", False):
        return float(all(_expected_in(want, result.get(key)) for key, want in expected.items()))
    ignore_list_order = bool(expected.get("ignore_list_order", False))
    for key, want in expected.items():
        got = result.get(key)
        if ignore_list_order:
            try:
                want, got = sorted(want), sorted(got)
            except TypeError:  # not a list of comparable values (upstream's ``sorted`` raises and scores 0)
                return 0.0
        if want != got:
            return 0.0
    return 1.0


def _expected_in(want: Any, got: Any) -> bool:
    if isinstance(want, list):
        return any((isinstance(got, list) and item in got) or (isinstance(got, str) and item == got)
                   for item in want)
    if isinstance(want, str):
        try:
            return want in got
        except TypeError:  # a number, a bool or None holds nothing (upstream's ``in`` raises and scores 0)
            return False
    return False


# ---------------------------------------------------------------------------
# Accessibility trees (the XML the accessibility_tree getter returns)
# ---------------------------------------------------------------------------

_A11Y_NAMESPACES = {
    prefix: f"https://accessibility.ubuntu.example.org/ns/{suffix}"
    for prefix, suffix in [("st", "state"), ("attr", "attributes"), ("cp", "component"), ("doc", "document"),
                           ("docattr", "document/attributes"), ("txt", "text"), ("val", "value"), ("act", "action")]
}


def check_accessibility_tree(result: str | None, rules: Any = None, **_: Any) -> float:
    """OSWorld's tree check: each rule's ``xpath`` must select a node; with ``text``, some node's text must
    equal it (``exact``, default true) or score the best similarity ratio. Scores multiply across rules."""
    if not result:
        return 0.0
    from lxml import etree

    try:
        root = etree.fromstring(result.encode("utf-8") if isinstance(result, str) else result)
    except etree.XMLSyntaxError:
        return 0.0
    total = 1.0
    for rule in rules or []:
        if "xpath" not in rule:
            raise ValueError("check_accessibility_tree: each rule needs an 'xpath' (CSS 'selectors' are not supported)")
        nodes = root.xpath(rule["xpath"], namespaces=_A11Y_NAMESPACES)
        if not nodes:
            return 0.0
        if "text" in rule:
            texts = [(node.text or "") for node in nodes]
            if rule.get("exact", True):
                total *= float(any(text == rule["text"] for text in texts))
            else:
                total *= max(difflib.SequenceMatcher(a=text, b=rule["text"]).ratio() for text in texts)
    return total
