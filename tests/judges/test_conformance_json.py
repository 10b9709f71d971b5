"""``check_direct_json_object`` against OSWorld's own (``desktop_env.evaluators.metrics.general``).

Hypothesis builds an ``expected`` object, derives a result from it (values kept, dropped, padded with blanks,
wrapped in a list, embedded in a longer string, swapped for others) and hands it over as a dict, as JSON text or as
a printed Python dict (single quotes, which upstream swaps for double ones), with the rule options the tasks use
(``expect_in_result``, ``ignore_list_order`` inside or beside ``expected``) and malformed rules. Both must score
the same, within 1e-6, except where upstream raises on a text that is not JSON: ours scores that 0.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from environments.judges.metrics import EVALUATION_FAILED, check_direct_json_object
from tests.judges.upstream import metrics_module

#: third-party modules upstream's general module imports that check_direct_json_object never calls
STUBS = ("cv2", "easyocr", "pdfplumber", "borb", "bs4", "fitz", "imagehash", "formulas")
KEYS = ("name", "city", "count", "tags", "ignore_list_order")


def assert_same_score(result: Any, rules: Any) -> None:
    upstream = metrics_module("general", STUBS).check_direct_json_object
    try:
        want = float(upstream(copy.deepcopy(result), copy.deepcopy(rules)))
    except json.JSONDecodeError:  # upstream parses outside its try; a text that is not JSON scores 0 here
        want = 0.0
    got = check_direct_json_object(copy.deepcopy(result), copy.deepcopy(rules))
    assert got == pytest.approx(want, abs=1e-6), (result, rules, got, want)


WORD = st.text(alphabet="ab '\" \tK", max_size=5)
SCALAR = st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 2, 1.0, 2.5]), WORD)
VALUE = st.one_of(SCALAR, st.lists(st.one_of(st.sampled_from([1, 2]), WORD), max_size=3),
                  st.dictionaries(st.sampled_from(["a", "b"]), SCALAR, max_size=2))
EXPECTED = st.dictionaries(st.sampled_from(KEYS), VALUE, max_size=4)
DERIVATIONS = ("keep", "drop", "pad", "wrap", "embed", "first", "other")


def derive(value: Any, how: str, other: Any) -> tuple[bool, Any]:
    """(present, value) of the result's entry made from an expected value."""
    if how == "drop":
        return False, None
    if how == "pad":
        return True, f" {value}\n" if isinstance(value, str) else value
    if how == "wrap":
        return True, [value] if not isinstance(value, list) else [*value, "extra"]
    if how == "embed":
        return True, f"see {value}." if isinstance(value, str) else value
    if how == "first":  # one of a list of alternatives, as a string
        return True, value[0] if isinstance(value, list) and value else value
    if how == "other":
        return True, other
    return True, value


def render(result: dict[str, Any], form: str) -> Any:
    if form == "json":
        return json.dumps(result)
    if form == "json_padded":
        return f"\n  {json.dumps(result, indent=1)}\n"
    if form == "printed":  # what a Python script prints: single quotes, and True/None where JSON has true/null
        return f"{result}\n"
    if form == "list":
        return [result]
    return result


@settings(max_examples=400, deadline=None)
@given(expected=EXPECTED, hows=st.lists(st.sampled_from(DERIVATIONS), min_size=4, max_size=4),
       others=st.lists(VALUE, min_size=4, max_size=4),
       extra=st.dictionaries(st.sampled_from(["extra", "name"]), VALUE, max_size=1),
       form=st.sampled_from(["dict", "dict", "json", "json_padded", "printed", "list"]),
       options=st.fixed_dictionaries({}, optional={"expect_in_result": st.sampled_from([True, False, 1, 0]),
                                                   "ignore_list_order": st.booleans()}))
def test_results_score_as_upstream(expected: dict[str, Any], hows: list[str], others: list[Any],
                                   extra: dict[str, Any], form: str, options: dict[str, Any]) -> None:
    result = dict(extra)
    for (key, value), how, other in zip(expected.items(), hows, others):
        present, derived = derive(value, how, other)
        if present:
            result[key] = derived
    assert_same_score(render(result, form), {"expected": expected, **options})


PRINTED_RULES = {"expected": {"hash": ["Kili", "Kilimanjaro.jpg", "kilimanjaro.jpg"]}, "expect_in_result": True}

CASES = [
    # task ce2b64a2: a script prints a dict; a list of alternatives means "any of these"
    ("{'hash': 'Kilimanjaro.jpg'}\n", PRINTED_RULES),
    ("{'hash': 'Everest.jpg'}\n", PRINTED_RULES),
    ({"hash": ["a.jpg", "Kili"]}, PRINTED_RULES),
    ({"hash": 3}, PRINTED_RULES),
    ("{'name': \"it's\"}", {"expected": {"name": "it's"}}),  # the swap breaks an apostrophe: upstream raises
    ("", {"expected": {}}),
    ("null", {"expected": {}}),
    ("[]", {"expected": {}}),
    ("[]", {"expected": {"a": 1}}),
    ({"q": "drip coffee maker "}, {"expected": {"q": "drip coffee maker"}}),  # values compare exactly
    ({"q": "drip coffee maker "}, {"expected": {"q": "drip coffee maker"}, "expect_in_result": True}),
    ({"q": None}, {"expected": {"q": "drip"}, "expect_in_result": True}),
    ({"q": {"drip": 1}}, {"expected": {"q": "drip"}, "expect_in_result": True}),
    ({"n": 2.0}, {"expected": {"n": 2}}),
    ({"n": 1}, {"expected": {"n": True}}),
    ({}, {"expected": {"n": None}}),
    ({"n": 2}, {"expected": {"n": 2}, "expect_in_result": True}),  # a number is no expected type there
    # task f5d96daf puts ignore_list_order beside expected, where upstream never reads it
    ({"modelList": ["b", "a"]}, {"expected": {"modelList": ["a", "b"]}, "ignore_list_order": True}),
    ({"modelList": ["b", "a"]}, {"expected": {"modelList": ["a", "b"], "ignore_list_order": True}}),
    ({"modelList": ["b", "a"], "ignore_list_order": [1]},
     {"expected": {"modelList": ["a", "b"], "ignore_list_order": [1]}}),
    ({"a": "x"}, {"expected": {"a": EVALUATION_FAILED}}),
    ({"a": "x"}, {"expected": {"b": "y", "a": EVALUATION_FAILED}, "expect_in_result": True}),
    ({"a": "x"}, {}),
    ({"a": "x"}, {"expected": None}),
    ({"a": "x"}, {"expected": ["a"]}),
    ({"a": "x"}, None),
    (None, {"expected": {}}),
    (b'{"a": "x"}', {"expected": {"a": "x"}}),  # bytes are not parsed upstream
    (b'{"a": "x"}', {"expected": {}}),
]


@pytest.mark.parametrize("result, rules", CASES, ids=[str(i) for i in range(len(CASES))])
def test_named_cases_score_as_upstream(result: Any, rules: Any) -> None:
    assert_same_score(result, rules)


def test_named_cases_keep_their_meaning() -> None:
    assert check_direct_json_object("{'hash': 'Kilimanjaro.jpg'}\n", PRINTED_RULES) == 1.0
    assert check_direct_json_object({"q": "drip coffee maker "}, {"expected": {"q": "drip coffee maker"}}) == 0.0
    assert check_direct_json_object("{'name': \"it's\"}", {"expected": {"name": "it's"}}) == 0.0  # upstream raises
