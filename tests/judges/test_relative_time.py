"""``rule_relativeTime`` against OSWorld's own getter (desktop-env's ``getters/misc.py``) on every day of a
year, for every phrase combination OSWorld's tasks use, with "now" pinned in upstream's module."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from typing import Any

import pytest

from environments.judges import relative_time
from tests.judges.upstream import getters_module

# the rules blocks of OSWorld's chrome tasks (relativeTime + the expected keys they fill), timezone pinned
CASES: list[dict[str, Any]] = [
    {"relativeTime": {"from": "10th next month", "to": "11th next month"},
     "expected": {"start_location": "Boston", "from": "{DoW}, {Month} {Day0D}, 12:00 PM",
                  "to": "{DoW}, {Month} {Day0D}, 12:00 PM"}},
    {"relativeTime": {"from": "5th next month"}, "expected": {"start": "SEA", "time": "{DoW}, {Month} {Day0D}, {Year}"}},
    {"relativeTime": {"from": "tomorrow"}, "expected": {"time": "{DoW}, {Month} {Day0D}, {Year}"}},
    {"relativeTime": {"from": "next week Saturday", "to": "next week Sunday"}, "timezone": "America/New_York",
     "expected": {"from": "{DoW}, {Month} {Day0D}", "to": "{DoW}, {Month} {Day0D}", "city": "New York City Hotels"}},
    {"relativeTime": {"from": "next week Friday", "to": "next week Sunday"}, "timezone": "America/New_York",
     "expected": {"from": "Check In{DoW}, {Month} {Day0D}", "to": "Check Out{DoW}, {Month} {Day0D}"}},
    {"relativeTime": {"from": "first monday eight months later"},
     "expected": {"content": "TAP", "time": "{MonthFull} {Day0D}, 10:15 AM"}},
    {"relativeTime": {"from": "first monday four months later"}, "expected": {"time": "{MonthFull} {Day0D}"}},
    {"relativeTime": {"from": "next Monday split", "to": "next Friday split"}, "timezone": "Europe/Zurich",
     "expected": {"puDay": "{DayD}", "puMonth": "{MonthD}", "puYear": "{Year}", "doDay": "{DayD}",
                  "doMonth": "{MonthD}", "doYear": "{Year}"}},
    {"relativeTime": {"from": "this month"}, "expected": {"time": "{month}-weather"}},
    {"relativeTime": {"from": "next Monday"}, "expected": {"time": "{Year}-{Month0D}-{Day0D}"}},
    {"relativeTime": {"from": "10th next month"}, "expected": {"time": "{Year}-{Month0D}-{DayD}"}},
    # phrases of upstream's tables that no task uses today
    {"relativeTime": {"from": "this Saturday", "to": "this Sunday"}, "expected": {"from": "{DayD}", "to": "{DayD}"}},
    {"relativeTime": {"from": "tomorrow", "to": "next Friday"}, "expected": {"from": "{DoW}", "to": "{DoW} {DayD}"}},
    {"relativeTime": {"from": "next Friday", "to": "next Sunday"}, "expected": {"from": "{DayD}", "to": "{DayD}"}},
    {"relativeTime": {"from": "next Saturday", "to": "next Sunday"}, "expected": {"from": "{DayD}", "to": "{DayD}"}},
    {"relativeTime": {"from": "next Monday", "to": "next Friday"}, "expected": {"from": "{DayD}", "to": "{DayD}"}},
    {"relativeTime": {"from": "tomorrow", "to": "next week Sunday"}, "expected": {"from": "{DayD}", "to": "{DayD}"}},
]


def _upstream() -> Any:
    return getters_module("misc")


def test_every_day_of_a_year_and_every_phrase_matches_upstream() -> None:
    upstream = _upstream()
    compared = upstream_errors = 0
    day = dt.date(2026, 1, 1)
    while day.year == 2026:
        today = day

        class Pinned(dt.datetime):
            @classmethod
            def now(cls, tz: Any = None) -> dt.datetime:  # type: ignore[override]
                return tz.localize(dt.datetime(today.year, today.month, today.day, 12, 0))

        upstream.datetime = Pinned
        for case in CASES:
            rules = {"timezone": "UTC", **copy.deepcopy(case)}
            ours = relative_time.relative_rules(rules, today)
            try:
                theirs = upstream.get_rule_relativeTime(None, {"rules": copy.deepcopy(rules)})
            except ValueError:  # upstream's month arithmetic reaches month 0 (August / April)
                upstream_errors += 1
                month = (today.month + (4 if "four" in case["relativeTime"]["from"] else 8)) % 12
                assert month == 0, (today, case)
                continue
            assert ours["expected"] == theirs["expected"], (today.isoformat(), case["relativeTime"])
            compared += 1
        day += dt.timedelta(days=1)
    assert compared == 365 * len(CASES) - upstream_errors and upstream_errors == 31 + 30  # August + April


def test_the_getter_fills_a_copy_in_the_rules_timezone() -> None:
    rules = {"relativeTime": {"from": "tomorrow"}, "timezone": "Pacific/Kiritimati", "expected": {"time": "{Year}"}}
    out = asyncio.run(relative_time.get_rule_relativeTime(None, {"rules": rules}))
    assert rules["expected"]["time"] == "{Year}"  # the task's own rules are left as they were
    kiritimati = relative_time.today_in("Pacific/Kiritimati") + dt.timedelta(days=1)
    assert out["expected"]["time"] == str(kiritimati.year) and out["timezone"] == "Pacific/Kiritimati"
    assert relative_time.fill("{DoW} {DoW}", dt.date(2026, 12, 7)) == "Mon {DoW}"  # first occurrence only
    with pytest.raises(ValueError, match="unknown phrase 'yesterday'"):
        relative_time.relative_rules({"relativeTime": {"from": "yesterday"}, "expected": {"time": ""}},
                                     dt.date(2026, 1, 1))
