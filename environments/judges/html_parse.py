"""OSWorld's ``active_tab_html_parse`` getter: values read from the active tab's live DOM.

Upstream drives the page with Playwright over CDP; here one JavaScript expression collects the raw texts in
the active page through its DevTools WebSocket (``devtools`` action ``evaluate``, run inside the desktop),
and Python applies upstream's rules to them. The answer is a flat ``{key: value}`` (strings; booleans for the
existence checks); an element that is missing gives ``""``. ``category`` selects the rules:

* ``class`` — in this order, later keys overwriting earlier ones: ``class_multiObject`` ``{cls: {index:
  key}}`` (the stripped ``textContent`` of every ``.cls``, indexed), ``class_multiObject_child`` (the trimmed
  direct text nodes of the first ``.cls``, indexed), ``class_multiObject_only_child`` (the first ``h3`` of
  each ``.cls`` that has one, indexed), ``class_multiObject_search_exist`` ``{cls: [labels]}`` (each label:
  is it exactly one of the texts; ``is_other_exist``: True once some text of such a class is none of its
  labels, else False), ``class_singleObject`` ``{cls: key}`` (the first ``.cls``);
* ``label`` — ``labelObject`` ``{text: key}``: the innermost element whose text contains ``text``
  (case-insensitive, whitespace collapsed: Playwright's ``text=`` selector);
* ``xpath`` — ``xpathObject`` ``{xpath: key}``: the first node's text (the expression tried as a CSS
  selector when it matches nothing as an XPath);
* ``input`` — ``inputObject`` ``{xpath: key}``: the first node's input value;
* ``class&url`` — keys lowercased: ``class_multiObject`` ``{cls: [labels]}`` and ``class_multiObject_li``
  (the first ``span`` of each ``.cls li.catAllProducts``, by ``innerText``) set a label True when some text
  equals it case-insensitively, and ``is_other_exist`` True when some text is contained in none of the labels
  (else False); then ``url_include_expected`` ``[keys]`` and ``url_include_expected_multichoice``
  ``{substring: key}`` set a key not set yet to whether the page URL contains the (sub)string.

None when no browser answers or no page is open. Upstream waits for network idle; here for the document's
``load`` (``document.readyState == "complete"``), up to ``wait_s`` (default 30).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import structlog

from core.errors import ScaleCUAError

log = structlog.get_logger(__name__)

_COLLECT = r"""
(() => {
  const queries = %s;
  const all = (sel) => { try { return Array.from(document.querySelectorAll(sel)); } catch (e) { return []; } };
  const byXpath = (xp) => {
    try {
      return document.evaluate(xp, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
    } catch (e) { return null; }
  };
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim().toLowerCase();
  const byText = (text) => {
    const wanted = norm(text);
    const holds = (el) => norm(el.textContent).includes(wanted);
    let found = null;
    for (const el of document.body ? document.body.querySelectorAll("*") : []) {
      if (holds(el) && !Array.from(el.children).some(holds)) { found = el; break; }
    }
    return found;
  };
  return queries.map(([kind, sel]) => {
    if (kind === "texts") return all(sel).map((el) => el.textContent);
    if (kind === "child_texts") {
      const el = all(sel)[0];
      return el ? Array.from(el.childNodes).filter((n) => n.nodeType === Node.TEXT_NODE)
        .map((n) => n.textContent.trim()).filter(Boolean) : [];
    }
    if (kind === "h3_texts") return all(sel).map((el) => el.querySelector("h3")).filter(Boolean).map((h) => h.textContent);
    if (kind === "li_spans") return all(sel).map((el) => el.querySelector("span")).filter(Boolean).map((s) => s.innerText);
    if (kind === "xpath") { const el = byXpath(sel) || all(sel)[0]; return el ? el.textContent : null; }
    if (kind === "input") { const el = byXpath(sel); return el && "value" in el ? String(el.value) : null; }
    if (kind === "label") { const el = byText(sel); return el ? el.textContent : null; }
    return null;
  });
})()
"""

_CLASS_LISTS = (("class_multiObject", "texts"), ("class_multiObject_child", "child_texts"),
                ("class_multiObject_only_child", "h3_texts"))


def _queries(category: str, config: Mapping[str, Any]) -> list[tuple[str, str]]:
    if category == "class":
        queries = [(kind, "." + cls) for key, kind in _CLASS_LISTS for cls in dict(config.get(key) or {})]
        queries += [("texts", "." + cls) for cls in dict(config.get("class_multiObject_search_exist") or {})]
        return queries + [("texts", "." + cls) for cls in dict(config.get("class_singleObject") or {})]
    if category == "label":
        return [("label", text) for text in dict(config.get("labelObject") or {})]
    if category == "xpath":
        return [("xpath", xp) for xp in dict(config.get("xpathObject") or {})]
    if category == "input":
        return [("input", xp) for xp in dict(config.get("inputObject") or {})]
    if category == "class&url":
        return ([("texts", "." + cls) for cls in dict(config.get("class_multiObject") or {})]
                + [("li_spans", f".{cls} li.catAllProducts") for cls in dict(config.get("class_multiObject_li") or {})])
    raise ValueError(f"active_tab_html_parse: unknown category {category!r}; use class, label, xpath, input or "
                     "class&url")


def _pick(texts: list[str], index: str) -> str:
    i = int(index)
    return texts[i] if -len(texts) <= i < len(texts) else ""


def _class(config: Mapping[str, Any], answers: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    answers = list(answers)
    for key, _kind in _CLASS_LISTS:
        for _cls, picks in dict(config.get(key) or {}).items():
            texts = [t.strip() for t in answers.pop(0)]
            for index, name in dict(picks).items():
                out[name] = _pick(texts, index)
    for _cls, labels in dict(config.get("class_multiObject_search_exist") or {}).items():
        texts = [t.strip() for t in answers.pop(0)]
        for label in labels:
            if label != "is_other_exist":
                out[label] = label in texts
        if "is_other_exist" in labels:  # as upstream: once True (for any class) it stays True
            if any(text not in labels for text in texts):
                out["is_other_exist"] = True
            out.setdefault("is_other_exist", False)
    for _cls, name in dict(config.get("class_singleObject") or {}).items():
        texts = answers.pop(0)
        out[name] = texts[0].strip() if texts else ""
    return out


def _class_and_url(config: Mapping[str, Any], answers: list[Any], url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lists = [*dict(config.get("class_multiObject") or {}).values(), *dict(config.get("class_multiObject_li") or {}).values()]
    for labels, raw in zip(lists, answers):
        texts = [t.strip() for t in raw]
        for label in labels:
            if any(label.lower() == text.lower() for text in texts):
                out[label.lower()] = True
        if any(all(text.lower() not in item.lower() for item in labels) for text in texts):
            out["is_other_exist"] = True
        out.setdefault("is_other_exist", False)
    for key in config.get("url_include_expected") or []:
        out.setdefault(key.lower(), key.lower() in url.lower())
    for substring, key in dict(config.get("url_include_expected_multichoice") or {}).items():
        out.setdefault(key.lower(), substring.lower() in url.lower())
    return out


def parse(category: str, config: Mapping[str, Any], answers: list[Any], url: str) -> dict[str, Any]:
    """Upstream's rules over the raw answers of :data:`_COLLECT` for :func:`_queries`' queries."""
    if category == "class":
        return _class(config, answers)
    if category == "class&url":
        return _class_and_url(config, answers, url)
    keys = {"label": "labelObject", "xpath": "xpathObject", "input": "inputObject"}[category]
    return {name: (value or "").strip() for name, value in zip(dict(config.get(keys) or {}).values(), answers)}


async def get_active_tab_html_parse(env: Any, config: Mapping[str, Any]) -> dict[str, Any] | None:
    category = config.get("category")
    if not isinstance(category, str):
        raise ValueError(f"active_tab_html_parse getter config {dict(config)!r} needs 'category'")
    queries = _queries(category, config)
    try:
        page = await env.client.devtools({"action": "evaluate", "expression": _COLLECT % json.dumps(queries),
                                          "wait_s": float(config.get("wait_s", 30))})
    except ScaleCUAError as exc:
        log.info("no browser answers", error=str(exc))
        return None
    if page is None:
        return None
    return parse(category, config, list(page["value"]), str(page["url"]))


GETTERS = {"active_tab_html_parse": get_active_tab_html_parse}
