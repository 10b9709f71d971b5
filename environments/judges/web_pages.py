"""OSWorld's getters that read live websites through the desktop's browser (OSWorld's names and semantics).

Upstream drives the pages with Playwright over CDP; here the ``browse`` action of :mod:`environments.devtools`
runs the same steps through the pages' DevTools WebSockets inside the desktop: clicks are real mouse events at
the element's centre once it is visible, enabled and uncovered, typing is one text insertion into the focused,
selected field, and ``networkidle`` means loaded with no request in flight for 0.5 s. When no browser answers
on its DevTools endpoint, the getter launches ``google-chrome --remote-debugging-port=1337`` first, as upstream
does (upstream's proxy flag is not added: these desktops have no OSWorld proxy).

* ``info_from_website`` — ``url``, ``infos`` (a list), ``backups``. A new tab in the user's browser context
  loads ``url`` (``load``); before each info the tab goes back to ``url`` when its location is no longer exactly
  ``url``. Each info by ``action`` (default ``inner_text``): ``inner_text`` — the ``innerText`` of the first
  element matching ``selector`` (waited for up to 10 s); ``attribute`` — its ``attribute`` (None when the
  element lacks it); ``click_and_inner_text`` / ``click_and_attribute`` — ``selector`` is a list: each but the
  last is waited for (10 s), clicked and the page's ``load`` awaited, then the last element's ``innerText``
  (waited for 10 s) or ``attribute`` (waited for 30 s) is read. The answer is the list of values in order; when
  anything fails (no browser, a page that does not load, an element that never appears, a click that cannot
  happen) the answer is ``backups`` (None when absent). The tab is closed afterwards (upstream leaves it open).
* ``gotoRecreationPage_and_get_html_content`` — ``selector`` (``"class"``), ``class``, ``order`` (optional).
  In a fresh browser context (1280x720 viewport, upstream's extra request headers) the first of
  ``https://www.recreation.gov/``, ``http://www.recreation.gov/``, ``https://recreation.gov/`` that reaches
  ``domcontentloaded`` is opened and ``networkidle`` awaited (half of ``timeout_s``, a failure ignored);
  ``Diamond`` is typed into ``input#hero-search-input``, ``button.nav-search-button`` clicked, 10 s waited, the
  visible ``.search-result-highlight--success`` clicked and the page it opens followed; after 30 s and its
  ``networkidle`` (``timeout_s``) and 2 s more, the first visible of upstream's five "next available" selectors
  (``button.next-available`` ...; half of ``timeout_s`` each) is clicked, if any. Then the ``order``-th (from 0,
  negative from the end; default the first) element of class ``class``: ``{"expected": {class: its stripped
  textContent}}``, or ``"__EVALUATION_FAILED__"`` as the value when there is no such element. Any other failure
  is retried up to 3 times, 5 s apart; then ``{"expected": {"error": "__EVALUATION_FAILED__", "error_message":
  "Failed after 3 attempts: ..."}}``. Loads and element waits time out after ``timeout_s`` (upstream's 60).
  Test-only options: ``urls`` (the start URLs to try instead of recreation.gov's) and ``pauses_s`` (the three
  fixed waits, ``[10, 30, 2]``).

The live sites (scholar.google.com, www.recreation.gov) were not reachable where this was written: the tests
(tests/environments/test_web_pages.py) use loopback pages that reproduce the elements behind the tasks' selectors.

Strict errors: a config without ``url``/``infos``, an unknown ``action``, a click action whose ``selector`` is
not a list, an attribute action without ``attribute``, a ``selector`` other than ``class``, no ``class`` or a
non-integer ``order`` is a :class:`ValueError` (upstream would fall back to ``backups`` or an error entry).
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Sequence

import structlog

from core.errors import ScaleCUAError
from environments.judges.metrics import EVALUATION_FAILED as FAILED

log = structlog.get_logger(__name__)

BROWSER = ["google-chrome", "--remote-debugging-port=1337"]
RECREATION_BROWSER = [*BROWSER, "--no-sandbox", "--disable-web-security", "--disable-features=VizDisplayCompositor",
                      "--disable-dev-shm-usage", "--user-agent=Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 "
                      "(KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"]
RECREATION_URLS = ["https://www.recreation.gov/", "http://www.recreation.gov/", "https://recreation.gov/"]
RECREATION_HEADERS = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/webp,image/apng,*/*;q=0.8",
    "Accept-Language": "en-US,en;q=0.9", "Accept-Encoding": "gzip, deflate, br", "DNT": "1",
    "Connection": "keep-alive", "Upgrade-Insecure-Requests": "1",
}
NEXT_AVAILABLE = ["button.next-available", "button[class*='next-available']", "button[class*='next']",
                  ".next-available", "[data-testid*='next']"]
_ACTIONS = ("inner_text", "attribute", "click_and_inner_text", "click_and_attribute")


async def _ensure_browser(env: Any, command: Sequence[str]) -> None:
    try:
        await env.client.devtools({"action": "tabs", "wait_s": 3})
    except ScaleCUAError as exc:
        log.info("no browser answers: launching one", command=list(command), error=str(exc))
        await env.client.launch(list(command))


def _bound_s(steps: Sequence[Mapping[str, Any]]) -> float:
    """How long the steps can take at most, with a margin (the desktop runs a command for 600 s at most)."""
    total = 60.0
    for step in steps:
        timeout = float(step.get("timeout_s", 30))
        if step["do"] == "sleep":
            total += float(step["s"])
        elif step["do"] == "goto":
            total += timeout * len(step["url"] if isinstance(step["url"], list) else [step["url"]])
        elif step["do"] == "click":
            count = len(step["selector"]) if isinstance(step["selector"], list) else 1
            total += count * (float(step.get("wait_s", timeout)) + 3 * timeout)
        else:
            total += 2 * timeout
    return min(total, 600.0)


async def _browse(env: Any, steps: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    return dict(await env.client.devtools({"action": "browse", "steps": steps, "wait_s": 30, **options},
                                          timeout=_bound_s(steps)))


# -- info_from_website ------------------------------------------------------------------------------------

def _info_steps(config: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
    """The browse steps for ``config`` and the indices of the steps whose values are the answer."""
    url, infos = config.get("url"), config.get("infos")
    if not isinstance(url, str) or not url or not isinstance(infos, list):
        raise ValueError(f"info_from_website getter config {dict(config)!r} needs 'url' (the page) and 'infos' "
                         "(a list of {action, selector, attribute})")
    steps: list[dict[str, Any]] = [{"do": "goto", "url": url}]
    reads: list[int] = []
    for info in infos:
        action = info.get("action", "inner_text")
        if action not in _ACTIONS:
            raise ValueError(f"info_from_website: unknown action {action!r}; use one of {', '.join(_ACTIONS)}")
        selector, attribute = info.get("selector"), info.get("attribute")
        clicks = action.startswith("click_and_")
        if clicks and (not isinstance(selector, list) or not selector or not all(isinstance(s, str) for s in selector)):
            raise ValueError(f"info_from_website: {action} needs 'selector' as a list of CSS selectors (the ones to "
                             f"click, then the one to read), not {selector!r}")
        if not clicks and (not isinstance(selector, str) or not selector):
            raise ValueError(f"info_from_website: {action} needs 'selector' (one CSS selector), not {selector!r}")
        if action.endswith("attribute") and not isinstance(attribute, str):
            raise ValueError(f"info_from_website: {action} needs 'attribute' (the attribute's name)")
        steps.append({"do": "goto", "url": url, "unless_at": True})
        *to_click, last = selector if clicks else [selector]
        for sel in to_click:
            steps += [{"do": "click", "selector": sel, "wait_s": 10}, {"do": "load"}]
        read: dict[str, Any] = {"do": "read", "selector": last, "state": "attached", "timeout_s": 10}
        if action.endswith("attribute"):
            read["attribute"] = attribute
            read["timeout_s"] = 30 if clicks else 10
        reads.append(len(steps))
        steps.append(read)
    return steps, reads


async def get_info_from_website(env: Any, config: Mapping[str, Any]) -> Any:
    steps, reads = _info_steps(config)
    backups = config.get("backups")
    try:
        await _ensure_browser(env, BROWSER)
        answer = await _browse(env, steps)
    except ScaleCUAError as exc:
        log.info("info_from_website: using the backups", url=config["url"], error=str(exc))
        return backups
    if answer.get("error"):
        log.info("info_from_website: using the backups", url=config["url"], error=answer["error"])
        return backups
    return [answer["values"][index] for index in reads]


# -- gotoRecreationPage_and_get_html_content --------------------------------------------------------------

def _recreation_steps(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    if config.get("selector") != "class":
        raise ValueError(f"gotoRecreationPage_and_get_html_content: 'selector' must be \"class\" (the only kind "
                         f"upstream reads), not {config.get('selector')!r}")
    name = config.get("class")
    if not isinstance(name, str) or not name:
        raise ValueError("gotoRecreationPage_and_get_html_content needs 'class' (the class name to read)")
    try:
        order = int(config.get("order", 0))
    except (TypeError, ValueError):
        raise ValueError(f"gotoRecreationPage_and_get_html_content: 'order' must be an integer index, not "
                         f"{config.get('order')!r}") from None
    urls, pauses = list(config.get("urls", RECREATION_URLS)), [float(p) for p in config.get("pauses_s", (10, 30, 2))]
    timeout = float(config.get("timeout_s", 60))
    if not urls or not all(isinstance(u, str) for u in urls) or len(pauses) != 3:
        raise ValueError("gotoRecreationPage_and_get_html_content: 'urls' must be a list of URLs and 'pauses_s' "
                         "three numbers of seconds")
    return [
        {"do": "goto", "url": urls, "until": "domcontentloaded", "timeout_s": timeout},
        {"do": "load", "until": "networkidle", "timeout_s": timeout / 2, "optional": True},
        {"do": "fill", "selector": "input#hero-search-input", "text": "Diamond", "timeout_s": timeout},
        {"do": "click", "selector": "button.nav-search-button", "state": "visible", "timeout_s": timeout},
        {"do": "sleep", "s": pauses[0]},
        {"do": "click", "selector": ".search-result-highlight--success", "state": "visible", "popup": True,
         "timeout_s": timeout},
        {"do": "sleep", "s": pauses[1]},
        {"do": "load", "until": "networkidle", "timeout_s": timeout},
        {"do": "sleep", "s": pauses[2]},
        {"do": "click", "selector": NEXT_AVAILABLE, "state": "visible", "timeout_s": timeout / 2, "optional": True},
        {"do": "read", "selector": "." + name, "index": order, "property": "textContent"},
    ]


async def get_gotoRecreationPage_and_get_html_content(env: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    steps = _recreation_steps(config)
    name, problem = str(config["class"]), ""
    for attempt in range(3):
        try:
            await _ensure_browser(env, RECREATION_BROWSER)
            answer = await _browse(env, steps, fresh=True, viewport=[1280, 720], headers=RECREATION_HEADERS)
            problem = str(answer.get("error") or "")
        except ScaleCUAError as exc:
            problem = str(exc) or type(exc).__name__
        if not problem:
            text = answer["values"][-1]
            return {"expected": {name: FAILED if text is None else str(text).strip()}}
        log.info("recreation.gov page: attempt failed", attempt=attempt + 1, error=problem)
        if attempt < 2:
            await asyncio.sleep(5)
    return {"expected": {"error": FAILED, "error_message": f"Failed after 3 attempts: {problem}"}}


GETTERS = {"info_from_website": get_info_from_website,
           "gotoRecreationPage_and_get_html_content": get_gotoRecreationPage_and_get_html_content}
