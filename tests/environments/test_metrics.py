"""Metrics on hand-made files: strings, rules, text, JSON, and the value-rule language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from environments.judges import metrics as m
from environments.judges.rules import match_value


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_string_metrics_follow_osworld_argument_shapes() -> None:
    assert m.exact_match("yes\n", {"expected": "yes\n"}) == 1.0
    assert m.exact_match("yes", {"expected": "yes\n"}) == 0.0
    assert m.exact_match(None, {"expected": None}) == 1.0  # as upstream: None equals an expected None
    assert m.check_include_exclude("a b c", {"include": ["a", "c"], "exclude": ["d"]}) == 1.0
    assert m.check_include_exclude("a b c d", {"include": ["a"], "exclude": ["d"]}) == 0.0
    assert m.check_include_exclude("a b", {"include": ["z"]}) == 0.0
    assert m.check_include_exclude(None, {"include": []}) == 0.0
    assert m.match_in_list("pear", {"expected": ["apple", "pear"]}) == 1.0
    assert m.is_in_list(["x", "y"], {"expected": "y"}) == 1.0
    assert m.literal_match("Hello", "hello", ignore_case=True) == 1.0
    assert m.literal_match(["A", "b"], ["a", "B"], type="list", ignore_case=True) == 1.0
    with pytest.raises(ValueError, match="literal_match: type"):
        m.literal_match("a", "a", type="set")


def test_fuzzy_match_is_a_similarity_ratio() -> None:
    assert m.fuzzy_match("kitten", {"expected": "kitten"}) == 1.0
    partial = m.fuzzy_match("kitten", {"expected": "sitting"})
    assert 0.4 < partial < 0.7
    assert m.fuzzy_match(None, {"expected": "x"}) == 0.0
    assert m.fuzzy_match_threshold("colour", {"expected": "color"}, threshold=0.95) == 0.0
    assert m.fuzzy_match_threshold("colour", {"expected": "color"}, threshold=0.9) == 1.0


@pytest.mark.parametrize(
    ("value", "rule", "expected"),
    [
        (3, {"method": "eq", "ref": 3.0}, True),
        ("3", {"method": "eq", "ref": 3}, False),
        (True, {"method": "eq", "ref": 1}, False),  # booleans are not numbers here
        (5, {"method": "gt", "ref": 4}, True),
        ("a", {"method": "lt", "ref": 4}, False),  # incomparable types fail instead of raising
        ("report-2024.pdf", {"method": "re", "ref": r"\d{4}"}, True),
        (89.9004, {"method": "approx:0.001", "ref": 89.9}, True),
        (89.92, {"method": "approx:0.001", "ref": 89.9}, False),
        ("n/a", {"method": "approx:0.1", "ref": 1}, False),
        (5, {"method": "range.ee", "ref": [1, 5]}, True),
        (5, {"method": "range.et", "ref": [1, 5]}, False),
        ("a,b", {"method": "str_set_eq", "ref": ["b", "a"]}, True),
        ("a,b", {"method": "str_list_eq", "ref": ["b", "a"]}, False),
        ("  Yes ", {"method": "ieq", "ref": "yes"}, True),
    ],
)
def test_value_rules(value, rule, expected) -> None:  # type: ignore[no-untyped-def]
    assert match_value(value, rule) is expected


def test_unknown_value_rule_method_names_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown value rule method 'similar'.*approx"):
        match_value(1, {"method": "similar", "ref": 1})


def test_text_file_metrics(tmp_path: Path) -> None:
    gold = write(tmp_path / "gold.txt", "alpha\nbeta\n")
    same = write(tmp_path / "same.txt", "alpha\nbeta\n")
    spaced = write(tmp_path / "spaced.txt", "alpha   \n\nBETA")
    assert m.compare_text_file(same, gold) == 1.0
    assert m.compare_text_file(spaced, gold) == 0.0
    assert m.compare_text_file(spaced, gold, ignore_blanks=True, ignore_case=True) == 1.0
    assert m.compare_text_file(str(tmp_path / "missing.txt"), gold) == 0.0
    assert m.compare_text_file(None, gold) == 0.0
    assert m.diff_text_file(write(tmp_path / "half.txt", "alpha\ngamma\n"), gold) == pytest.approx(0.5)
    assert m.check_text_file(same, {"include": ["beta"], "exclude": ["gamma"]}) == 1.0


def test_check_list_and_csv(tmp_path: Path) -> None:
    log = write(tmp_path / "log.txt", "INFO start\nERROR disk full\nINFO done\n")
    assert m.check_list(log, {"expect": [r"^ERROR"], "unexpect": [r"panic"]}) == 1.0
    assert m.check_list(log, {"expect": [r"^WARN"]}) == 0.0
    assert m.check_list(log, {"unexpect": [r"disk"]}) == 0.0
    table = write(tmp_path / "t.csv", "name,team\nAda,Core\nLinus,Kernel\n")
    assert m.check_csv(table, {"expect": [{"name": "Ada", "team": "Core"}]}) == 1.0
    assert m.check_csv(table, {"expect": [{"name": "Ada", "team": "Kernel"}]}) == 0.0
    assert m.check_csv(table, {"unexpect": [{"name": "Linus"}]}) == 0.0
    other = write(tmp_path / "u.csv", "name,team\n Ada,Core\nLinus,Kernel")
    assert m.compare_csv(other, table) == 0.0
    assert m.compare_csv(other, table, strict=False) == 1.0


def test_check_json_expect_and_unexpect(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", json.dumps({"debug": True, "db": {"port": 5432, "hosts": ["a", "b"]}}))
    ok = {"expect": [{"key": ["debug"], "method": "eq", "ref": True},
                     {"key": ["db", "port"], "method": "approx:0.5", "ref": 5432},
                     {"key": ["db", "hosts", 1], "method": "eq", "ref": "b"}],
          "unexpect": [{"key": ["db", "password"], "method": "re", "ref": "."}]}
    assert m.check_json(path, ok) == 1.0
    assert m.check_json(path, {"expect": [{"key": ["debug"], "method": "eq", "ref": False}]}) == 0.0
    assert m.check_json(path, {"expect": [{"key": ["nope"], "method": "eq", "ref": 1}]}) == 0.0
    assert m.check_json(path, {"unexpect": [{"key": ["debug"], "method": "eq", "ref": True}]}) == 0.0
    broken = write(tmp_path / "broken.json", '{"debug": tru')
    assert m.check_json(broken, ok) == 0.0  # a malformed file is a wrong answer, not a crash
    yaml_file = write(tmp_path / "c.yml", "debug: true\n")
    assert m.check_json(yaml_file, {"expect": [{"key": ["debug"], "method": "eq", "ref": True}]}, is_yaml=True) == 1.0


def test_check_direct_json_object() -> None:
    rules = {"expected": {"name": "Rosa", "count": 2}}
    assert m.check_direct_json_object({"name": "Rosa", "count": 2.0, "extra": 1}, rules) == 1.0
    assert m.check_direct_json_object({"name": "Rosa ", "count": 2}, rules) == 0.0  # values compare exactly
    assert m.check_direct_json_object('{"name": "Rosa", "count": 3}', rules) == 0.0
    assert m.check_direct_json_object("{'name': 'Rosa', 'count': 2}\n", rules) == 1.0  # a printed dict parses
    assert m.check_direct_json_object("not json", rules) == 0.0
    assert m.check_direct_json_object({"tags": "red, blue"}, {"expected": {"tags": "blue"}, "expect_in_result": True}) == 1.0
    alternatives = {"expected": {"name": ["Kili", "Kilimanjaro.jpg"]}, "expect_in_result": True}
    assert m.check_direct_json_object({"name": "Kilimanjaro.jpg"}, alternatives) == 1.0  # a list: any of them
    assert m.check_direct_json_object({"name": "Kilimanjaro"}, alternatives) == 0.0


def test_infeasible_metric_itself_never_scores() -> None:
    # infeasible tasks are scored by the evaluation from the last action, not by this function
    assert m.infeasible(None) == 0.0


def test_check_accessibility_tree_rules() -> None:
    tree = ('<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state">'
            '<application name="mousepad"><frame name="notes.txt - Mousepad" st:showing="true">'
            "<text>hello world</text></frame></application></desktop-frame>")
    showing = [{"xpath": "//frame[@st:showing='true']"}]
    assert m.check_accessibility_tree(tree, showing) == 1.0
    assert m.check_accessibility_tree(tree, [{"xpath": "//application[@name='gimp']"}]) == 0.0
    assert m.check_accessibility_tree(tree, [{"xpath": "//text", "text": "hello world"}]) == 1.0
    assert m.check_accessibility_tree(tree, [{"xpath": "//text", "text": "hello"}]) == 0.0
    fuzzy = m.check_accessibility_tree(tree, [{"xpath": "//text", "text": "hello wrld", "exact": False}])
    assert 0.9 < fuzzy < 1.0
    assert m.check_accessibility_tree(None, showing) == 0.0
    assert m.check_accessibility_tree("<not xml", showing) == 0.0
    with pytest.raises(ValueError, match="needs an 'xpath'"):
        m.check_accessibility_tree(tree, [{"selectors": ["frame"]}])
