"""OSWorld's ``rule_relativeTime`` getter: an ``expected`` rule whose dates are phrases relative to today.

The config is ``{"rules": {"relativeTime": {"from": phrase, "to": phrase?}, "timezone": name?, "expected":
{...}, ...}}``; the answer is a copy of ``rules`` whose ``expected`` strings have their date placeholders
filled (``check_direct_json_object`` then compares them with what a page or a URL shows):

* ``{DoW}`` ``Mon``..``Sun``, ``{Month}`` ``Jan``..``Dec``, ``{MonthFull}`` ``January``.., ``{month}``
  ``january``.., ``{DayD}`` / ``{MonthD}`` unpadded, ``{Day0D}`` / ``{Month0D}`` two digits, ``{Year}``; as
  upstream, only the first occurrence of each placeholder in a string is filled.
* One date (no ``to``) fills ``expected["time"]``. A range fills ``expected["from"]`` and ``expected["to"]``,
  or, for the ``... split`` phrases, the pick-up (``puDay``/``puMonth``/``puYear``) and drop-off
  (``doDay``/``doMonth``/``doYear``) fields.

Phrases (weekday 0 = Monday): ``tomorrow``; ``this month`` (today); ``5th next month``, ``10th next month``,
``11th next month``; ``this Saturday`` / ``this Sunday``; ``next Monday`` (1-7 days ahead, 7 on a Monday),
``next Friday``, ``next Saturday``, ``next Sunday``; ``next week Friday/Saturday/Sunday`` (the named day of
the week after this one); ``first monday four/eight months later`` (the first Monday of that month). A range
ending ``next Friday`` after a ``next Monday`` start ends 4 days after it; ``next Sunday`` / ``next week
Sunday`` after a Friday or Saturday start end that weekend. Upstream raises for the months where its month
arithmetic reaches 0 (``four months later`` in August, ``eight`` in April); here those are the intended month.

"Today" is in ``rules["timezone"]``; without one upstream asks a geolocation service for the evaluating
machine's timezone, which desktops here cannot reach: UTC, as upstream falls back to.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any, Callable, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def _nth_next_month(day: int) -> Callable[[dt.date], dt.date]:
    def at(today: dt.date) -> dt.date:
        year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
        return dt.date(year, month, day)
    return at


def _first_monday_months_later(months: int) -> Callable[[dt.date], dt.date]:
    def at(today: dt.date) -> dt.date:
        index = today.month - 1 + months
        first = dt.date(today.year + index // 12, index % 12 + 1, 1)
        return first + dt.timedelta(days=(7 - first.weekday()) % 7)
    return at


def _ahead(days: Callable[[int], int]) -> Callable[[dt.date], dt.date]:
    return lambda today: today + dt.timedelta(days=days(today.weekday()))


ONE_DAY: dict[str, Callable[[dt.date], dt.date]] = {
    "tomorrow": _ahead(lambda wd: 1),
    "this month": _ahead(lambda wd: 0),
    "5th next month": _nth_next_month(5),
    "10th next month": _nth_next_month(10),
    "next Monday": _ahead(lambda wd: 7 - wd),
    "first monday four months later": _first_monday_months_later(4),
    "first monday eight months later": _first_monday_months_later(8),
}
FROM: dict[str, Callable[[dt.date], dt.date]] = {
    "tomorrow": ONE_DAY["tomorrow"],
    "this Saturday": _ahead(lambda wd: 5 - wd),
    "10th next month": _nth_next_month(10),
    "next Monday": ONE_DAY["next Monday"],
    "next Monday split": ONE_DAY["next Monday"],
    "next Friday": _ahead(lambda wd: 4 - wd if wd < 4 else 7 if wd == 4 else 7 - wd + 4),
    "next Saturday": _ahead(lambda wd: 5 - wd if wd < 5 else 7 if wd == 5 else 6),
    "next week Friday": _ahead(lambda wd: 7 - wd + 4),
    "next week Saturday": _ahead(lambda wd: 7 - wd + 5),
    "next week Sunday": _ahead(lambda wd: 7 - wd + 6),
}


def _to(phrase: str, start_phrase: str, start: dt.date, today: dt.date) -> dt.date:
    wd = today.weekday()
    if phrase == "tomorrow":
        return today + dt.timedelta(days=1)
    if phrase == "this Sunday":
        return today + dt.timedelta(days=6 - wd)
    if phrase == "11th next month":
        return _nth_next_month(11)(today)
    if phrase in ("next Friday", "next Friday split"):
        if start_phrase in ("next Monday", "next Monday split"):
            return start + dt.timedelta(days=4)
        return today + dt.timedelta(days=4 - wd if wd < 4 else 6 - wd + 5)
    if phrase == "next Sunday":
        if start_phrase in ("next Friday", "next Saturday"):
            return start + dt.timedelta(days=6 - start.weekday())
        return today + dt.timedelta(days=6 - wd if wd < 6 else 7)
    if phrase == "next week Sunday":
        if start_phrase in ("next week Friday", "next week Saturday"):
            return start + dt.timedelta(days=6 - start.weekday())
        return today + dt.timedelta(days=7 - wd + 6)
    raise ValueError(f"rule_relativeTime: unknown 'to' phrase {phrase!r}; known: tomorrow, this Sunday, 11th next "
                     "month, next Friday, next Friday split, next Sunday, next week Sunday")


def fill(template: str, day: dt.date) -> str:
    """Upstream's placeholder order and its first-occurrence-only replacement."""
    for placeholder, value in (
        ("{DoW}", DAYS[day.weekday()]), ("{Month}", MONTHS[day.month - 1][:3]), ("{DayD}", str(day.day)),
        ("{Year}", str(day.year)), ("{Month0D}", f"{day.month:02d}"), ("{month}", MONTHS[day.month - 1].lower()),
        ("{MonthFull}", MONTHS[day.month - 1]), ("{Day0D}", f"{day.day:02d}"), ("{MonthD}", str(day.month)),
    ):
        template = template.replace(placeholder, value, 1)
    return template


def today_in(timezone: str | None) -> dt.date:
    try:
        zone = ZoneInfo(timezone) if timezone else dt.timezone.utc
    except (ZoneInfoNotFoundError, ValueError):
        zone = dt.timezone.utc  # upstream: an unknown timezone is UTC
    return dt.datetime.now(zone).date()


def relative_rules(rules: Mapping[str, Any], today: dt.date) -> dict[str, Any]:
    out = copy.deepcopy(dict(rules))
    relative, expected = out.get("relativeTime"), out.get("expected")
    if not isinstance(relative, Mapping) or "from" not in relative or not isinstance(expected, dict):
        raise ValueError("rule_relativeTime needs rules.relativeTime.from (a phrase) and rules.expected (a dict)")
    start_phrase = relative["from"]
    if "to" not in relative:
        if start_phrase not in ONE_DAY:
            raise ValueError(f"rule_relativeTime: unknown phrase {start_phrase!r}; known: {', '.join(ONE_DAY)}")
        expected["time"] = fill(expected["time"], ONE_DAY[start_phrase](today))
        return out
    if start_phrase not in FROM:
        raise ValueError(f"rule_relativeTime: unknown 'from' phrase {start_phrase!r}; known: {', '.join(FROM)}")
    start = FROM[start_phrase](today)
    end = _to(relative["to"], start_phrase, start, today)
    for phrase, day, plain, split in ((start_phrase, start, "from", ("puDay", "puMonth", "puYear")),
                                      (relative["to"], end, "to", ("doDay", "doMonth", "doYear"))):
        for key in split if phrase.endswith(" split") else (plain,):
            expected[key] = fill(expected[key], day)
    return out


async def get_rule_relativeTime(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:  # noqa: N802
    rules = config.get("rules")
    if not isinstance(rules, Mapping):
        raise ValueError(f"rule_relativeTime getter config {dict(config)!r} needs 'rules' (a mapping)")
    return relative_rules(rules, today_in(rules.get("timezone")))


GETTERS = {"rule_relativeTime": get_rule_relativeTime}
