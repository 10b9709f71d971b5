"""``active_tab_html_parse`` on a real local desktop: Chromium (behind the probe's ``google-chrome`` shim)
opens a page served by a real HTTP server on loopback, and every category is read from its live DOM through
the page's DevTools WebSocket. The page is built by a script after load, so a getter that read the HTML
source instead of the DOM would find nothing. The expected values follow upstream's rules by hand (see
environments/judges/html_parse.py); the whole task is then judged with ``check_direct_json_object``."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path

import pytest

from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.types import JudgementStatus, Task
from environments.judges.html_parse import get_active_tab_html_parse
from tests.environments.desktops import one_desktop, serving_directory

pytestmark = pytest.mark.desktop

BODY = """
<div class="location-info">  Boston Logan,
    Pick-Up </div>
<div class="location-info">BOS</div>
<div class="sep">SEA<div class="aura-separator"></div> NYC <span>not direct</span></div>
<div class="card"><h3> TAP card </h3><p>x</p></div><div class="card"><p>no heading</p></div>
<div class="card"><h3>10:15 AM</h3></div>
<span class="fT28tf">Black</span><span class="fT28tf">On sale</span>
<a class="filter-selector-link">Women</a><a class="filter-selector-link">Jerseys</a>
<ul class="crumbs"><li class="catAllProducts"><span>Toys</span></li><li class="other"><span>Kids</span></li></ul>
<p id="sort">Sorted by: <b>Price (low to high)</b></p>
<form><input type="text" value="  James Smith "><input type="text" value="james@example.com"></form>
"""
PAGE = ("<html><head><title>shop</title></head><body><script>"
        "document.body.innerHTML = %s;</script></body></html>")


@pytest.fixture()
def site(tmp_path: Path):  # type: ignore[no-untyped-def]
    import json

    (tmp_path / "shop.html").write_text(PAGE % json.dumps(BODY))
    with serving_directory(tmp_path) as url:
        yield url


CASES = [
    ({"category": "class",
      "class_multiObject": {"location-info": {"0": "start", "1": "end", "5": "missing"}},
      "class_multiObject_child": {"sep": {"0": "from", "1": "to", "2": "none"}},
      "class_multiObject_only_child": {"card": {"0": "content", "1": "time"}},
      "class_multiObject_search_exist": {"fT28tf": ["Black", "On sale", "$25 - $60", "is_other_exist"]},
      "class_singleObject": {"location-info": "first", "absent": "nothing"}},
     {"start": "Boston Logan,\n    Pick-Up", "end": "BOS", "missing": "", "from": "SEA", "to": "NYC", "none": "",
      "content": "TAP card", "time": "10:15 AM", "Black": True, "On sale": True, "$25 - $60": False,
      "is_other_exist": False, "first": "Boston Logan,\n    Pick-Up", "nothing": ""}),
    ({"category": "class&url",
      "class_multiObject": {"filter-selector-link": ["women", "jerseys", "nike"]},
      "class_multiObject_li": {"crumbs": ["Toys"]},
      "url_include_expected": ["nike", "shop"],
      "url_include_expected_multichoice": {"Spider": "Spider-Man", "SHOP.html": "page"}},
     {"women": True, "jerseys": True, "is_other_exist": False, "toys": True, "nike": False, "shop": True,
      "spider-man": False, "page": True}),
    ({"category": "xpath", "xpathObject": {"//p[@id='sort']/b": "rank", "//p[@id='gone']": "gone",
                                           "#sort b": "css"}},
     {"rank": "Price (low to high)", "gone": "", "css": "Price (low to high)"}),
    ({"category": "input", "inputObject": {"//form/input[1]": "name", "//form/input[2]": "mail",
                                           "//form/input[3]": "none"}},
     {"name": "James Smith", "mail": "james@example.com", "none": ""}),
    ({"category": "label", "labelObject": {"sorted BY:": "sort", "no such words": "nothing"}},
     {"sort": "Sorted by: Price (low to high)", "nothing": ""}),
]


def test_every_category_reads_the_live_dom_of_the_active_tab(tmp_path: Path, site: str) -> None:
    url = f"{site}/shop.html"
    rules = CASES[0][1]
    task = Task.model_validate({
        "id": "chrome-html-parse", "instruction": "test",
        "config": [
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [url]}},
        ],
        "evaluator": {"func": "check_direct_json_object",
                      "result": {"type": "active_tab_html_parse", "goto_prefix": "http://", **CASES[0][0]},
                      "expected": {"type": "rule", "rules": {"expected": rules}}},
    })
    wrong = task.model_copy(deep=True)
    wrong.evaluator.expected["rules"]["expected"] = {**rules, "end": "JFK"}  # type: ignore[index]
    judge = JudgeServices.of(load_plugins())

    async def body() -> tuple[list, float, float, object]:
        async with one_desktop(tmp_path) as (pool, env):
            await env.reset(task)
            view = types.SimpleNamespace(client=env.client)
            got = [await get_active_tab_html_parse(view, config) for config, _ in CASES]
            right = await pool.evaluate(env, task, judge=judge, last_action=None)
            assert right.status == JudgementStatus.OK, right.error
            missed = await pool.evaluate(env, wrong, judge=judge, last_action=None)
            await env.client.execute(["pkill", "-f", "remote-debugging-port"], timeout=10)
            gone = await get_active_tab_html_parse(view, {"category": "class", "wait_s": 1})
            return got, right.score, missed.score, gone

    got, right, missed, gone = asyncio.run(body())
    for (config, expected), answer in zip(CASES, got):
        assert answer == expected, config["category"]
    assert (right, missed) == (1.0, 0.0)
    assert gone is None  # no browser answers: upstream's None


def test_an_unknown_category_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="class, label, xpath, input or class&url"):
        asyncio.run(get_active_tab_html_parse(types.SimpleNamespace(client=None), {"category": "css"}))
